package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// callTool calls a tool and returns its result, error or not.
func callTool(t *testing.T, c *mcptest.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// eventsUntil watches a task's events from the start until n events of
// kind have come, and returns those.
func eventsUntil(t *testing.T, srv *orchestrator, task string, kind pb.TaskEventKind, n int) []*pb.TaskEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stream, err := pb.NewEventServiceClient(dial(t, srv.addr)).WatchTaskEvents(ctx, &pb.WatchTaskEventsRequest{TaskId: task})
	require.NoError(t, err)
	var out []*pb.TaskEvent
	for len(out) < n {
		resp, err := stream.Recv()
		require.NoError(t, err, "%d of %d %s events", len(out), n, kind)
		if resp.GetEvent().GetKind() == kind {
			out = append(out, resp.GetEvent())
		}
	}
	return out
}

// TestAgentSourcesFollowTheWorkspacePolicy is issue 15's attack 5 tried
// end to end: a real agent session (an MCP client through agentctl) calls
// task_add_sources under each policy. Under deny it is refused with a
// stable code and nothing changes; under approve it gets a pending
// request and no new tools, until the operator approves with the CLI: its
// inbox then says so and its tool list gains GitLab's tools (one
// list_changed). A second request is rejected with a reason, which
// reaches the inbox. Every addition's event names who made it.
func TestAgentSourcesFollowTheWorkspacePolicy(t *testing.T) {
	t.Parallel()
	w := newTwoProviders(t, executortest.Agentctl(t), "fix login")
	srv, task := w.srv, w.task
	tools := srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "local", "--path", "/src/tools")
	sid := srv.launchLocal(t, task)
	url, token := bridgeConfig(t, w.dataDir, sid)
	// Log notifications (the live offer of an inbox message) travel on
	// stateful sessions (2025-11-25).
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "2025-11-25")
	c.Listen(t)
	require.Equal(t, toolapi.Surface("github"), c.Names(t))

	// The default is allow: nothing changes for existing users.
	assert.Contains(t, srv.ok(t, "workspace", "get", w.ws), "agent sources  allow")

	// deny: a stable code, the repository named, a person to ask.
	var set map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "workspace", "set-policy", w.ws, "--agent-sources", "deny")), &set))
	assert.Equal(t, "deny", set["workspace"]["agent_source_policy"])
	res := callTool(t, c, "task_add_sources", map[string]any{"repository_ids": []string{w.gl}})
	require.True(t, res.IsError)
	denied := resultText(res)
	assert.True(t, strings.HasPrefix(denied, "source_addition_denied: "), denied)
	assert.Contains(t, denied, w.gl+" (gitlab.com/acme/web)")
	assert.Contains(t, denied, "ask a person")
	c.ExpectNone(t, "a refused batch changes no tool list")
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))
	assert.Contains(t, srv.ok(t, "task", "providers", task), "github")
	assert.NotContains(t, srv.ok(t, "task", "providers", task), "gitlab")

	// approve: a pending request, nothing attached yet.
	srv.ok(t, "workspace", "set-policy", w.ws, "--agent-sources", "approve")
	pending := callStructured[toolapi.AddSourcesResult](t, c, "task_add_sources", map[string]any{"repository_ids": []string{w.gl}})
	require.True(t, pending.Pending)
	require.NotEmpty(t, pending.RequestID)
	assert.Equal(t, []string{"github"}, pending.Providers)
	assert.Equal(t, uint64(1), pending.Generation)
	c.ExpectNone(t, "a pending request changes no tool list")

	var listed struct {
		Requests []map[string]any `json:"requests"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "source", "requests", "--task", task)), &listed))
	require.Len(t, listed.Requests, 1)
	assert.Equal(t, pending.RequestID, listed.Requests[0]["id"])
	assert.Equal(t, "pending", listed.Requests[0]["state"])
	assert.Equal(t, "session:"+sid, listed.Requests[0]["requested_by"])
	human := srv.ok(t, "source", "requests")
	assert.Contains(t, human, pending.RequestID)
	assert.Contains(t, human, "pending")

	// The operator approves: one batch, one list_changed, the inbox.
	out := srv.ok(t, "source", "approve", pending.RequestID)
	assert.Contains(t, out, "approved "+pending.RequestID+": attached 1 of 1 repositories")
	assert.Contains(t, out, "pushed to session")
	c.WaitChanged(t)
	c.ExpectNone(t, "one approval, one list_changed")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))
	live := c.WaitLog(t)
	assert.Contains(t, live, pending.RequestID, "the prompt is offered live too")
	inbox := callStructured[toolapi.Inbox](t, c, "task_inbox", nil)
	require.Len(t, inbox.Messages, 1)
	assert.Contains(t, inbox.Messages[0].Text, pending.RequestID+" (")
	assert.Contains(t, inbox.Messages[0].Text, "was approved by person:")

	// Deciding it again, or a request that does not exist: clear errors
	// naming what was typed, distinct exit codes.
	again := srv.run(t, "source", "approve", pending.RequestID)
	assert.Equal(t, 5, again.code, again.stderr)
	assert.Contains(t, again.stderr, pending.RequestID)
	assert.Contains(t, again.stderr, "was approved by person:")
	again = srv.run(t, "source", "reject", pending.RequestID, "--reason", "late")
	assert.Equal(t, 5, again.code, again.stderr)
	unknown := srv.run(t, "source", "approve", "sreq_nope")
	assert.Equal(t, 3, unknown.code, unknown.stderr)
	assert.Contains(t, unknown.stderr, `"sreq_nope"`)
	bad := srv.run(t, "workspace", "set-policy", w.ws, "--agent-sources", "sometimes")
	assert.Equal(t, 2, bad.code)
	assert.Contains(t, bad.stderr, `"sometimes"`)
	bad = srv.run(t, "source", "requests", "--state", "maybe")
	assert.Equal(t, 2, bad.code)
	assert.Contains(t, bad.stderr, `"maybe"`)

	// A second request, rejected with a reason: nothing attached, the
	// agent reads why.
	second := callStructured[toolapi.AddSourcesResult](t, c, "task_add_sources", map[string]any{"repository_ids": []string{tools}})
	require.True(t, second.Pending)
	var rejected map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "source", "reject", second.RequestID, "--reason", "tools is out of scope")), &rejected))
	assert.Equal(t, "rejected", rejected["request"]["state"])
	c.ExpectNone(t, "a rejection changes no tool list")
	inbox = callStructured[toolapi.Inbox](t, c, "task_inbox", nil)
	require.Len(t, inbox.Messages, 1)
	assert.Contains(t, inbox.Messages[0].Text, "rejected by person:")
	assert.Contains(t, inbox.Messages[0].Text, "tools is out of scope")
	all := srv.ok(t, "source", "requests", "--task", task, "--state", "all")
	assert.Contains(t, all, "approved")
	assert.Contains(t, all, "rejected")

	// allow again: the agent's batch is attached at once, as its session.
	srv.ok(t, "workspace", "set-policy", w.ws, "--agent-sources", "allow")
	attached := callStructured[toolapi.AddSourcesResult](t, c, "task_add_sources", map[string]any{"repository_ids": []string{tools}})
	assert.False(t, attached.Pending)
	assert.Equal(t, uint64(3), attached.Generation)

	// Who made each addition, in the task's events.
	added := eventsUntil(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_ADDED, 2)
	assert.True(t, strings.HasPrefix(added[0].GetActor(), "person:"), added[0].GetActor())
	assert.Contains(t, added[0].GetMessage(), pending.RequestID)
	assert.Equal(t, "session:"+sid, added[1].GetActor())
	requested := eventsUntil(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUESTED, 2)
	assert.Equal(t, "session:"+sid, requested[0].GetActor())
	decided := eventsUntil(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_REQUEST_DECIDED, 2)
	assert.True(t, strings.HasPrefix(decided[1].GetActor(), "person:"), decided[1].GetActor())
	listed.Requests = nil
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "source", "requests", "--workspace", w.ws)), &listed))
	assert.Empty(t, listed.Requests, "nothing left pending")

	testutil.Figure(t, "source-policy/e2e",
		"deny: source_addition_denied, 0 list_changed, generation 1; approve: pending request, 0 list_changed until `source approve`, "+
			"then 1 list_changed and %d tools, inbox told; second approve exit 5, unknown request exit 3; reject: reason in the inbox, 0 list_changed; "+
			"allow: attached at generation %d, actor session",
		len(toolapi.Surface("github", "gitlab")), attached.Generation)
}
