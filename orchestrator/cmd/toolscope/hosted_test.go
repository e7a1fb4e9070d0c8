package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// attached is `session attach --json`'s answer.
type attached struct {
	Session struct {
		ID, Executor, Transport, State, Mode string
		TaskID                               string `json:"task_id"`
	}
	URL         string
	BearerToken string `json:"bearer_token"`
}

func (o *orchestrator) attach(t *testing.T, args ...string) attached {
	t.Helper()
	var a attached
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, append([]string{"--json", "session", "attach"}, args...)...)), &a))
	require.NotEmpty(t, a.URL)
	require.NotEmpty(t, a.BearerToken)
	return a
}

// hostedServer is a server with the hosted endpoint on, no executor, and
// a workspace with a GitHub and a GitLab repository and a task on the
// GitHub one.
func hostedServer(t *testing.T, args ...string) twoProviders {
	t.Helper()
	w := twoProviders{dataDir: filepath.Join(t.TempDir(), "data")}
	w.srv = startServer(t, w.dataDir, append([]string{"--hosted", "127.0.0.1:0", "--poll-interval", "0"}, args...)...)
	w.ws = w.srv.id(t, "workspace", "workspace", "create", "acme")
	w.gh = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	w.gl = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	w.task = w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", "hosted", "--repo", w.gh)
	return w
}

func httpStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestHostedSessionThroughTheCLI is issue 19's hosted story end to end,
// through the real CLI and server: `session attach` prints a URL and a
// token; a go-sdk client sees the task's tools; a batch reaches it as one
// list_changed through the reconciler; its calls are authorized and
// audited like any other; the session is listed like any other; a
// plan-mode session cannot call write tools; stopping it revokes the
// token.
func TestHostedSessionThroughTheCLI(t *testing.T) {
	t.Parallel()
	w := hostedServer(t)
	a := w.srv.attach(t, w.task)
	assert.Equal(t, "hosted", a.Session.Executor)
	assert.Equal(t, "hosted", a.Session.Transport)
	assert.Equal(t, "running", a.Session.State)
	assert.Equal(t, w.task, a.Session.TaskID)
	assert.True(t, strings.HasSuffix(a.URL, "/sessions/"+a.Session.ID+"/mcp"), a.URL)

	// The token was shown once: it is in no listing, no event, no log.
	list := w.srv.ok(t, "--json", "session", "list", "--task", w.task)
	assert.Contains(t, list, a.Session.ID)
	assert.Contains(t, list, `"transport": "hosted"`)
	assert.NotContains(t, list, a.BearerToken)
	get := w.srv.session(t, a.Session.ID)
	assert.Equal(t, "hosted", get["executor"])

	c := mcptest.Connect(t, mcptest.HTTP(a.URL, a.BearerToken), "2025-11-25")
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))

	// A batch: the reconciler applies the new surface to the hosted
	// session in-process; its client is told once.
	w.srv.ok(t, "source", "add", w.task, "--repo", w.gl)
	c.WaitChanged(t)
	c.ExpectNone(t, "one batch, one list_changed")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))

	// A call goes through the orchestrator's authorization and audit.
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.TaskInfoTool, Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	var info toolapi.TaskInfo
	b, _ := json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, w.task, info.TaskID)
	audit := watchEvents(t, w.srv, w.task, func(seen []map[string]any) bool { return len(seen) >= 1 }, "--kind", "tool.called")
	assert.Equal(t, a.Session.ID, audit[0]["session_id"])
	assert.Contains(t, audit[0]["message"], "tool="+toolapi.TaskInfoTool+" outcome=ok")

	// A call that changes the caller's own surface: the reconciler applied
	// the batch in-process before the result, which names the new tools.
	task2 := w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", "self", "--repo", w.gh)
	self := w.srv.attach(t, task2)
	sc := mcptest.Connect(t, mcptest.HTTP(self.URL, self.BearerToken), "2025-11-25")
	res, err = sc.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.AddSourcesTool,
		Arguments: map[string]any{"repository_ids": []string{w.gl}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	var added toolapi.AddSourcesResult
	b, _ = json.Marshal(res.StructuredContent)
	require.NoError(t, json.Unmarshal(b, &added))
	assert.Contains(t, added.ToolsAdded, toolapi.GitLabMRCreate)
	assert.Equal(t, toolapi.Surface("github", "gitlab"), sc.Names(t))

	// Plan mode: no write tool is listed, and a call to one is refused
	// by the endpoint itself, which reports it to the audit.
	plan := w.srv.attach(t, w.task, "--mode", "plan")
	pc := mcptest.Connect(t, mcptest.HTTP(plan.URL, plan.BearerToken), "")
	assert.NotContains(t, pc.Names(t), toolapi.AddSourcesTool)
	_, err = pc.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.AddSourcesTool,
		Arguments: map[string]any{"repository_ids": []string{w.gl}}})
	require.Error(t, err, "a plan session called a write tool")
	byPlan := func(e map[string]any) bool { return e["session_id"] == plan.Session.ID }
	audit = watchEvents(t, w.srv, w.task, func(seen []map[string]any) bool { return slices.ContainsFunc(seen, byPlan) }, "--kind", "tool.called")
	probe := audit[slices.IndexFunc(audit, byPlan)]["message"].(string)
	assert.True(t, strings.HasPrefix(probe, "tool="+toolapi.AddSourcesTool+" outcome=unknown_tool "), probe)
	assert.Contains(t, probe, " refused_at=endpoint")
	// Its token is its own: it opens only its own session.
	assert.Equal(t, http.StatusUnauthorized, httpStatus(t, a.URL, plan.BearerToken))

	// Stop revokes the token at once; a replay is refused like any wrong token.
	assert.Equal(t, http.StatusOK, httpStatus(t, a.URL, a.BearerToken))
	w.srv.ok(t, "session", "stop", a.Session.ID)
	assert.Equal(t, http.StatusUnauthorized, httpStatus(t, a.URL, a.BearerToken))
	assert.Equal(t, "stopped", w.srv.session(t, a.Session.ID)["state"])
	r := w.srv.run(t, "session", "resume", a.Session.ID)
	assert.Equal(t, 5, r.code, "a hosted session is not resumed: %s", r.stderr)
	assert.Contains(t, r.stderr, "session attach")
	assert.NotContains(t, w.srv.logs.String(), a.BearerToken)
}

