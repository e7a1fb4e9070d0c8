package lifecycle_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/lifecycle"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m, pgtest.StopShared)) }

// replicaPoller is a poller of replica on its own store of the database
// at url, polling a connection only while it holds the connection's lease.
func replicaPoller(t *testing.T, url, replica string, ttl time.Duration) *lifecycle.Poller {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.Options{DatabaseURL: url})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return lifecycle.New(lifecycle.Options{
		Store:       st,
		Connections: connections.New(st, connections.Options{Credentials: credentials.Resolver{Env: func(string) (string, bool) { return token, true }}}),
		Lease: func(ctx context.Context, name string) bool {
			held, _, err := st.TakeLease(ctx, name, replica, ttl)
			return err == nil && held
		},
	})
}

// TestOneReplicaPollsEachConnection: two replicas' pollers on one
// database, cycling at the same moments, poll a workspace connection once
// per round between them, never twice; when the holder stops, the other
// takes the connection over once its lease expired.
func TestOneReplicaPollsEachConnection(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	w := newWorldOn(t, providers.GitHub, "octo-bot", store.Options{DatabaseURL: url})
	ctx := context.Background()
	one := len(w.cycle(t)) // the requests of one poll of the connection
	require.Positive(t, one)

	const ttl = time.Second
	a, b := replicaPoller(t, url, "a", ttl), replicaPoller(t, url, "b", ttl)
	const rounds = 10
	before := len(w.requests())
	for range rounds {
		var wg sync.WaitGroup
		for _, p := range []*lifecycle.Poller{a, b} {
			wg.Go(func() { assert.NoError(t, p.Cycle(ctx)) })
		}
		wg.Wait()
	}
	assert.Equal(t, rounds*one, len(w.requests())-before, "%d rounds of two replicas polled the connection %d times", rounds,
		(len(w.requests())-before)/one)

	// a was first or b was: whichever holds it, the other stops there.
	holder, other := a, b
	before = len(w.requests())
	require.NoError(t, b.Cycle(ctx))
	if len(w.requests()) > before {
		holder, other = b, a
	}
	_ = holder // stops polling (its replica went away)
	stopped := time.Now()
	require.Eventually(t, func() bool {
		before := len(w.requests())
		require.NoError(t, other.Cycle(ctx))
		return len(w.requests()) > before
	}, 10*ttl, 20*time.Millisecond, "the other replica takes the connection over")
	took := time.Since(stopped)
	assert.GreaterOrEqual(t, took, ttl/2, "not before the holder's lease ran out")
	testutil.Figure(t, "poller lease takeover", "the other replica polled %d ms after the holder stopped (lease %s)", took.Milliseconds(), ttl)
}
