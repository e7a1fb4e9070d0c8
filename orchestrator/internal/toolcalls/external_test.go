package toolcalls

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestCatalogCallsAreGatedBeforeTheyReachTheProvider: a call to a catalog
// tool is checked again in the orchestrator, whatever the agent was shown:
// not assigned to the session's workspace, provider disabled, tool
// disabled or unavailable each refuse it with its code, and the external
// server never sees it; allowed, it is forwarded and answered.
func TestCatalogCallsAreGatedBeforeTheyReachTheProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	server := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	server.SetTools(catalogtest.ToolSpec{Name: "lookup", Description: "Look something up"})
	pool := catalog.New(catalog.Options{Timeout: 10 * time.Second, WorkDir: t.TempDir()})
	t.Cleanup(func() { _ = pool.Close() })
	f.d.SetExternalCaller(pool)

	prov, err := f.st.CreateMCPServer(ctx, model.MCPServer{Name: "kb", Transport: model.TransportHTTP,
		HTTP: &model.HTTPTransport{URL: server.URL}})
	require.NoError(t, err)
	discover := func() {
		tools, err := pool.Discover(ctx, prov)
		require.NoError(t, err)
		_, err = f.st.ApplyDiscovery(ctx, prov.ID, tools, time.Now())
		require.NoError(t, err)
	}
	discover()
	call := func() Result {
		return f.callAs(f.session.ID, f.task.ID, "kb__lookup", json.RawMessage(`{}`))
	}
	refused := 0
	expect := func(code model.CatalogBlock) {
		t.Helper()
		r := call()
		assert.True(t, r.IsError, "%s: %s", code, r.Text)
		assert.Equal(t, string(code), r.Code, r.Text)
		refused++
	}

	expect(model.BlockNotAssigned) // everything else off too: the first rule broken is named
	_, _, err = f.st.AssignCatalogTool(ctx, "kb__lookup", f.ws.ID, true)
	require.NoError(t, err)
	expect(model.BlockServerDisabled)
	_, _, err = f.st.SetMCPServerEnabled(ctx, "kb", true)
	require.NoError(t, err)
	expect(model.BlockToolDisabled)
	_, _, err = f.st.SetCatalogToolEnabled(ctx, "kb__lookup", true)
	require.NoError(t, err)
	server.SetTools()
	discover()
	expect(model.BlockToolUnavailable)
	assert.Empty(t, server.CallNames(), "no refused call reached the provider")

	server.SetTools(catalogtest.ToolSpec{Name: "lookup", Description: "Look something up"})
	discover()
	r := call()
	require.False(t, r.IsError, "%s: %s", r.Code, r.Text)
	assert.Contains(t, r.Text, "lookup called with {}")
	assert.Equal(t, []string{"lookup"}, server.CallNames())

	// A session of another workspace's task is refused even so.
	other, err := f.st.CreateWorkspace(ctx, "other")
	require.NoError(t, err)
	repo, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: other.ID, Provider: "github", Host: "github.com", Path: "other/x"})
	require.NoError(t, err)
	task, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: other.ID, Title: "other"}, repo.ID)
	require.NoError(t, err)
	sess, err := f.st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionRunning})
	require.NoError(t, err)
	r = f.callAs(sess.ID, task.ID, "kb__lookup", json.RawMessage(`{}`))
	assert.Equal(t, string(model.BlockNotAssigned), r.Code)
	refused++

	// The server going away is a coded failure, not a hang.
	server.Close()
	r = call()
	assert.True(t, r.IsError)
	assert.Equal(t, CodeExternalFailed, r.Code, r.Text)
	assert.Equal(t, []string{"lookup"}, server.CallNames())
	testutil.Figure(t, "catalog: call gate", "%d calls refused by the orchestrator (not assigned ×2, provider disabled, tool disabled, tool unavailable), 0 reached the server; 1 allowed call answered; a gone server is %s", refused, CodeExternalFailed)
}

func TestExternalResultsKeepTextAndSayWhatWasLeftOut(t *testing.T) {
	t.Parallel()
	r := fromExternal(&mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "found 2 pages"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}},
		StructuredContent: map[string]any{"pages": 2},
	})
	assert.False(t, r.IsError)
	assert.Equal(t, "found 2 pages\n[1 non-text content item(s) omitted: toolscope forwards text and structured results only]", r.Text)
	assert.Equal(t, map[string]any{"pages": 2}, r.Structured)
	failed := fromExternal(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "index offline"}}})
	assert.True(t, failed.IsError)
	assert.Equal(t, CodeExternalToolError, failed.Code)
	assert.Equal(t, "index offline", failed.Text)
}