// TestHostedSessionBounds: --max-hosted-per-task and --max-hosted refuse
// an attach beyond them (exit 5), naming the flag; stopping one makes
// room. Without --hosted, attach says how to serve it.
func TestHostedSessionBounds(t *testing.T) {
	t.Parallel()
	w := hostedServer(t, "--max-hosted-per-task", "1", "--max-hosted", "2")
	other := w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", "other", "--repo", w.gl)
	third := w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", "third", "--repo", w.gl)
	first := w.srv.attach(t, w.task)
	r := w.srv.run(t, "session", "attach", w.task)
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--max-hosted-per-task")
	w.srv.attach(t, other)
	r = w.srv.run(t, "session", "attach", third)
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--max-hosted")
	w.srv.ok(t, "session", "stop", first.Session.ID)
	w.srv.attach(t, third)

	off := startServer(t, filepath.Join(t.TempDir(), "data"), "--poll-interval", "0")
	ws := off.id(t, "workspace", "workspace", "create", "acme")
	repo := off.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task := off.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", repo)
	r = off.run(t, "session", "attach", task)
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "--hosted")

	for _, bad := range [][]string{{"--max-hosted", "0"}, {"--hosted-body-max-bytes", "99999999999"}, {"--hosted-session-idle", "-1s"}, {"--hosted-refusal-reports", "0"}, {"--max-inspects", "0"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, _ := command(ctx, append([]string{"serve", "--data-dir", filepath.Join(t.TempDir(), "d"), "--hosted", "127.0.0.1:0"}, bad...)...).CombinedOutput()
		cancel()
		assert.Contains(t, string(out), bad[0], "serve %v", bad)
	}
}

// TestHostedSessionsEndWithTheOrchestrator: a hosted session lives in the
// orchestrator's process, so a restarted orchestrator records it lost
// (failed, needing repair) and says to attach a new one; it is not
// resumed.
func TestHostedSessionsEndWithTheOrchestrator(t *testing.T) {
	t.Parallel()
	w := hostedServer(t)
	a := w.srv.attach(t, w.task)
	w.srv.stop(t)
	again := startServer(t, w.dataDir, "--hosted", "127.0.0.1:0", "--poll-interval", "0")
	s := again.session(t, a.Session.ID)
	assert.Equal(t, "failed", s["state"])
	assert.Equal(t, true, s["needs_repair"])
	assert.Contains(t, s["status_message"], "attach a new one")
	r := again.run(t, "session", "resume", a.Session.ID)
	assert.Equal(t, 5, r.code, r.stderr)
	again.ok(t, "session", "stop", a.Session.ID)
	assert.Equal(t, "stopped", again.session(t, a.Session.ID)["state"])
}
