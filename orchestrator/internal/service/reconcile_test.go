package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// faked is a service over a real store whose "local" backend is the
// in-memory fake executor: the reconciler's bookkeeping, without
// processes.
type faked struct {
	*live
	exec *fake.Executor
}

func newFaked(t *testing.T, opts service.Options) *faked {
	t.Helper()
	exec := fake.New("local")
	return &faked{live: newLiveOn(t, exec, opts), exec: exec}
}

func (f *faked) session(t *testing.T, id string) model.Session {
	t.Helper()
	sess, err := f.svc.GetSession(context.Background(), id)
	require.NoError(t, err)
	return sess
}

// TestAFailedPushIsRetriedUntilTheSessionAppliesItsSurface: a session
// whose pushes fail needs repair (derived: its applied surface lags) and
// is reported once; the reconciler retries it with backoff, and once its
// agentctl answers again it applies the desired surface with no resume.
func TestAFailedPushIsRetriedUntilTheSessionAppliesItsSurface(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFaked(t, service.Options{PushTimeout: time.Minute, RepairBackoff: 200 * time.Millisecond}) // the pushes fail by Fail, never by the timeout (100 ms timed out first under load)
	task := f.task(t, "github")
	sess := f.launch(t, task.ID)
	f.exec.Fail(sess.ID, errors.New("connection refused"))

	res, err := f.svc.AddSources(ctx, task.ID, f.ids("gitlab"))
	require.NoError(t, err)
	require.Len(t, res.Pushes, 1)
	require.ErrorContains(t, res.Pushes[0].Err, "connection refused")
	marked := f.session(t, sess.ID)
	assert.True(t, marked.NeedsRepair)
	assert.Equal(t, uint64(1), marked.Applied.Generation)

	require.Eventually(t, func() bool { return f.exec.Applied(sess.ID).Failed >= 3 }, time.Minute, 5*time.Millisecond,
		"the reconciler retries a failing session")
	f.exec.Fail(sess.ID, nil)
	answered := time.Now()
	require.Eventually(t, func() bool { return !f.session(t, sess.ID).NeedsRepair }, time.Minute, 5*time.Millisecond,
		"repaired without a resume")
	testutil.Figure(t, "reconciler: a failing session", "repaired %d ms after its agentctl answered again (backoff bound 200 ms), after %d failed attempts, with one push_failed event",
		time.Since(answered).Milliseconds(), f.exec.Applied(sess.ID).Failed)
	got := f.session(t, sess.ID)
	assert.Equal(t, model.ProviderSet{Set: res.Task.Providers.Set, Generation: 2}, got.Applied)
	assert.Empty(t, got.StatusMessage)
	assert.Equal(t, uint64(2), f.exec.Applied(sess.ID).Generation)
	counted := f.eventsAfter(t, task.ID, 0)
	assert.Equal(t, map[string]int{sess.ID: 1}, counted[model.EventProvidersPushFailed], "one failure event per streak, however many attempts")
	assert.Equal(t, 1, counted[model.EventProvidersPushed][sess.ID]-1, "one push after the launch's")
}

// TestARestartReconcilesWithNoRepairPathOfItsOwn: a batch committed while
// no orchestrator ran (its pushes never happened) reaches the session
// when a new service re-attaches to it, through the same reconciler.
func TestARestartReconcilesWithNoRepairPathOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFaked(t, service.Options{})
	task := f.task(t, "github")
	sess := f.launch(t, task.ID)
	f.svc.Close()

	// The batch commits; the orchestrator is gone before it pushes.
	_, err := f.st.AddSources(ctx, task.ID, f.ids("gitlab"), service.UnknownPerson)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), f.exec.Applied(sess.ID).Generation)

	again := service.New(f.st, &events.Broker{}, service.Options{Executors: map[string]executors.Executor{"local": f.exec}})
	t.Cleanup(again.Close)
	attached, lost, err := again.Reattach(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, attached)
	assert.Zero(t, lost)
	got, err := again.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.Applied.Generation)
	assert.False(t, got.NeedsRepair)
	assert.Equal(t, fake.Applied{Providers: got.Applied.Set, Generation: 2, ExternalGeneration: got.ExternalGeneration, Pushes: 1}, f.exec.Applied(sess.ID), "one push")
}

