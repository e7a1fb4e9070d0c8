package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// TestReviewRequestReachesTheLiveAgentOnce is the lifecycle issue's
// acceptance scenario: the reviewers of a task's merge request come to
// include the workspace's user; the live agent's MCP client gets exactly
// one prompt, and every poll on that path is one provider call.
func TestReviewRequestReachesTheLiveAgentOnce(t *testing.T) {
	t.Parallel()
	const glToken = "glpat-LIFECYCLEE2ETOKEN"
	gl := forgetest.NewGitLab(t, glToken, "gl-bot")
	gl.AddProject("acme/web", "main", "fix-login")
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, []string{"E2E_GL_TOKEN=" + glToken},
		"--agentctl", executortest.Agentctl(t), "--poll-interval", "100ms")
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	srv.ok(t, "workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-env", "E2E_GL_TOKEN")
	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", repo)
	url, token := bridgeConfig(t, dataDir, srv.launchLocal(t, task))
	// Log notifications travel on stateful sessions (2025-11-25).
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "2025-11-25")
	c.Listen(t)

	mr := callStructured[toolapi.ChangeRequest](t, c, toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix login"})
	const status = "GET /api/v4/projects/acme%2Fweb/merge_requests/1"
	afterCreate := len(gl.Requests())
	waitPolls := func(n int) {
		t.Helper()
		start := countOf(gl.Requests(), status)
		require.Eventually(t, func() bool { return countOf(gl.Requests(), status) >= start+n }, mcptest.Hang, 10*time.Millisecond)
	}
	waitPolls(2)

	id := gl.UserID("gl-bot")
	gl.Update("acme/web", mr.Number, func(m *forgetest.GitLabMR) { m.Reviewers = []int64{id} })
	text := c.WaitLog(t)
	assert.Contains(t, text, "review of merge request #1 was requested from gl-bot")
	waitPolls(3)
	select {
	case extra := <-c.Logs():
		t.Fatalf("a second prompt: %s", extra)
	default:
	}
	for _, r := range gl.Requests()[afterCreate:] {
		assert.Equal(t, status, r, "one status call per cycle, nothing else")
	}

	inbox := callStructured[toolapi.Inbox](t, c, "task_inbox", nil)
	require.Len(t, inbox.Messages, 1, "the prompt is in the inbox once")
	assert.True(t, strings.HasSuffix(inbox.Messages[0].Link, "/merge_requests/1"))
	assert.Empty(t, callStructured[toolapi.Inbox](t, c, "task_inbox", nil).Messages, "read messages are not repeated")
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
