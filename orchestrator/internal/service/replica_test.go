package service_test

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// replica is one orchestrator replica on a shared PostgreSQL database,
// wired as the server wires it: its own store (its own connections), a
// broker fed by its follower only, its lease renewed in the background.
type replica struct {
	svc  *service.Service
	st   *store.Store
	stop func() // the replica goes away: nothing of it runs any more
}

const (
	testLeaseTTL   = time.Second
	testLeaseRenew = 200 * time.Millisecond
)

func startReplica(t *testing.T, url, id string, execs map[string]executors.Executor, clock func() time.Time) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var follower atomic.Pointer[service.Follower]
	st, err := store.Open(ctx, t.TempDir(), store.Options{DatabaseURL: url, Clock: clock, OnCommit: func([]model.Event) {
		if f := follower.Load(); f != nil {
			f.Nudge()
		}
	}})
	require.NoError(t, err)
	svc := service.New(st, &events.Broker{}, service.Options{Executors: execs, Replica: id, PushTimeout: 2 * time.Second,
		LeaseTTL: testLeaseTTL, LeaseRenew: testLeaseRenew})
	f, err := svc.NewFollower(ctx)
	require.NoError(t, err)
	follower.Store(f)
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	_, _, err = svc.Reattach(ctx)
	require.NoError(t, err)
	wg.Go(func() { assert.NoError(t, svc.RunReplica(ctx)) })
	var once sync.Once
	r := &replica{svc: svc, st: st, stop: func() {
		once.Do(func() {
			cancel()
			svc.Close()
			wg.Wait()
			_ = st.Close()
		})
	}}
	t.Cleanup(r.stop)
	return r
}

func skewedClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// TestReplicasShareTheWorkAndTakeOverFromEachOther: two replicas on one
// PostgreSQL database, their clocks two hours apart, and an agentctl both
// can reach (the fake docker backend; a local one runs on its replica's
// host). A session is acted on by its owner only: a batch through the
// other replica reaches it through the database and is pushed once, by
// its owner; stop, resume and its endpoint are refused elsewhere, naming
// the owner; the other's takeover rounds leave it alone however its clock
// runs. When the owner goes away, the other takes the docker session over
// once the lease expired and pushes it, and records the local one lost.
func TestReplicasShareTheWorkAndTakeOverFromEachOther(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	agentctls := fake.New("docker")
	local := fake.New("local")
	execs := map[string]executors.Executor{"docker": agentctls, "local": local}
	a := startReplica(t, url, "a", execs, skewedClock(-time.Hour))
	b := startReplica(t, url, "b", execs, skewedClock(time.Hour))

	ws, err := a.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo := func(provider, path string) string {
		r, err := a.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: provider, Host: provider + ".com", Path: path})
		require.NoError(t, err)
		return r.ID
	}
	gh, gl, gl2 := repo("github", "acme/api"), repo("gitlab", "acme/web"), repo("gitlab", "acme/ops")
	task, err := a.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: gh})
	require.NoError(t, err)
	sess, err := a.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "docker", Image: "img"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "a", sess.Owner)
	onLocal, err := a.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local"}, nil)
	require.NoError(t, err)

	// b's takeover round, its clock an hour ahead of the database's: a's
	// lease holds, its sessions stay a's.
	_, _, err = b.svc.Reattach(ctx)
	require.NoError(t, err)
	got, err := b.svc.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, "a", got.Owner)
	for name, call := range map[string]func() error{
		"stop":   func() error { _, err := b.svc.StopSession(ctx, sess.ID, false); return err },
		"resume": func() error { _, err := b.svc.ResumeSession(ctx, sess.ID); return err },
		"mcp":    func() error { _, err := b.svc.GetSessionMCP(ctx, sess.ID); return err },
	} {
		err := call()
		require.ErrorIs(t, err, store.ErrOwnedElsewhere, name)
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition, name)
		assert.ErrorContains(t, err, "owned by replica a", name)
	}

	// A batch through b: a pushes it, once, and b reports a's outcome.
	res, err := b.svc.AddSources(ctx, task.ID, []string{gl})
	require.NoError(t, err)
	byID := map[string]service.Push{}
	for _, p := range res.Pushes {
		byID[p.SessionID] = p
	}
	require.Len(t, byID, 2)
	require.NoError(t, byID[sess.ID].Err)
	assert.Equal(t, uint64(2), byID[sess.ID].Applied.Generation, "b reports the generation a pushed")
	assert.Equal(t, 1, agentctls.Applied(sess.ID).Pushes, "pushed once, by its owner: one list_changed")
	assert.Equal(t, uint64(2), agentctls.Applied(sess.ID).Generation)

	// events watch on b shows a's events too, in order, none missing.
	stored, err := a.st.Events(ctx, task.ID, 0, 1000)
	require.NoError(t, err)
	watched, err := collect(ctx, t, b.svc, task.ID, 0, len(stored))
	require.NoError(t, err)
	assert.Equal(t, stored, watched)

	// a goes away; b takes the docker session over within a lease and a
	// renewal, and records the local one lost.
	a.stop()
	gone := time.Now()
	require.Eventually(t, func() bool {
		s, err := b.st.GetSession(ctx, sess.ID)
		return err == nil && s.Owner == "b"
	}, 20*testLeaseTTL, 10*time.Millisecond)
	took := time.Since(gone)
	assert.Less(t, took, testLeaseTTL+3*testLeaseRenew+time.Second, "taken over within the lease and a renewal")
	testutil.Figure(t, "replica takeover (in process)", "b owned a's session %d ms after a went away (lease %s, renewal %s)",
		took.Milliseconds(), testLeaseTTL, testLeaseRenew)
	require.Eventually(t, func() bool {
		s, err := b.st.GetSession(ctx, onLocal.ID)
		return err == nil && s.State == model.SessionFailed
	}, 5*time.Second, 10*time.Millisecond, "the local session, taken in the same round, is recorded lost")
	lost, err := b.svc.GetSession(ctx, onLocal.ID)
	require.NoError(t, err)
	assert.Contains(t, lost.StatusMessage, "its replica a went away")

	res, err = b.svc.AddSources(ctx, task.ID, []string{gl2})
	require.NoError(t, err)
	require.Len(t, res.Pushes, 1)
	require.NoError(t, res.Pushes[0].Err)
	assert.Equal(t, uint64(3), res.Pushes[0].Applied.Generation)
	assert.Equal(t, 2, agentctls.Applied(sess.ID).Pushes)
	stopped, err := b.svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err)
	assert.Equal(t, model.SessionStopped, stopped.State)
}

