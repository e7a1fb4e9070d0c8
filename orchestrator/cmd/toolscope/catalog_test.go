package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
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
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
)

// TestCatalogToolsReachALiveSessionOnlyWhenAllowed is the catalog issue's
// acceptance scenario, through the CLI and a real agent session: a real
// external MCP server (a stdio process) is added as a provider; its tools
// are discovered disabled; a live session gains a tool only once the
// provider and the tool are enabled and the tool is assigned to the
// session's workspace, and loses it when the tool is disabled or its
// server stops listing it — one list_changed each; calls reach the server
// through the orchestrator; the provider's secret appears nowhere.
func TestCatalogToolsReachALiveSessionOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	const secret = "docs-api-key-0123456789abcdef"
	files := catalogtest.NewStdioFiles(t)
	search := catalogtest.ToolSpec{Name: "search", Description: "Search the docs", ReadOnly: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
	publish := catalogtest.ToolSpec{Name: "publish", Description: "Publish a page"}
	files.SetTools(t, search, publish)

	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, []string{"DOCS_TOOLS=" + files.ToolsFile, "DOCS_CALLS=" + files.CallsFile,
		"DOCS_STARTS=" + files.StartsFile, "DOCS_KEY=" + secret}, "--agentctl", executortest.Agentctl(t))
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	other := srv.id(t, "workspace", "workspace", "create", "other")
	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", repo)
	sid := srv.launchLocal(t, task)
	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "2025-11-25")
	base := toolapi.Surface("github")
	require.Equal(t, base, c.Names(t))
	var outputs []string
	ok := func(args ...string) string {
		out := srv.ok(t, args...)
		outputs = append(outputs, out)
		return out
	}
	counts := func(out string) map[string]any {
		var resp map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &resp), out)
		return resp["counts"].(map[string]any)
	}

	// Added: discovered, disabled, shown nowhere.
	added := counts(ok("--json", "provider", "add", "docs", "--stdio", catalogtest.StdioServer(t),
		"--env", "TOOLS_FILE=DOCS_TOOLS", "--env", "CALLS_FILE=DOCS_CALLS", "--env", "STARTS_FILE=DOCS_STARTS", "--env", "SECRET=DOCS_KEY"))
	assert.EqualValues(t, 2, added["new"])
	assert.EqualValues(t, 2, added["total"])
	assert.Contains(t, ok("tool", "list"), "docs__search")
	// Enabling the provider and the tool changes nothing yet: not assigned.
	ok("provider", "enable", "docs")
	ok("tool", "enable", "docs__search")
	ok("tool", "assign", "docs__publish", "--workspace", ws) // assigned but disabled
	ok("tool", "assign", "docs__search", "--workspace", other)
	c.ExpectNone(t, "nothing the session may use changed")
	require.Equal(t, base, c.Names(t))

	// Assigned to the session's workspace: it appears, once.
	ok("tool", "assign", "docs__search", "--workspace", ws)
	c.WaitChanged(t)
	c.ExpectNone(t, "one change, one list_changed")
	require.Equal(t, withTool(base, "docs__search"), c.Names(t))
	pushed := waitEvent(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSHED)
	assert.Equal(t, sid, pushed.GetSessionId())
	assert.Contains(t, pushed.GetMessage(), "external tools docs__search")

	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs__search", Arguments: map[string]any{"q": "limits"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `search called with {"q":"limits"}`)
	res, err = c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs__search", Arguments: map[string]any{"q": 7}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "agentctl validates against the server's schema")
	assert.Equal(t, []string{"search"}, files.CallNames(t), "one call reached the server; the invalid one did not")

	// Disabled: gone, once.
	ok("tool", "disable", "docs__search")
	c.WaitChanged(t)
	c.ExpectNone(t, "one change, one list_changed")
	require.Equal(t, base, c.Names(t))

	// Enabled again, then its server stops listing it: unavailable, gone;
	// listed again: restored, back, its enablement untouched.
	ok("tool", "enable", "docs__search")
	c.WaitChanged(t)
	files.SetTools(t, publish)
	refreshed := counts(ok("--json", "provider", "refresh", "docs"))
	assert.EqualValues(t, 1, refreshed["unavailable"])
	c.WaitChanged(t)
	require.Equal(t, base, c.Names(t))
	files.SetTools(t, search, publish)
	refreshed = counts(ok("--json", "provider", "refresh", "docs"))
	assert.EqualValues(t, 1, refreshed["restored"])
	c.WaitChanged(t)
	c.ExpectNone(t, "one change, one list_changed")
	require.Equal(t, withTool(base, "docs__search"), c.Names(t))

	// The provider disabled: gone.
	ok("provider", "disable", "docs")
	c.WaitChanged(t)
	require.Equal(t, base, c.Names(t))
	assert.Len(t, files.Starts(t), 1, "one server process served every discovery and call")

	// A new session of the workspace starts with what is allowed now.
	ok("provider", "enable", "docs")
	c.WaitChanged(t)
	url, token = bridgeConfig(t, dataDir, srv.launchLocal(t, task))
	assert.Equal(t, withTool(base, "docs__search"), mcptest.Connect(t, mcptest.HTTP(url, token), "").Names(t))

	everything := strings.Join(outputs, "\n") + srv.logs.String() + ok("--json", "tool", "show", "docs__search") + ok("--json", "provider", "get", "docs")
	assert.NotContains(t, everything, secret, "the provider's secret leaked")
	assert.Contains(t, everything, "DOCS_KEY", "the reference is shown")
	testutil.Figure(t, "catalog: live session", "a live session gained and lost a catalog tool on assign, disable, unavailable, restore and provider disable, one list_changed each; %d call reached the server through the orchestrator, 1 invalid call stopped by agentctl; 1 server process for every discovery and call",
		len(files.CallNames(t)))
}

