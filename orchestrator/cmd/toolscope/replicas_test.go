package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// TestReplicasOnOnePostgres is issue 21's multi-replica check with real
// processes: two `toolscope serve` on one PostgreSQL database, a session
// on the remote executor (an agentctl daemon both reach over mutual TLS)
// launched through the first. A batch through the second replica reaches
// the session's MCP client as exactly one list_changed (pushed by the
// owner, woken through the database). The owner is killed with SIGKILL;
// the second replica takes the session over once the lease expired and
// pushes the set committed meanwhile: the client gets its list_changed.
// Both replicas poll every 100 ms; the task's merge request is polled by
// one of them only (the other logs that it leaves the connection to the
// lease's holder, the holder never does), and after the kill by the one
// left.
func TestReplicasOnOnePostgres(t *testing.T) {
	t.Parallel()
	const glToken = "glpat-REPLICASE2ETOKEN"
	gitlab := forgetest.NewGitLab(t, glToken, "gl-bot")
	gitlab.AddProject("acme/web", "main", "fix-login")
	dbURL := pgtest.Shared(t).NewDatabase(t)
	agentctl := executortest.Agentctl(t)
	certs := filepath.Join(t.TempDir(), "certs")
	tool := startServer(t, t.TempDir(), "--agentctl", agentctl) // runs the certs commands
	tool.ok(t, "certs", "init", "--dir", certs)
	tool.ok(t, "certs", "server", "--dir", certs, "--host", "127.0.0.1")
	tool.stop(t)
	port := freePort(t)
	startRemoteDaemon(t, agentctl, certs, port)

	const ttl, renew = 2 * time.Second, 300 * time.Millisecond
	var dirs []string
	replica := func() *orchestrator {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		dirs = append(dirs, dir)
		return startServerEnv(t, dir, []string{"E2E_GL_TOKEN=" + glToken}, append(remoteFlags(agentctl, certs, port), "--database", dbURL,
			"--lease-ttl", ttl.String(), "--lease-renew", renew.String(), "--push-timeout", "2s",
			"--poll-interval", "100ms", "--log-level", "debug")...)
	}
	a, b := replica(), replica()

	ws := a.id(t, "workspace", "workspace", "create", "acme")
	gh := a.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api")
	a.ok(t, "workspace", "connect", ws, "--provider", "gitlab", "--base-url", gitlab.URL, "--token-env", "E2E_GL_TOKEN")
	gl := a.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	local := a.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "local", "--path", "/src/scratch")
	task := a.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", local)
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(a.ok(t, "--json", "session", "launch", task, "--executor", "remote")), &launched))
	sid := launched["id"].(string)

	var mcpConfig struct {
		URL         string `json:"url"`
		BearerToken string `json:"bearer_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.ok(t, "--json", "session", "mcp-config", sid)), &mcpConfig))
	owner := func() string { return b.session(t, sid)["owner"].(string) }
	assert.True(t, strings.HasSuffix(owner(), ":"+dirs[0]), "a owns it: %s", owner())
	r := b.run(t, "session", "stop", sid)
	assert.Equal(t, 5, r.code, "the other replica refuses: %s", r.stderr)
	assert.Contains(t, r.stderr, "is owned by replica")

	c := mcptest.ConnectCounting(t, mcptest.HTTP(mcpConfig.URL, mcpConfig.BearerToken), "")
	assert.NotContains(t, c.Names(t), "gitlab_mr_create")

	// A batch through b, the session a's.
	b.ok(t, "source", "add", task, "--repo", gl)
	c.WaitChanged(t)
	c.ExpectNone(t, "one batch, one list_changed, whichever replica took it")
	assert.Contains(t, c.Names(t), "gitlab_mr_create")

	// One replica polls the merge request the agent opens.
	callStructured[toolapi.ChangeRequest](t, c, toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix login"})
	const status = "GET /api/v4/projects/acme%2Fweb/merge_requests/1"
	polls := func() int { return countOf(gitlab.Requests(), status) }
	const skipped = "another replica holds the connection's poll lease"
	require.Eventually(t, func() bool {
		return polls() >= 5 && (strings.Contains(a.logs.String(), skipped) || strings.Contains(b.logs.String(), skipped))
	}, 30*time.Second, 10*time.Millisecond)
	assert.NotEqual(t, strings.Contains(a.logs.String(), skipped), strings.Contains(b.logs.String(), skipped),
		"exactly one replica leaves the connection to the other: it was never polled twice")

	// a dies mid-flight; a batch commits through b while no replica acts
	// on the session.
	require.NoError(t, a.cmd.Process.Kill())
	_ = a.cmd.Wait()
	killed := time.Now()
	b.ok(t, "source", "add", task, "--repo", gh)
	c.WaitChanged(t)
	took := time.Since(killed)
	testutil.Figure(t, "replica takeover (processes)", "after SIGKILL of the owning replica, the other replica re-attached the remote session and its client got list_changed %d ms later (lease %s, renewal %s)",
		took.Milliseconds(), ttl, renew)
	assert.Less(t, took, ttl+renew+10*time.Second)
	assert.Contains(t, c.Names(t), "github_pr_status")
	c.ExpectNone(t, "the takeover pushes once")
	before := polls()
	require.Eventually(t, func() bool { return polls() > before+2 }, 30*time.Second, 10*time.Millisecond,
		"the replica left polls the merge request")
	assert.Equal(t, "running", b.session(t, sid)["state"])
	assert.True(t, strings.HasSuffix(owner(), ":"+dirs[1]), "b owns it now: %s", owner())
	assert.Contains(t, b.ok(t, "--json", "session", "stop", sid), "stopped", "the new owner stops it")
}