// TestAReplicaWhoseLeaseLapsesStopsActingAndEnds: a replica that cannot
// renew its lease (here another holder took its row, as after a long
// pause) acts on none of its sessions once LeaseTTL passed since its last
// renewal, and RunReplica ends with ErrLeaseLost (the server then exits).
func TestAReplicaWhoseLeaseLapsesStopsActingAndEnds(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	agentctls := fake.New("docker")
	st, err := store.Open(ctx, t.TempDir(), store.Options{DatabaseURL: url})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, &events.Broker{}, service.Options{Executors: map[string]executors.Executor{"docker": agentctls}, Replica: "a",
		LeaseTTL: testLeaseTTL, LeaseRenew: testLeaseRenew})
	t.Cleanup(svc.Close)
	_, _, err = svc.Reattach(ctx)
	require.NoError(t, err)
	ws, err := svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	r, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	task, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: r.ID})
	require.NoError(t, err)
	sess, err := svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "docker", Image: "img"}, nil)
	require.NoError(t, err)
	_, err = svc.GetSessionMCP(ctx, sess.ID)
	require.NoError(t, err)

	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE leases SET holder = 'impostor', expires_ms = expires_ms + 3600000 WHERE name = 'replica:a'`)
	require.NoError(t, err)
	ended := make(chan error, 1)
	go func() { ended <- svc.RunReplica(ctx) }()
	select {
	case err := <-ended:
		require.ErrorIs(t, err, service.ErrLeaseLost)
		assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	case <-time.After(10 * testLeaseTTL):
		t.Fatal("RunReplica did not end after its lease lapsed")
	}
	_, err = svc.GetSessionMCP(ctx, sess.ID)
	assert.ErrorContains(t, err, "could not renew its lease", "it acts on no session any more")
	_, err = svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "docker", Image: "img"}, nil)
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
}
