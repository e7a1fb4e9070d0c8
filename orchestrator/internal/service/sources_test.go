package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, executortest.RemoveBuilds, catalogtest.RemoveBuilds, pgtest.StopShared))
}

// live is a service running sessions on one backend named "local": real
// local sessions (newLive) or the in-memory fake (newFaked).
type live struct {
	svc   *service.Service
	st    *store.Store
	exec  executors.Executor
	ws    model.Workspace
	repos map[string]model.Repository // by name: github, gitlab, local1, local2, ...
}

func newLive(t testing.TB, pushTimeout time.Duration) *live {
	t.Helper()
	exec, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), OrchestratorID: t.Name()})
	require.NoError(t, err)
	return newLiveOn(t, exec, service.Options{PushTimeout: pushTimeout})
}

// newLiveOn is a service whose "local" backend is exec.
func newLiveOn(t testing.TB, exec executors.Executor, opts service.Options) *live {
	t.Helper()
	return newLiveOnStore(t, exec, opts, store.Options{}, nil)
}

// newLiveOnStore is newLiveOn on the database dbOpts names (a new SQLite
// database without a DatabaseURL); env, if set, is the environment the
// connections' credentials are resolved in.
func newLiveOnStore(t testing.TB, exec executors.Executor, opts service.Options, dbOpts store.Options, env map[string]string) *live {
	t.Helper()
	ctx := context.Background()
	broker := &events.Broker{}
	dbOpts.OnCommit = broker.Publish
	st, err := store.Open(ctx, t.TempDir(), dbOpts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	l := &live{st: st, exec: exec, repos: map[string]model.Repository{}}
	opts.Executors = map[string]executors.Executor{"local": exec}
	if env != nil {
		opts.Connections = connections.New(st, connections.Options{Credentials: credentials.Resolver{Env: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		}}})
	}
	l.svc = service.New(st, broker, opts)
	t.Cleanup(l.svc.Close)
	l.ws, err = l.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	add := func(name, provider, host, path string) {
		r, err := l.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: l.ws.ID, Provider: provider, Host: host, Path: path})
		require.NoError(t, err)
		l.repos[name] = r
	}
	add("github", "github", "github.com", "acme/api")
	add("gitlab", "gitlab", "gitlab.com", "acme/web")
	for i := range 6 {
		add(fmt.Sprintf("local%d", i), "local", "", fmt.Sprintf("/src/%d", i))
	}
	return l
}

func (l *live) task(t testing.TB, primary string) model.Task {
	t.Helper()
	task, err := l.svc.CreateTask(context.Background(), service.TaskInput{WorkspaceID: l.ws.ID, Title: "t", RepositoryID: l.repos[primary].ID})
	require.NoError(t, err)
	return task
}

func (l *live) launch(t testing.TB, taskID string) model.Session {
	t.Helper()
	sess, err := l.svc.LaunchSession(context.Background(), service.SessionInput{TaskID: taskID, Executor: "local"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = l.svc.StopSession(context.Background(), sess.ID, false) })
	return sess
}

func (l *live) ids(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, l.repos[n].ID)
	}
	return out
}

// client connects an MCP client to a session and subscribes it.
func (l *live) client(t testing.TB, sess model.Session) *mcptest.Client {
	t.Helper()
	st := l.status(t, sess)
	return mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "")
}

func (l *live) status(t testing.TB, sess model.Session) executors.Status {
	t.Helper()
	st, err := executors.NewController(map[string]executors.Executor{"local": l.exec}).Inspect(context.Background(), executors.Handle{Backend: "local", Version: sess.Handle.Version, State: sess.Handle.State})
	require.NoError(t, err)
	return st
}

// eventsAfter counts a task's events of each kind after seq, per session.
func (l *live) eventsAfter(t testing.TB, taskID string, seq uint64) map[model.EventKind]map[string]int {
	t.Helper()
	evs, err := l.st.Events(context.Background(), taskID, seq, 1000)
	require.NoError(t, err)
	out := map[model.EventKind]map[string]int{}
	for _, e := range evs {
		if out[e.Kind] == nil {
			out[e.Kind] = map[string]int{}
		}
		out[e.Kind][e.SessionID]++
	}
	return out
}

