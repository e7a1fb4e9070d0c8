package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestAgentAttachesAGitLabRepository is the batch issue's acceptance
// scenario: an agent on a GitHub-only task attaches a GitLab repository
// with task_add_sources, gets one list_changed, and then sees the GitLab
// tools. The batch and its push are task events.
func TestAgentAttachesAGitLabRepository(t *testing.T) {
	t.Parallel()
	w := newTwoProviders(t, executortest.Agentctl(t), "fix login")
	dataDir, srv, gl, task := w.dataDir, w.srv, w.gl, w.task
	sid := srv.launchLocal(t, task)

	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	require.Equal(t, toolapi.Surface("github"), c.Names(t))
	info := callStructured[toolapi.TaskInfo](t, c, "task_info", nil)
	require.Len(t, info.Available, 1)
	assert.Equal(t, gl, info.Available[0].ID, "task_info names what can be attached")

	res := callStructured[toolapi.AddSourcesResult](t, c, "task_add_sources", map[string]any{"repository_ids": []string{gl}})
	assert.Equal(t, []string{"github", "gitlab"}, res.Providers)
	assert.Equal(t, uint64(2), res.Generation)
	c.WaitChanged(t)
	c.ExpectNone(t, "one batch, one list_changed")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))

	// The recompute and the push are in the task's events.
	var kinds []string
	out := srv.ok(t, "session", "get", sid)
	assert.Contains(t, out, "github,gitlab (gen 2)")
	evs := readEvents(t, srv, task)
	for _, e := range evs {
		kinds = append(kinds, e["kind"].(string))
	}
	assert.Subset(t, kinds, []string{"sources.added", "providers.recomputed", "providers.pushed"})
}

// TestRestartBetweenCommitAndPushRepairs: a batch is committed while the
// orchestrator is down (so nothing was pushed); on restart the session is
// re-attached and brought to the task's generation, and its client sees
// the new tools.
func TestRestartBetweenCommitAndPushRepairs(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	w := newTwoProviders(t, agentctl, "t")
	dataDir, srv, gl, task := w.dataDir, w.srv, w.gl, w.task
	sid := srv.launchLocal(t, task)
	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")

	srv.stop(t)
	// The commit happens; the orchestrator that would push is gone.
	st, err := store.Open(context.Background(), dataDir, store.Options{})
	require.NoError(t, err)
	_, err = st.AddSources(context.Background(), task, []string{gl}, model.Actor{Kind: model.ActorPerson, Name: "test"})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	srv = startServer(t, dataDir, "--agentctl", agentctl)
	c.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))
	out := srv.ok(t, "session", "get", sid)
	assert.Contains(t, out, "github,gitlab (gen 2)")
	assert.NotContains(t, out, "needs repair")
}

func readEvents(t *testing.T, srv *orchestrator, task string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120e9)
	defer cancel()
	cmd := command(ctx, "--server", srv.addr, "--json", "events", "watch", task)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	dec := json.NewDecoder(stdout)
	var out []map[string]any
	for {
		var e map[string]any
		require.NoError(t, dec.Decode(&e))
		out = append(out, e)
		if e["kind"] == "providers.pushed" && e["message"] != "applied at launched" {
			return out
		}
	}
}
