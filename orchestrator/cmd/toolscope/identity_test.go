package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/executors/executortest"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// localAgentctl dials the agentctl of a local session as an attacker who
// has read its launch secret would: its address and secret file are the
// ones the orchestrator recorded in the session's handle.
func localAgentctl(t *testing.T, dataDir, sessionID string) agentctlv1.AgentctlServiceClient {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "toolscope.db")+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var raw []byte
	require.NoError(t, db.QueryRow(`SELECT handle_state FROM sessions WHERE id = ?`, sessionID).Scan(&raw))
	var st struct {
		Addr       string `json:"addr"`
		SecretFile string `json:"secret_file"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	return executortest.ControlWithSecret(t, st.Addr, st.SecretFile)
}

// TestAgentActsOnlyAsItsOwnSession is issue 15's attacks 3 and 4 on real
// processes: an agent of a plan session on task A that holds its
// agentctl's secret creates sessions of its own on that agentctl — one
// under task B's ids (another workspace, with a running session), one
// replaying its own session id in task mode — and calls write tools
// through MCP. The orchestrator refuses each with a stable code, records
// each as a tool.called event on task A, and nothing reaches the GitHub
// stand-in.
func TestAgentActsOnlyAsItsOwnSession(t *testing.T) {
	t.Parallel()
	const token = "ghp_E2EIDENTITYTOKEN0000111122223333"
	gh := forgetest.NewGitHub(t, token, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")
	gh.AddRepo("victim/api", "main", "fix-login")
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, []string{"E2E_ID_TOKEN=" + token}, "--agentctl", executortest.Agentctl(t))

	setup := func(name, path string) (ws, task string) {
		ws = srv.id(t, "workspace", "workspace", "create", name)
		srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_ID_TOKEN")
		repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", path)
		return ws, srv.id(t, "task", "task", "create", "--workspace", ws, "--title", name, "--repo", repo)
	}
	_, taskA := setup("attacker", "acme/api")
	wsB, taskB := setup("victim", "victim/api")
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", taskA, "--executor", "local", "--mode", "plan")), &launched))
	sessA := launched["id"].(string)
	sessB := srv.launchLocal(t, taskB)

	ctl := localAgentctl(t, dataDir, sessA)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// create stops what runs on A's agentctl (it hosts one session) and
	// creates spec there directly, as the attacker did.
	current := sessA
	create := func(spec *agentctlv1.LaunchSpec) *mcptest.Client {
		t.Helper()
		_, err := ctl.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: current})
		require.NoError(t, err)
		created, err := ctl.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: spec})
		require.NoError(t, err, "agentctl accepts a session from whoever holds its secret")
		current = spec.GetSessionId()
		return mcptest.Connect(t, mcptest.HTTP(created.GetStatus().GetMcpUrl(), created.GetStatus().GetMcpBearerToken()), "")
	}
	refused := func(c *mcptest.Client, tool string, args map[string]any, code string) {
		t.Helper()
		res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		require.True(t, res.IsError, "%s was allowed", tool)
		assert.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, code+": "), "%s: %s", tool, res.Content[0].(*mcp.TextContent).Text)
	}
	before := len(gh.Requests())
	prArgs := map[string]any{"branch": "fix-login", "title": "pwned"}

	// Task B's session id and ids, on A's agentctl.
	rogue := create(&agentctlv1.LaunchSpec{SessionId: sessB, TaskId: taskB, WorkspaceId: wsB, Mode: agentctlv1.SessionMode_SESSION_MODE_TASK,
		ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: 1}})
	refused(rogue, toolapi.GitHubPRCreate, prArgs, "session_not_on_link")
	refused(rogue, "task_info", nil, "session_not_on_link")
	// A session id the orchestrator never issued.
	unknown := create(&agentctlv1.LaunchSpec{SessionId: "sess_rogue", TaskId: taskB, WorkspaceId: wsB, Mode: agentctlv1.SessionMode_SESSION_MODE_TASK,
		ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: 1}})
	refused(unknown, toolapi.GitHubPRCreate, prArgs, "session_not_on_link")
	// Probing for a tool it does not have: refused by agentctl, which
	// reports it, and recorded on the link's session like a call.
	_, probeErr := unknown.Session.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_prod", Arguments: map[string]any{}})
	require.Error(t, probeErr, "not a tool of the session")
	// Its own session id replayed in task mode: the mode is the
	// orchestrator's record (plan); and on task B's ids, the task is.
	replay := create(&agentctlv1.LaunchSpec{SessionId: sessA, TaskId: taskA, Mode: agentctlv1.SessionMode_SESSION_MODE_TASK,
		ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: 1}})
	refused(replay, toolapi.GitHubPRCreate, prArgs, "read_only_session")
	_, probeErr = replay.Session.CallTool(ctx, &mcp.CallToolParams{Name: toolapi.GitLabMRStatus, Arguments: map[string]any{}})
	require.Error(t, probeErr, "a GitHub task's session does not list GitLab's tools")
	replayB := create(&agentctlv1.LaunchSpec{SessionId: sessA, TaskId: taskB, WorkspaceId: wsB, Mode: agentctlv1.SessionMode_SESSION_MODE_TASK,
		ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: 1}})
	refused(replayB, toolapi.GitHubPRCreate, prArgs, "permission_denied")
	assert.Equal(t, before, len(gh.Requests()), "no refused call reached GitHub")
	_, err := ctl.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: current})
	require.NoError(t, err)

	// The audit: every attempt is a tool.called event on task A, the
	// task of the link's session, read through the CLI's kind filter.
	// agentctl's reports of the probes travel apart from the calls, so
	// they are checked apart.
	eventsA := watchEvents(t, srv, taskA, func(seen []map[string]any) bool { return len(seen) == 7 }, "--kind", "tool.called")
	var messages, probes []string
	for _, e := range eventsA {
		assert.Equal(t, "tool.called", e["kind"])
		assert.Equal(t, sessA, e["session_id"], "recorded as the link's session")
		m := e["message"].(string)
		assert.NotContains(t, m, "pwned", "no argument text")
		if strings.Contains(m, " refused_at=endpoint") {
			probes = append(probes, m)
		} else {
			messages = append(messages, m)
		}
	}
	require.Len(t, probes, 2, "%v", messages)
	slices.Sort(probes)
	assert.True(t, strings.HasPrefix(probes[0], "tool=deploy_prod outcome=session_not_on_link "), probes[0])
	assert.Contains(t, probes[0], "refused_at=endpoint claimed_session=sess_rogue: session sess_rogue on link of session "+sessA)
	assert.True(t, strings.HasPrefix(probes[1], "tool=gitlab_mr_status outcome=unknown_tool "), probes[1])
	assert.True(t, strings.HasSuffix(probes[1], " refused_at=endpoint"), probes[1])
	require.Len(t, messages, 5)
	for i, want := range []string{
		"tool=github_pr_create outcome=session_not_on_link ", "tool=task_info outcome=session_not_on_link ",
		"tool=github_pr_create outcome=session_not_on_link ", "tool=github_pr_create outcome=read_only_session ",
		"tool=github_pr_create outcome=permission_denied ",
	} {
		assert.True(t, strings.HasPrefix(messages[i], want), "event %d: %q", i, messages[i])
	}
	assert.Contains(t, messages[0], "session "+sessB+" on link of session "+sessA)
	assert.Contains(t, messages[2], "claimed_session=sess_rogue")
	assert.Contains(t, messages[4], "claimed_task="+taskB)
	// Task B: everything up to its session's end (after the attack), and
	// not one tool.called among it.
	srv.ok(t, "session", "stop", sessB)
	eventsB := watchEvents(t, srv, taskB, func(seen []map[string]any) bool {
		return seen[len(seen)-1]["kind"] == "session.ended"
	})
	for _, e := range eventsB {
		assert.NotEqual(t, "tool.called", e["kind"], "nothing recorded on the task the calls claimed: %v", e)
	}
	testutil.Figure(t, "call identity end to end", "a plan session's agent with its agentctl's secret: 5 of 5 forged calls refused "+
		"(3 session_not_on_link: another workspace's running session's id, an id never issued; read_only_session for its own id "+
		"replayed in task mode; permission_denied for its own id on another task), 0 requests reached GitHub; 2 probes for tools "+
		"the session does not list, refused by agentctl and reported; 7 tool.called events "+
		"on its own task (read through events watch --kind tool.called), 0 on the victim's")
}

// watchEvents runs `toolscope --json events watch TASK ARGS...` and returns
// the events it prints until done says so.
func watchEvents(t *testing.T, srv *orchestrator, task string, done func([]map[string]any) bool, args ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, append([]string{"--server", srv.addr, "--json", "events", "watch", task}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var seen []map[string]any
	lines := bufio.NewScanner(stdout)
	for !(len(seen) > 0 && done(seen)) {
		require.True(t, lines.Scan(), "watch ended after %d events: %v", len(seen), lines.Err())
		var e map[string]any
		require.NoError(t, json.Unmarshal(lines.Bytes(), &e), lines.Text())
		seen = append(seen, e)
	}
	return seen
}
