package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// skewed returns a clock off by d.
func skewed(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// twoReplicas opens two stores on one database of b, whose process clocks
// disagree by two hours: a's is an hour slow, c's an hour fast.
func twoReplicas(t *testing.T, b backend) (a, c *store.Store) {
	t.Helper()
	opts, dir := b.options(t), t.TempDir()
	optsA, optsC := opts, opts
	optsA.Clock, optsC.Clock = skewed(-time.Hour), skewed(time.Hour)
	return openOptions(t, dir, nil, optsA), openOptions(t, dir, nil, optsC)
}

func TestLeasesUseTheDatabaseClockNotTheReplicas(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		slow, fast := twoReplicas(t, b)
		const ttl = 1500 * time.Millisecond

		held, holder, err := slow.TakeLease(ctx, "poller:w:github", "slow", ttl)
		require.NoError(t, err)
		require.True(t, held)
		assert.Equal(t, "slow", holder)
		// By the slow replica's clock its lease ended an hour ago, by the
		// fast one's it is two hours old: neither matters.
		held, holder, err = fast.TakeLease(ctx, "poller:w:github", "fast", ttl)
		require.NoError(t, err)
		assert.False(t, held, "a replica whose clock is an hour fast took a lease that had not expired")
		assert.Equal(t, "slow", holder, "the refusal names the holder")
		held, _, err = slow.TakeLease(ctx, "poller:w:github", "slow", ttl)
		require.NoError(t, err)
		assert.True(t, held, "the holder renews its own lease")

		// Once it expires by the database's clock, the other takes it, and
		// the old holder's renewal fails.
		require.Eventually(t, func() bool {
			held, _, err := fast.TakeLease(ctx, "poller:w:github", "fast", ttl)
			return err == nil && held
		}, 10*time.Second, 50*time.Millisecond)
		held, holder, err = slow.TakeLease(ctx, "poller:w:github", "slow", ttl)
		require.NoError(t, err)
		assert.False(t, held)
		assert.Equal(t, "fast", holder)

		_, _, err = slow.TakeLease(ctx, "x", "slow", 0)
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	})
}

func TestSessionsAreClaimedOnlyFromOwnersWhoseLeaseExpired(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		a, c := twoReplicas(t, b)
		f := newFixture(t, a, "acme")
		task, err := a.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		session := func(owner string, state model.SessionState, executor string) model.Session {
			sess, err := a.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: executor, Mode: model.ModeTask, State: state, Owner: owner})
			require.NoError(t, err)
			got, err := c.GetSession(ctx, sess.ID)
			require.NoError(t, err)
			require.Equal(t, owner, got.Owner)
			return sess
		}
		for _, id := range []string{"a", "b", "c"} {
			held, _, err := a.TakeLease(ctx, store.ReplicaLease(id), id, time.Minute)
			require.NoError(t, err)
			require.True(t, held)
		}
		alive := session("a", model.SessionRunning, "docker")
		orphan := session("dead", model.SessionRunning, "docker")
		unowned := session("", model.SessionPending, "docker")
		ended := session("dead", model.SessionStopped, "docker")
		elsewhere := session("dead", model.SessionRunning, "remote")

		// Two replicas claim at once: each session goes to one.
		var wg sync.WaitGroup
		var got [2][]store.Claimed
		for i, id := range []string{"b", "c"} {
			wg.Go(func() {
				claimed, err := c.ClaimSessions(ctx, id, false, func(s model.Session) bool { return s.Executor == "docker" })
				assert.NoError(t, err)
				got[i] = claimed
			})
		}
		wg.Wait()
		byID := map[string]store.Claimed{}
		for _, list := range got {
			for _, cl := range list {
				_, twice := byID[cl.Session.ID]
				assert.False(t, twice, "session %s claimed twice", cl.Session.ID)
				byID[cl.Session.ID] = cl
			}
		}
		require.Len(t, byID, 2, "the orphan and the unowned session, nothing else")
		assert.Equal(t, "dead", byID[orphan.ID].Previous)
		assert.Equal(t, "", byID[unowned.ID].Previous)
		for _, id := range []string{orphan.ID, unowned.ID} {
			sess, err := a.GetSession(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, byID[id].Session.Owner, sess.Owner)
		}
		for id, owner := range map[string]string{alive.ID: "a", ended.ID: "dead", elsewhere.ID: "dead"} {
			sess, err := a.GetSession(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, owner, sess.Owner, "session %s", id)
		}

		// One session: refused while its owner lives, naming it; taken
		// once its owner is gone.
		_, err = c.ClaimSession(ctx, alive.ID, "c")
		require.ErrorIs(t, err, store.ErrOwnedElsewhere)
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
		assert.Contains(t, err.Error(), "replica a")
		sess, err := c.ClaimSession(ctx, ended.ID, "c")
		require.NoError(t, err)
		assert.Equal(t, "c", sess.Owner)

		// A replica restarted under its id finds its own sessions with mine.
		mine, err := a.ClaimSessions(ctx, "a", true, func(s model.Session) bool { return s.Executor == "docker" })
		require.NoError(t, err)
		require.Len(t, mine, 1)
		assert.Equal(t, alive.ID, mine[0].Session.ID)
	})
}

// TestAnotherProcessesCommitsReachTheFollowerInOrder: helper processes
// attach repositories one batch at a time; this process, following the
// database's commits, is woken and reads every event they committed, in
// sequence order, none missing.
func TestAnotherProcessesCommitsReachTheFollowerInOrder(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	s := openOptions(t, t.TempDir(), nil, store.Options{DatabaseURL: url})
	require.True(t, s.Shared())
	ws, err := s.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	var repos [2][]string
	for i := range 10 {
		r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/r" + string(rune('a'+i))})
		require.NoError(t, err)
		repos[i%2] = append(repos[i%2], r.ID)
	}
	primary, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "local", Path: "/src/p"})
	require.NoError(t, err)
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t"}, primary.ID)
	require.NoError(t, err)
	last, err := s.LastEventSeq(ctx)
	require.NoError(t, err)

	wakes := make(chan struct{}, 1)
	followCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.FollowCommits(followCtx, func() {
			select {
			case wakes <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { stop(); <-done }()
	<-wakes // connected

	helpers(t, url, task.ID, repos[0], repos[1])

	var seen []model.Event
	deadline := time.After(30 * time.Second)
	for len(seen) < 10 {
		select {
		case <-wakes:
		case <-deadline:
			t.Fatalf("woken for %d of 10 batches' events", len(seen))
		}
		page, err := s.EventsAfter(ctx, last, 100)
		require.NoError(t, err)
		for _, e := range page {
			require.Greater(t, e.Seq, last, "in sequence order")
			last = e.Seq
			seen = append(seen, e)
		}
	}
	stored, err := s.Events(ctx, task.ID, 0, 100)
	require.NoError(t, err)
	var added []model.Event
	for _, e := range stored {
		if e.Kind == model.EventSourcesAdded {
			added = append(added, e)
		}
	}
	assert.Equal(t, added, seen, "every committed event, once, in order")
}
