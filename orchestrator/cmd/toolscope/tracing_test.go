package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing/tracingtest"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// TestToolCallIsOneTrace runs a real toolscope server and a real agentctl,
// with the OTEL_* environment set for the server alone (the local executor
// passes it on to agentctl), exporting to an in-process OTLP receiver. A
// refused call and a successful one are each one trace across the two
// processes: agentctl's MCP handler (the root), its hop over the Attach
// stream, the orchestrator's end of it, the dispatcher's checks, the
// connection, and for the successful call the GitHub request, each the
// child of the one before. A launch's unary CreateSession continues the
// orchestrator's trace in agentctl through gRPC metadata. No span holds
// an argument value or the token.
func TestToolCallIsOneTrace(t *testing.T) {
	t.Parallel()
	recv := tracingtest.Start(t)
	gh := forgetest.NewGitHub(t, e2eGitHubToken, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")

	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, append([]string{"E2E_GH_TOKEN=" + e2eGitHubToken}, recv.Env()...),
		"--agentctl", executortest.Agentctl(t))
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_GH_TOKEN")
	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", repo)
	sid := srv.launchLocal(t, task)

	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	const argCanary = "ARGUMENT-CANARY-7f3e1d"
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		return res
	}
	refused := call(toolapi.GitHubPRStatus, map[string]any{"repository_id": repo})
	require.True(t, refused.IsError)
	require.Contains(t, refused.Content[0].(*mcp.TextContent).Text, toolapi.CodeNoChangeRequest)
	created := call(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "Fix login", "body": argCanary})
	require.False(t, created.IsError, "%v", created.Content)

	// The call's spans reach the receiver from two processes, in batches:
	// wait until each call's trace holds the last span each process ends
	// (agentctl's root, the orchestrator's end of the stream).
	complete := func(spans []tracingtest.Span, tool string) bool {
		root, ok := tracingtest.Find(spans, "agentctl", "tools/call "+tool)
		if !ok {
			return false
		}
		_, ok = tracingtest.Find(tracingtest.Trace(spans, root.TraceID), "toolscope", "Attach ToolCall")
		return ok
	}
	spans := recv.Wait(t, 30*time.Second, "complete traces of both calls", func(spans []tracingtest.Span) bool {
		return complete(spans, toolapi.GitHubPRStatus) && complete(spans, toolapi.GitHubPRCreate)
	})

	chain := func(tool, outcome string) []tracingtest.Span {
		t.Helper()
		root, _ := tracingtest.Find(spans, "agentctl", "tools/call "+tool)
		trace := tracingtest.Trace(spans, root.TraceID)
		for _, s := range trace {
			t.Logf("%s: %s %s parent=%s span=%s attrs=%v events=%v", tool, s.Service, s.Name, s.ParentID, s.SpanID, s.Attributes, s.Events)
		}
		assert.Empty(t, root.ParentID, "the MCP handler's span is the trace's root")
		assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, root.Kind)
		assert.Equal(t, tool, root.Attributes["gen_ai.tool.name"])
		assert.Equal(t, "tools/call", root.Attributes["mcp.method.name"])
		assert.Equal(t, sid, root.Attributes["toolscope.session_id"])
		assert.Equal(t, outcome, root.Attributes["toolscope.outcome"])
		assert.Equal(t, outcome != "ok", root.Error)

		parent := root
		var links []tracingtest.Span
		for _, step := range []struct{ service, name string }{
			{"agentctl", "Attach ToolCall"}, {"toolscope", "Attach ToolCall"}, {"toolscope", "toolcalls.Handle"},
		} {
			var found bool
			for _, s := range trace {
				if s.Service == step.service && s.Name == step.name && s.ParentID == parent.SpanID {
					parent, found = s, true
				}
			}
			require.True(t, found, "%s: no %s span %q under %s %q", tool, step.service, step.name, parent.Service, parent.Name)
			links = append(links, parent)
		}
		handle := parent
		assert.Equal(t, outcome, handle.Attributes["toolscope.outcome"])
		assert.Equal(t, sid, handle.Attributes["toolscope.session_id"], "the dispatcher names the session from its records")
		assert.Equal(t, task, handle.Attributes["toolscope.task_id"])
		assert.Contains(t, handle.Events, "session: on the link, known, on its task, running")
		assert.Contains(t, handle.Events, "connection: the workspace is connected to the provider")
		open, ok := tracingtest.Find(trace, "toolscope", "connections.Open")
		if assert.True(t, ok, "the connection's gates are in the call's trace") {
			assert.Equal(t, handle.SpanID, open.ParentID)
			assert.Contains(t, open.Events, "credential: resolved")
		}
		return append(links, trace...)
	}

	refusedTrace := chain(toolapi.GitHubPRStatus, toolapi.CodeNoChangeRequest)
	for _, s := range refusedTrace {
		assert.NotContains(t, s.Name, "github ", "a call refused before the provider makes no provider request")
	}
	createdTrace := chain(toolapi.GitHubPRCreate, "ok")
	handle, _ := tracingtest.Find(createdTrace, "toolscope", "toolcalls.Handle")
	request, ok := tracingtest.Find(createdTrace, "toolscope", "github POST")
	require.True(t, ok)
	assert.Equal(t, handle.SpanID, request.ParentID, "the provider request is inside the call's trace")
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, request.Kind)
	assert.Contains(t, request.Attributes["http.response.status_code"], "201")
	assert.False(t, request.Start.Before(handle.Start) || request.End.After(handle.End), "the request lies within the call's span")

	// A launch: the orchestrator's CreateSession continues in agentctl
	// through gRPC metadata.
	server, ok := tracingtest.Find(spans, "agentctl", "toolscope.agentctl.v1.AgentctlService/CreateSession")
	if assert.True(t, ok, "agentctl traces its unary RPCs") {
		client, ok := tracingtest.Find(tracingtest.Trace(spans, server.TraceID), "toolscope", "toolscope.agentctl.v1.AgentctlService/CreateSession")
		if assert.True(t, ok, "CreateSession is in the orchestrator's trace") {
			assert.Equal(t, client.SpanID, server.ParentID)
		}
	}

	// The CLI, traced too, continues its trace in the server through gRPC
	// metadata.
	cli := command(context.Background(), "--server", srv.addr, "--json", "task", "get", task)
	cli.Env = append(cli.Env, recv.Env()...)
	out, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const getTask = "toolscope.orchestrator.v1.TaskService/GetTask"
	spans = recv.Wait(t, 30*time.Second, "the CLI's and the server's GetTask spans", func(spans []tracingtest.Span) bool {
		var client, server bool
		for _, s := range spans {
			client = client || s.Name == getTask && s.Kind == tracepb.Span_SPAN_KIND_CLIENT
			server = server || s.Name == getTask && s.Kind == tracepb.Span_SPAN_KIND_SERVER
		}
		return client && server
	})
	var client, handler tracingtest.Span
	for _, s := range spans {
		switch {
		case s.Name == getTask && s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		case s.Name == getTask && s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			handler = s
		}
	}
	assert.Equal(t, client.TraceID, handler.TraceID, "the CLI's call and the server's answer are one trace")
	assert.Equal(t, client.SpanID, handler.ParentID)

	for _, s := range recv.Spans() {
		text := s.String()
		assert.NotContains(t, text, argCanary, "a span holds an argument value: %s", text)
		assert.NotContains(t, text, e2eGitHubToken, "a span holds the token: %s", text)
		assert.False(t, strings.Contains(text, token), "a span holds the session's MCP token: %s", s.Name)
	}
}