// TestPlanModeCatalogCalls: a plan session may call a catalog tool only if
// its catalog record says read-only (the flag agentctl is sent); a forged
// call to one that is not is refused read_only_session by the
// orchestrator, and the external server never sees it.
func TestPlanModeCatalogCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	server := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	server.SetTools(catalogtest.ToolSpec{Name: "lookup", ReadOnly: true}, catalogtest.ToolSpec{Name: "deploy"})
	pool := catalog.New(catalog.Options{Timeout: 10 * time.Second, WorkDir: t.TempDir()})
	t.Cleanup(func() { _ = pool.Close() })
	f.d.SetExternalCaller(pool)
	prov, err := f.st.CreateMCPServer(ctx, model.MCPServer{Name: "kb", Transport: model.TransportHTTP,
		HTTP: &model.HTTPTransport{URL: server.URL}})
	require.NoError(t, err)
	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	_, err = f.st.ApplyDiscovery(ctx, prov.ID, tools, time.Now())
	require.NoError(t, err)
	_, _, err = f.st.SetMCPServerEnabled(ctx, "kb", true)
	require.NoError(t, err)
	for _, name := range []string{"kb__lookup", "kb__deploy"} {
		_, _, err = f.st.AssignCatalogTool(ctx, name, f.ws.ID, true)
		require.NoError(t, err)
		_, _, err = f.st.SetCatalogToolEnabled(ctx, name, true)
		require.NoError(t, err)
	}
	plan, err := f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModePlan, State: model.SessionRunning})
	require.NoError(t, err)

	r := f.callAs(plan.ID, f.task.ID, "kb__deploy", json.RawMessage(`{}`))
	assert.True(t, r.IsError, r.Text)
	assert.Equal(t, toolapi.CodeReadOnlySession, r.Code, r.Text)
	assert.Empty(t, server.CallNames(), "the refused call never reached the server")

	r = f.callAs(plan.ID, f.task.ID, "kb__lookup", json.RawMessage(`{}`))
	require.False(t, r.IsError, "%s: %s", r.Code, r.Text)
	r = f.callAs(f.session.ID, f.task.ID, "kb__deploy", json.RawMessage(`{}`))
	require.False(t, r.IsError, "a task session may call it: %s: %s", r.Code, r.Text)
	assert.Equal(t, []string{"lookup", "deploy"}, server.CallNames())
	testutil.Figure(t, "catalog: plan mode", "a plan session's call to a catalog tool not marked read-only is refused %s with 0 calls at the server; "+
		"its read-only tool is answered; a task session's call to the same write tool is answered", toolapi.CodeReadOnlySession)
}

// TestOversizedCatalogResultsAreRefusedAndAudited: a catalog tool's result
// over the bound is answered result_too_large and audited so, whether the
// pool stopped reading it (over catalog.MaxMessageBytes: not held) or the
// dispatcher found it over toolapi.MaxResultBytes once converted; the
// server's connection lives on, and its next call is answered.
func TestOversizedCatalogResultsAreRefusedAndAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	server := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	server.SetTools(catalogtest.ToolSpec{Name: "dump", ResultBytes: 4 << 20}, catalogtest.ToolSpec{Name: "page", ResultBytes: 5 << 19},
		catalogtest.ToolSpec{Name: "lookup"})
	pool := catalog.New(catalog.Options{Timeout: time.Minute, WorkDir: t.TempDir()})
	t.Cleanup(func() { _ = pool.Close() })
	f.d.SetExternalCaller(pool)
	prov, err := f.st.CreateMCPServer(ctx, model.MCPServer{Name: "kb", Transport: model.TransportHTTP, HTTP: &model.HTTPTransport{URL: server.URL}})
	require.NoError(t, err)
	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	_, err = f.st.ApplyDiscovery(ctx, prov.ID, tools, time.Now())
	require.NoError(t, err)
	_, _, err = f.st.SetMCPServerEnabled(ctx, "kb", true)
	require.NoError(t, err)
	for _, name := range []string{"kb__dump", "kb__page", "kb__lookup"} {
		_, _, err = f.st.AssignCatalogTool(ctx, name, f.ws.ID, true)
		require.NoError(t, err)
		_, _, err = f.st.SetCatalogToolEnabled(ctx, name, true)
		require.NoError(t, err)
	}
	call := func(tool string) Result { return f.callAs(f.session.ID, f.task.ID, tool, json.RawMessage(`{}`)) }

	dump := call("kb__dump")
	assert.Equal(t, toolapi.CodeResultTooLarge, dump.Code, dump.Text)
	assert.Equal(t, toolapi.ResultTooLarge("kb__dump", catalog.MaxMessageBytes, true), dump.Text)
	page := call("kb__page")
	assert.Equal(t, toolapi.CodeResultTooLarge, page.Code, "%.200s", page.Text)
	assert.Regexp(t, `^the result of kb__page is 2621\d{3} bytes; the limit for one result is 2097152 bytes`, page.Text)
	lookup := call("kb__lookup")
	require.False(t, lookup.IsError, "%s: %s", lookup.Code, lookup.Text)
	assert.Equal(t, []string{"dump", "page", "lookup"}, server.CallNames())

	events, err := f.st.Events(ctx, f.task.ID, 0, 1000)
	require.NoError(t, err)
	var outcomes []string
	for _, e := range events {
		if e.Kind == model.EventToolCalled {
			outcomes = append(outcomes, strings.Join(strings.Fields(e.Message)[:2], " "))
		}
	}
	assert.Equal(t, []string{"tool=kb__dump outcome=result_too_large", "tool=kb__page outcome=result_too_large", "tool=kb__lookup outcome=ok"}, outcomes)
}