// TestPushesAreCountedByOutcome: every push the reconciler makes is
// observed with its outcome, the failed retries as well as the one that
// applies.
func TestPushesAreCountedByOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	f := newFaked(t, service.Options{PushTimeout: time.Minute, RepairBackoff: 100 * time.Millisecond, Metrics: metrics.New(reg)})
	task := f.task(t, "github")
	sess := f.launch(t, task.ID)
	f.exec.Fail(sess.ID, errors.New("connection refused"))
	_, err := f.svc.AddSources(ctx, task.ID, f.ids("gitlab"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.exec.Applied(sess.ID).Failed >= 2 }, 10*time.Second, 5*time.Millisecond)
	f.exec.Fail(sess.ID, nil)
	require.Eventually(t, func() bool { return !f.session(t, sess.ID).NeedsRepair }, 10*time.Second, 5*time.Millisecond)

	pushes := map[string]uint64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() == "toolscope_surface_push_duration_seconds" {
			for _, m := range fam.GetMetric() {
				pushes[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	assert.Equal(t, map[string]uint64{"failed": uint64(f.exec.Applied(sess.ID).Failed), "ok": 1}, pushes)
}

// TestResumeRelaunchesTheAgentWithItsEnvNames: the names given with
// `session launch --env` are stored with the session (names only; the
// values stay in the executor's environment), so a resume relaunches the
// agent with them. Before, they held for the launch only and a resumed
// agent lost them.
func TestResumeRelaunchesTheAgentWithItsEnvNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	names := []string{"DEPLOY_REGION", "MY_TOOL_HOME"}
	f := newFaked(t, service.Options{AgentEnv: names})
	task := f.task(t, "github")
	sess, err := f.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local",
		AgentArgv: []string{"sh", "-c", "sleep 60"}, AgentPassEnv: names}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = f.svc.StopSession(context.Background(), sess.ID, false) })
	require.NotNil(t, f.exec.Spec(sess.ID).Agent)
	assert.Equal(t, names, f.exec.Spec(sess.ID).Agent.PassEnv, "the launch")
	assert.Equal(t, names, f.session(t, sess.ID).AgentPassEnv, "stored")

	f.exec.Lose(sess.ID, "agentctl (pid 7) exited: signal: killed")
	require.Eventually(t, func() bool { return f.session(t, sess.ID).State == model.SessionFailed }, time.Minute, 5*time.Millisecond)
	resumed, err := f.svc.ResumeSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, model.SessionRunning, resumed.State)
	require.NotNil(t, f.exec.Spec(sess.ID).Agent)
	assert.Equal(t, names, f.exec.Spec(sess.ID).Agent.PassEnv, "the relaunch by resume")
}

// TestResumeRefusesANameThatBecameACredential (issue 33, item 2): a
// name stored at launch (--env DEPLOY_REGION, allowed then) that a
// connection has named as its credential variable since is not passed
// again: the resume is refused, naming it, and the session is left as it
// was.
func TestResumeRefusesANameThatBecameACredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFaked(t, service.Options{AgentEnv: []string{"DEPLOY_REGION"}})
	task := f.task(t, "github")
	sess, err := f.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local",
		AgentArgv: []string{"sh", "-c", "sleep 60"}, AgentPassEnv: []string{"DEPLOY_REGION"}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = f.svc.StopSession(context.Background(), sess.ID, false) })

	_, err = f.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: task.WorkspaceID, Provider: "gitlab",
		APIBaseURL: "https://gitlab.example", Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "DEPLOY_REGION"}, SkipValidation: true})
	require.NoError(t, err)
	f.exec.Lose(sess.ID, "agentctl (pid 7) exited: signal: killed")
	require.Eventually(t, func() bool { return f.session(t, sess.ID).State == model.SessionFailed }, time.Minute, 5*time.Millisecond)
	_, err = f.svc.ResumeSession(ctx, sess.ID)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.ErrorContains(t, err, "DEPLOY_REGION is a variable the orchestrator reads itself")
	assert.Equal(t, model.SessionFailed, f.session(t, sess.ID).State, "left as it was")

	_, err = f.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local",
		AgentArgv: []string{"sh"}, AgentCredentialEnv: "DEPLOY_REGION"}, nil)
	assert.ErrorContains(t, err, "agent.credential_env", "nor as --credential-env")
}