// TestAPushIsATraceLinkedFromItsBatch: a batch of sources wakes the
// reconciler, which pushes the task's running session on its own time, so
// the push is a trace of its own: a reconcile.Push span (the session, the
// task, the generation pushed, the outcome) that links to the batch's
// AddSources trace, with the orchestrator's ApplySurface call under it and
// agentctl's answer under that.
func TestAPushIsATraceLinkedFromItsBatch(t *testing.T) {
	t.Parallel()
	recv := tracingtest.Start(t)
	srv := startServerEnv(t, filepath.Join(t.TempDir(), "data"), recv.Env(), "--agentctl", executortest.Agentctl(t))
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	gl := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", gh)
	sid := srv.launchLocal(t, task)
	srv.ok(t, "source", "add", task, "--repo", gl)

	rpc := func(spans []tracingtest.Span, service, method string, kind tracepb.Span_SpanKind) []tracingtest.Span {
		var out []tracingtest.Span
		for _, s := range spans {
			if s.Service == service && s.Kind == kind && strings.HasSuffix(s.Name, "/"+method) {
				out = append(out, s)
			}
		}
		return out
	}
	// pushOf is the push linked from the batch's trace, with what is
	// under it, once all of it arrived.
	pushOf := func(spans []tracingtest.Span) (push, call, answer tracingtest.Span, ok bool) {
		batches := rpc(spans, "toolscope", "AddSources", tracepb.Span_SPAN_KIND_SERVER)
		if len(batches) != 1 {
			return push, call, answer, false
		}
		for _, s := range spans {
			if s.Service == "toolscope" && s.Name == "reconcile.Push" && slices.Contains(s.Links, batches[0].TraceID) {
				push = s
			}
		}
		for _, s := range rpc(spans, "toolscope", "ApplySurface", tracepb.Span_SPAN_KIND_CLIENT) {
			if push.SpanID != "" && s.ParentID == push.SpanID {
				call = s
			}
		}
		for _, s := range rpc(spans, "agentctl", "ApplySurface", tracepb.Span_SPAN_KIND_SERVER) {
			if call.SpanID != "" && s.ParentID == call.SpanID {
				answer = s
			}
		}
		return push, call, answer, answer.SpanID != ""
	}
	spans := recv.Wait(t, time.Minute, "the batch's push, its ApplySurface call and agentctl's answer", func(spans []tracingtest.Span) bool {
		_, _, _, ok := pushOf(spans)
		return ok
	})
	push, call, answer, _ := pushOf(spans)
	t.Logf("push %v", push)
	assert.NotEqual(t, rpc(spans, "toolscope", "AddSources", tracepb.Span_SPAN_KIND_SERVER)[0].TraceID, push.TraceID, "a trace of its own, linked")
	assert.Empty(t, push.ParentID, "the push is its trace's root")
	assert.Equal(t, sid, push.Attributes["toolscope.session_id"])
	assert.Equal(t, task, push.Attributes["toolscope.task_id"])
	assert.Equal(t, "2", push.Attributes["toolscope.generation"], "the batch's generation")
	assert.Equal(t, "ok", push.Attributes["toolscope.outcome"])
	assert.False(t, push.Error)
	assert.Equal(t, push.TraceID, call.TraceID)
	assert.Equal(t, push.TraceID, answer.TraceID, "agentctl continues the push's trace")
}