func lastSeq(t testing.TB, st *store.Store, taskID string) uint64 {
	t.Helper()
	evs, err := st.Events(context.Background(), taskID, 0, 100000)
	require.NoError(t, err)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// TestABatchIsOneRecomputeAndOnePushPerLiveSession: three live sessions
// and a stopped one; a batch of three repositories gives exactly one
// recompute and exactly one push per live session, and a connected
// client exactly one list_changed.
func TestABatchIsOneRecomputeAndOnePushPerLiveSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLive(t, 10*time.Second)
	task := l.task(t, "github")
	var sessions []model.Session
	for range 3 {
		sessions = append(sessions, l.launch(t, task.ID))
	}
	stopped := l.launch(t, task.ID)
	_, err := l.svc.StopSession(ctx, stopped.ID, false)
	require.NoError(t, err)
	c := l.client(t, sessions[0])
	require.Equal(t, toolapi.Surface("github"), c.Names(t))

	before := lastSeq(t, l.st, task.ID)
	res, err := l.svc.AddSources(ctx, task.ID, l.ids("gitlab", "local0", "local1"))
	require.NoError(t, err)
	assert.Equal(t, "github,gitlab", res.Task.Providers.Set.String())
	assert.Equal(t, uint64(2), res.Task.Providers.Generation)
	require.Len(t, res.Pushes, 3, "one push per live session, none for the stopped one")
	for _, p := range res.Pushes {
		require.NoError(t, p.Err)
		assert.Equal(t, uint64(2), p.Applied.Generation)
	}

	counted := l.eventsAfter(t, task.ID, before)
	assert.Equal(t, map[string]int{"": 1}, counted[model.EventSourcesAdded])
	assert.Equal(t, map[string]int{"": 1}, counted[model.EventProvidersRecomputed], "exactly one recompute")
	want := map[string]int{}
	for _, s := range sessions {
		want[s.ID] = 1
	}
	assert.Equal(t, want, counted[model.EventProvidersPushed], "exactly one push per live session")
	assert.Empty(t, counted[model.EventProvidersPushFailed])

	c.WaitChanged(t)
	c.ExpectNone(t, "one batch, one list_changed")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))
	for _, s := range sessions {
		got, err := l.svc.GetSession(ctx, s.ID)
		require.NoError(t, err)
		assert.Equal(t, res.Task.Providers, got.Applied)
		assert.False(t, got.NeedsRepair)
	}
}

// TestAFailedBatchAttachesAndPushesNothing: an error mid-batch (an unknown
// repository after a valid one) attaches nothing and pushes nothing.
func TestAFailedBatchAttachesAndPushesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newFaked(t, service.Options{PushTimeout: 10 * time.Second}).live
	task := l.task(t, "github")
	sess := l.launch(t, task.ID)
	before := lastSeq(t, l.st, task.ID)

	_, err := l.svc.AddSources(ctx, task.ID, []string{l.repos["gitlab"].ID, "repo_missing"})
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	got, err := l.svc.GetTask(ctx, task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 1)
	assert.Empty(t, l.eventsAfter(t, task.ID, before), "no event, no push")
	assert.Equal(t, uint64(1), l.status(t, sess).Generation)
}

