package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
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
func TestReplicasOnOnePostgres(t *testing.T) {
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
	replica := func() *orchestrator {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o700))
		return startServer(t, dir, append(remoteFlags(agentctl, certs, port), "--database", dbURL,
			"--lease-ttl", ttl.String(), "--lease-renew", renew.String(), "--push-timeout", "2s")...)
	}
	a, b := replica(), replica()

	ws := a.id(t, "workspace", "workspace", "create", "acme")
	gh := a.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api")
	gl := a.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--url", "https://gitlab.com/acme/web")
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
	r := b.run(t, "session", "stop", sid)
	assert.Equal(t, 5, r.code, "the other replica refuses: %s", r.stderr)
	assert.Contains(t, r.stderr, "is owned by replica")

	c := mcptest.ConnectCounting(t, mcptest.HTTP(mcpConfig.URL, mcpConfig.BearerToken), "")
	assert.NotContains(t, c.Names(t), "github_pr_status")

	// A batch through b, the session a's.
	b.ok(t, "source", "add", task, "--repo", gh)
	c.WaitChanged(t)
	c.ExpectNone(t, "one batch, one list_changed, whichever replica took it")
	assert.Contains(t, c.Names(t), "github_pr_status")

	// a dies mid-flight; a batch commits through b while no replica acts
	// on the session.
	require.NoError(t, a.cmd.Process.Kill())
	_ = a.cmd.Wait()
	killed := time.Now()
	b.ok(t, "source", "add", task, "--repo", gl)
	c.WaitChanged(t)
	took := time.Since(killed)
	testutil.Figure(t, "replica takeover (processes)", "after SIGKILL of the owning replica, the other replica re-attached the remote session and its client got list_changed %d ms later (lease %s, renewal %s)",
		took.Milliseconds(), ttl, renew)
	assert.Less(t, took, ttl+renew+10*time.Second)
	assert.Contains(t, c.Names(t), "gitlab_mr_status")
	c.ExpectNone(t, "the takeover pushes once")
	assert.Equal(t, "running", b.session(t, sid)["state"])
	assert.Contains(t, b.ok(t, "--json", "session", "stop", sid), "stopped", "the new owner stops it")
}