// TestResumeRelaunchesTheAgentWithItsAuth: a launch's --auth is stored
// with the session and given to the executor at the launch and at a
// resume's relaunch: a subscription agent never gets a key variable back.
func TestResumeRelaunchesTheAgentWithItsAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFaked(t, service.Options{})
	task := f.task(t, "github")
	sess, err := f.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local",
		AgentProfile: profiles.ClaudeCode, AgentAuth: profiles.AuthSubscription}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = f.svc.StopSession(context.Background(), sess.ID, false) })
	require.NotNil(t, f.exec.Spec(sess.ID).Agent)
	assert.Equal(t, profiles.AuthSubscription, f.exec.Spec(sess.ID).Agent.Auth, "the launch")
	assert.Equal(t, profiles.AuthSubscription, f.session(t, sess.ID).AgentAuth, "stored")

	f.exec.Lose(sess.ID, "agentctl (pid 7) exited: signal: killed")
	require.Eventually(t, func() bool { return f.session(t, sess.ID).State == model.SessionFailed }, time.Minute, 5*time.Millisecond)
	_, err = f.svc.ResumeSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, profiles.AuthSubscription, f.exec.Spec(sess.ID).Agent.Auth, "the relaunch by resume")
	assert.NotContains(t, profiles.Allowed(f.exec.Spec(sess.ID).Agent.ProfileSpec()), "ANTHROPIC_API_KEY")
}

// TestAListingInspectsBoundedlyAtOnce: ListSessions asks the running
// sessions' agentctls for their state concurrently, never more than
// MaxInspects at once, so agentctls that do not answer hold a listing up
// to about one probe timeout rather than one per session; every session
// is inspected, and the list keeps its order.
func TestAListingInspectsBoundedlyAtOnce(t *testing.T) {
	t.Parallel()
	const bound, sessions = 3, 10
	f := newFaked(t, service.Options{MaxInspects: bound})
	var want []string
	for range sessions {
		want = append(want, f.launch(t, f.task(t, "github").ID).ID)
	}

	var (
		mu       sync.Mutex
		inFlight int
		most     int
		asked    = map[string]int{}
	)
	entered := make(chan struct{}, sessions)
	release := make(chan struct{})
	f.exec.SetInspecting(func(ctx context.Context, id string) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		asked[id]++
		mu.Unlock()
		select {
		case entered <- struct{}{}:
		default:
		}
		select { // as an agentctl that answers only when told to
		case <-release:
		case <-ctx.Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	listed := make(chan []model.Session, 1)
	go func() {
		list, err := f.svc.ListSessions(context.Background(), model.Every)
		assert.NoError(t, err)
		listed <- list
	}()
	deadline := time.After(time.Minute)
	for range bound {
		select {
		case <-entered:
		case <-deadline:
			t.Fatal("the listing did not inspect its running sessions")
		}
	}
	close(release) // every agentctl answers from now on
	defer f.exec.SetInspecting(nil)
	var list []model.Session
	select {
	case list = <-listed:
	case <-deadline:
		t.Fatal("the listing did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, bound, most, "inspections at once")
	assert.Len(t, asked, sessions, "every running session was inspected")
	var got []string
	for _, s := range list {
		got = append(got, s.ID)
		assert.Equal(t, model.SessionRunning, s.State)
	}
	assert.ElementsMatch(t, want, got)
}

// TestCloseWhileSessionsAreWoken: wakes racing Close either start their
// worker before Close waits for it or are answered "stopping" and start
// none (a WaitGroup's Add racing its Wait: the race detector caught a
// replica's follower waking sessions while its service closed).
func TestCloseWhileSessionsAreWoken(t *testing.T) {
	t.Parallel()
	f := newFaked(t, service.Options{PushTimeout: time.Minute})
	task := f.task(t, "github")
	var ids []string
	for range 4 {
		ids = append(ids, f.launch(t, task.ID).ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = f.svc.ResumeSession(context.Background(), id)
			}
		})
	}
	f.svc.Close()
	close(stop)
	wg.Wait()
	_, err := f.svc.ResumeSession(context.Background(), ids[0])
	assert.Error(t, err, "a closed service wakes nothing")
}