// TestPushFailuresKeepTheSourcesAndAreRepaired: of three sessions one is
// dead and one is frozen (its push times out); the batch is kept, the
// healthy session is updated, both failures are reported and marked, and
// resume repairs them.
func TestPushFailuresKeepTheSourcesAndAreRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLive(t, time.Second)
	task := l.task(t, "github")
	healthy, dead, frozen := l.launch(t, task.ID), l.launch(t, task.ID), l.launch(t, task.ID)
	pid := func(s model.Session) int {
		var st struct{ PID int }
		require.NoError(t, json.Unmarshal(s.Handle.State, &st))
		return st.PID
	}
	require.NoError(t, syscall.Kill(-pid(dead), syscall.SIGKILL))
	require.NoError(t, syscall.Kill(pid(frozen), syscall.SIGSTOP))
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = syscall.Kill(pid(frozen), syscall.SIGCONT)
		}
	})
	// The dead one is noticed at once; wait for that, not for a timeout.
	require.Eventually(t, func() bool { return l.status(t, dead).Phase == executors.PhaseLost }, time.Minute, 10*time.Millisecond)

	started := time.Now()
	res, err := l.svc.AddSources(ctx, task.ID, l.ids("gitlab"))
	require.NoError(t, err, "a failed push never fails the batch")
	t.Logf("batch with a dead and a frozen session returned in %s", time.Since(started))
	failures := map[string]error{}
	for _, p := range res.Pushes {
		if p.Err != nil {
			failures[p.SessionID] = p.Err
		}
	}
	assert.Len(t, res.Pushes, 3)
	assert.Len(t, failures, 2, "every failure is reported, not just the first")
	assert.Contains(t, failures, dead.ID)
	assert.Contains(t, failures, frozen.ID)
	assert.Contains(t, failures[frozen.ID].Error(), "did not answer within 1s")

	got, err := l.svc.GetTask(ctx, task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 2, "the sources are kept")
	ok, err := l.svc.GetSession(ctx, healthy.ID)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), ok.Applied.Generation)
	assert.False(t, ok.NeedsRepair)

	// The marks, read from the records while the frozen agentctl is still
	// frozen: the reconciler retries it, and would repair it once it
	// answers, with no resume.
	for _, s := range []model.Session{dead, frozen} {
		marked, err := l.st.GetSession(ctx, s.ID)
		require.NoError(t, err)
		assert.True(t, marked.NeedsRepair, "%s is marked", s.ID)
		assert.Equal(t, uint64(1), marked.Applied.Generation, "%s keeps its old (subset) set", s.ID)
	}
	require.NoError(t, syscall.Kill(pid(frozen), syscall.SIGCONT))
	thawed = true
	for _, s := range []model.Session{dead, frozen} {
		repaired, err := l.svc.ResumeSession(ctx, s.ID)
		require.NoError(t, err)
		assert.Equal(t, model.SessionRunning, repaired.State)
		assert.False(t, repaired.NeedsRepair, "%s is repaired", s.ID)
		assert.Equal(t, uint64(2), repaired.Applied.Generation)
		assert.Equal(t, toolapi.Surface("github", "gitlab"), l.status(t, repaired).ToolNames)
	}
	counted := l.eventsAfter(t, task.ID, 0)
	assert.Equal(t, 1, counted[model.EventProvidersPushFailed][frozen.ID])
}

// TestConcurrentBatches races batches on one task and on another: every
// session ends on the union at the task's last generation.
func TestConcurrentBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newFaked(t, service.Options{PushTimeout: 10 * time.Second}).live
	a, b := l.task(t, "local0"), l.task(t, "local1")
	aSessions := []model.Session{l.launch(t, a.ID), l.launch(t, a.ID)}
	bSession := l.launch(t, b.ID)

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for _, batch := range [][]string{{"github"}, {"gitlab"}, {"local2", "local3"}, {"local4"}} {
		wg.Go(func() { _, err := l.svc.AddSources(ctx, a.ID, l.ids(batch...)); errs <- err })
	}
	for _, batch := range [][]string{{"gitlab"}, {"local5"}} {
		wg.Go(func() { _, err := l.svc.AddSources(ctx, b.ID, l.ids(batch...)); errs <- err })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	check := func(taskID string, sessions []model.Session, providers string, gen uint64) {
		for _, s := range sessions {
			got, err := l.svc.GetSession(ctx, s.ID)
			require.NoError(t, err)
			assert.Equal(t, gen, got.Applied.Generation, "session %s", s.ID)
			assert.Equal(t, providers, got.Applied.Set.String())
			st := l.status(t, s)
			assert.Equal(t, gen, st.Generation, "agentctl of %s applied the last generation", s.ID)
			assert.Equal(t, providers, st.Providers.String())
		}
	}
	check(a.ID, aSessions, "github,gitlab", 5)
	check(b.ID, []model.Session{bSession}, "gitlab", 3)
}