// waitEvent returns the first event of a kind in a task's log, waiting for
// it if need be.
func waitEvent(t testing.TB, srv *orchestrator, task string, kind pb.TaskEventKind) *pb.TaskEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stream, err := pb.NewEventServiceClient(dial(t, srv.addr)).WatchTaskEvents(ctx, &pb.WatchTaskEventsRequest{TaskId: task})
	require.NoError(t, err)
	for {
		resp, err := stream.Recv()
		require.NoError(t, err, "no %s event", kind)
		if resp.GetEvent().GetKind() == kind {
			return resp.GetEvent()
		}
	}
}

func withTool(names []string, tool string) []string {
	out := append(slices.Clone(names), tool)
	slices.Sort(out)
	return out
}

// TestCatalogPushToAnUnreachableHostIsRecordedAndRepaired: a catalog change
// cannot reach a remote session whose host died. The change still commits;
// the failed push is a task event and marks the session for repair; once
// the host is back, resume relaunches the session with the tools it may
// use now.
func TestCatalogPushToAnUnreachableHostIsRecordedAndRepaired(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	files := catalogtest.NewStdioFiles(t)
	files.SetTools(t, catalogtest.ToolSpec{Name: "search", Description: "Search the docs", ReadOnly: true})
	certs := filepath.Join(t.TempDir(), "certs")
	port := freePort(t)
	for _, args := range [][]string{{"certs", "init", "--dir", certs}, {"certs", "server", "--dir", certs, "--host", "127.0.0.1"}} {
		out, err := command(t.Context(), args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	daemon := startRemoteDaemon(t, agentctl, certs, port)
	srv := startServerEnv(t, filepath.Join(t.TempDir(), "data"), []string{"DOCS_TOOLS=" + files.ToolsFile},
		remoteFlags(agentctl, certs, port)...)

	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", repo)
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "remote")), &launched))
	sid := launched["id"].(string)
	srv.ok(t, "provider", "add", "docs", "--stdio", catalogtest.StdioServer(t), "--env", "TOOLS_FILE=DOCS_TOOLS")
	srv.ok(t, "provider", "enable", "docs")
	srv.ok(t, "tool", "enable", "docs__search")

	// The host dies; the assignment commits, its push fails.
	require.NoError(t, daemon.Process.Kill())
	_ = daemon.Wait()
	srv.ok(t, "tool", "assign", "docs__search", "--workspace", ws)
	failed := waitEvent(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_EXTERNAL_TOOLS_PUSH_FAILED)
	assert.Equal(t, sid, failed.GetSessionId())
	assert.Equal(t, true, srv.session(t, sid)["needs_repair"])
	assert.Contains(t, srv.ok(t, "tool", "show", "docs__search"), ws, "the change itself was kept")

	// The host is back (empty); resume relaunches with the tool.
	startRemoteDaemon(t, agentctl, certs, port)
	assert.Contains(t, srv.ok(t, "--json", "session", "resume", sid), "running")
	assert.Nil(t, srv.session(t, sid)["needs_repair"], "repaired")
	var cfg struct {
		URL         string `json:"url"`
		BearerToken string `json:"bearer_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "mcp-config", sid)), &cfg))
	assert.Equal(t, withTool(toolapi.Surface("github"), "docs__search"), mcptest.Connect(t, mcptest.HTTP(cfg.URL, cfg.BearerToken), "").Names(t))
	testutil.Figure(t, "catalog: push to a dead host", "the change committed, the push failed as an external_tools.push_failed event and marked the session for repair; resume on the restarted host relaunched it with the tool")
}
