package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// session reads one session through the CLI.
func (o *orchestrator) session(t *testing.T, id string) map[string]any {
	t.Helper()
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, "--json", "session", "get", id)), &s))
	return s
}

// twoProviders is a workspace with a GitHub and a GitLab repository and a
// task on the GitHub one, on a server that runs local sessions.
type twoProviders struct {
	dataDir    string
	srv        *orchestrator
	ws, gh, gl string
	task       string
}

func newTwoProviders(t *testing.T, agentctl, title string) twoProviders {
	t.Helper()
	w := twoProviders{dataDir: filepath.Join(t.TempDir(), "data")}
	w.srv = startServer(t, w.dataDir, "--agentctl", agentctl)
	w.ws = w.srv.id(t, "workspace", "workspace", "create", "acme")
	w.gh = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	w.gl = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	w.task = w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", title, "--repo", w.gh)
	return w
}

// launchLocal launches a session of task on the local executor and
// returns its id.
func (o *orchestrator) launchLocal(t *testing.T, task string) string {
	t.Helper()
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, "--json", "session", "launch", task, "--executor", "local")), &launched))
	return launched["id"].(string)
}

// bridgeConfig reads the MCP endpoint agentctl wrote for a local session.
func bridgeConfig(t *testing.T, dataDir, sessionID string) (url, token string) {
	t.Helper()
	var cfg struct{ URL, Token string }
	b, err := os.ReadFile(filepath.Join(sessionDir(t, dataDir, sessionID), "bridge.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	return cfg.URL, cfg.Token
}

// sessionDir is the directory agentctl keeps a local session's MCP files
// in: under its state directory, or, when the agent runs under a uid of
// its own (the orchestrator is root), under the --sessions-dir on its
// command line.
func sessionDir(t *testing.T, dataDir, sessionID string) string {
	t.Helper()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", agentctlPID(t, dataDir, sessionID)))
	require.NoError(t, err)
	args := strings.Split(string(cmdline), "\x00")
	if i := slices.Index(args, "--sessions-dir"); i >= 0 && i+1 < len(args) {
		return filepath.Join(args[i+1], sessionID)
	}
	return filepath.Join(dataDir, "sessions", sessionID, "agentctl", "sessions", sessionID)
}

// agentctlPID finds the agentctl serving a session from its command line.
func agentctlPID(t *testing.T, dataDir, sessionID string) int {
	t.Helper()
	secret := filepath.Join(dataDir, "sessions", sessionID, "secret")
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), secret) && strings.Contains(string(cmdline), "serve") {
			return pid
		}
	}
	t.Fatalf("no agentctl process for session %s", sessionID)
	return 0
}

func taskInfo(t *testing.T, c *mcptest.Client) toolapi.TaskInfo {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var info toolapi.TaskInfo
	require.NoError(t, json.Unmarshal(b, &info))
	return info
}

// TestSessionLifecycleThroughTheCLI launches a local session and follows
// it: an MCP client sees the task's tools and gets real answers from the
// orchestrator; the orchestrator restarts and re-attaches; agentctl dies
// and the session is reported failed and in need of repair; resume
// repairs it; stop stops it.
func TestSessionLifecycleThroughTheCLI(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", agentctl)
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", gh)

	r := srv.run(t, "--json", "session", "launch", task, "--executor", "local", "--mode", "plan")
	require.Equal(t, 0, r.code, r.stderr)
	for _, step := range []string{"recorded session", "starting agentctl", "agentctl ready", "applied providers github at generation 1"} {
		assert.Contains(t, r.stderr, step, "progress lines")
	}
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &launched), "stdout holds only the session")
	sid := launched["id"].(string)
	assert.Equal(t, "running", launched["state"])
	assert.Equal(t, "plan", launched["mode"])
	assert.Equal(t, map[string]any{"providers": []any{"github"}, "generation": float64(1)}, launched["pushed_provider_set"])

	url, token := bridgeConfig(t, dataDir, sid)
	var mcpConfig struct {
		URL          string   `json:"url"`
		BearerToken  string   `json:"bearer_token"`
		StdioCommand []string `json:"stdio_command"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "mcp-config", sid)), &mcpConfig))
	assert.Equal(t, url, mcpConfig.URL, "session mcp-config tells how to attach")
	assert.Equal(t, token, mcpConfig.BearerToken)
	assert.Equal(t, []string{agentctl, "mcp", "--config"}, mcpConfig.StdioCommand[:3])
	assert.Contains(t, srv.ok(t, "session", "mcp-config", sid), "claude mcp add --transport http toolscope "+url)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	names := c.Names(t)
	assert.Subset(t, names, []string{"github_pr_status", "github_pr_comments", "session_info", "task_info"})
	assert.NotContains(t, names, "github_pr_create", "plan mode shows read-only tools only")
	info := taskInfo(t, c)
	assert.Equal(t, task, info.TaskID)
	assert.Equal(t, "fix login", info.Title)
	assert.Equal(t, []string{"github"}, info.Providers)
	// A tool the session does not list is refused by agentctl's MCP server
	// (the orchestrator refuses it too: see package toolcalls).
	_, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "gitlab_mr_status", Arguments: map[string]any{}})
	assert.ErrorContains(t, err, "unknown tool")

	// The orchestrator restarts; agentctl keeps running and is re-attached.
	srv.stop(t)
	srv = startServer(t, dataDir, "--agentctl", agentctl)
	assert.Equal(t, "running", srv.session(t, sid)["state"])
	require.Eventually(t, func() bool {
		res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		return err == nil && !res.IsError
	}, 2*time.Minute, 20*time.Millisecond, "tool calls reach the restarted orchestrator")

	// agentctl dies: the session is failed and needs repair.
	require.NoError(t, syscall.Kill(agentctlPID(t, dataDir, sid), syscall.SIGKILL))
	require.Eventually(t, func() bool { return srv.session(t, sid)["state"] == "failed" }, mcptest.Hang, 20*time.Millisecond)
	failed := srv.session(t, sid)
	assert.Equal(t, true, failed["needs_repair"])
	assert.Contains(t, failed["status_message"], "lost")
	assert.Contains(t, srv.ok(t, "session", "list", task), "needs repair")

	// Resume launches it again with the task's current set and clears the mark.
	resumed := srv.ok(t, "--json", "session", "resume", sid)
	assert.Contains(t, resumed, "running")
	after := srv.session(t, sid)
	assert.Nil(t, after["needs_repair"], "repaired")
	url, token = bridgeConfig(t, dataDir, sid)
	assert.Equal(t, task, taskInfo(t, mcptest.Connect(t, mcptest.HTTP(url, token), "")).TaskID)

	assert.Contains(t, srv.ok(t, "--json", "session", "stop", sid), "stopped")
	assert.Contains(t, srv.ok(t, "--json", "session", "stop", sid), "stopped", "stopping again succeeds")
	events := srv.ok(t, "--json", "session", "list", task)
	assert.Contains(t, events, sid)
}
