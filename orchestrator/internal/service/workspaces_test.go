package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestAStopThatEndsTheWorkspaceLosesNoWork: on an executor whose stop
// ends the workspace (kubernetes), a stop is refused while a checkout
// holds work its provider lacks, measured at the stop, unless the work is
// discarded; a delivered workspace stops, and is recorded removed. Where
// the workspace outlives the stop, nothing is refused.
func TestAStopThatEndsTheWorkspaceLosesNoWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const token = "ghp_stopTestToken0123456789abcdef"
	gh := forgetest.NewGitHub(t, token, "octo-bot")
	exec := fake.New("local")
	// The connection whose credential the checkouts are fetched with.
	f := &faked{live: newLiveOnStore(t, exec, service.Options{}, store.Options{}, map[string]string{"GH_TOKEN": token}), exec: exec}
	_, err := f.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: f.ws.ID, Provider: "github", APIBaseURL: gh.URL,
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}})
	require.NoError(t, err)
	task := f.task(t, "github")

	launch := func() (model.Session, string) {
		sess := f.launch(t, task.ID)
		require.Len(t, sess.Checkouts.Repositories, 1, "the task's repository is checked out")
		require.NotEmpty(t, sess.Checkouts.Dir)
		return sess, sess.Checkouts.Repositories[0].Key
	}

	f.exec.Drops = true
	sess, key := launch()
	f.exec.SetWork(sess.ID, key, executors.Work{Head: "c1", Uncommitted: 1, Unpushed: 2})
	_, err = f.svc.StopSession(ctx, sess.ID, false)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), key+" (branch "+sess.Checkouts.Repositories[0].Branch+"): 1 uncommitted path(s) and 2 unpushed commit(s)")
	assert.Contains(t, err.Error(), "--discard")
	assert.Equal(t, model.SessionRunning, f.session(t, sess.ID).State, "the session runs on")

	f.exec.SetWork(sess.ID, key, executors.Work{Head: "c2"})
	stopped, err := f.svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err, "delivered: nothing to lose")
	assert.Equal(t, model.SessionStopped, stopped.State)
	assert.False(t, stopped.Checkouts.Removed.IsZero(), "the workspace ended with the stop")
	cleaned, err := f.svc.CleanSession(ctx, sess.ID, false)
	require.NoError(t, err, "nothing left to clean")
	assert.Equal(t, stopped.Checkouts.Removed, cleaned.Checkouts.Removed)

	// Unmeasured work is not "none".
	unmeasured, _ := launch()
	_, err = f.svc.StopSession(ctx, unmeasured.ID, false)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "never measured")

	discarded, key := launch()
	f.exec.SetWork(discarded.ID, key, executors.Work{Head: "c3", Unpushed: 1})
	stopped, err = f.svc.StopSession(ctx, discarded.ID, true)
	require.NoError(t, err, "discarded on purpose")
	assert.False(t, stopped.Checkouts.Removed.IsZero())
	assert.Equal(t, 1, stopped.Checkouts.Repositories[0].Work.Unpushed, "what was discarded is on record")

	// A workspace that outlives the stop is kept, work and all.
	f.exec.Drops = false
	kept, key := launch()
	f.exec.SetWork(kept.ID, key, executors.Work{Head: "c4", Uncommitted: 3})
	stopped, err = f.svc.StopSession(ctx, kept.ID, false)
	require.NoError(t, err)
	assert.True(t, stopped.Checkouts.Removed.IsZero())
	assert.Equal(t, 3, stopped.Checkouts.Repositories[0].Work.Uncommitted)
}
