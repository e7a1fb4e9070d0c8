package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// TestPostgresGoingAwayMidBatchLeavesEachBatchWholeOrAbsent: the database
// ends the store's connections at random moments (pg_terminate_backend,
// what a server restart or a failover does to its clients) while batches
// run one after another. Every batch is then attached whole or not at
// all: a batch the store reported committed is whole, one it reported
// failed is whole or absent (its commit may have landed before the
// answer was lost), and the generation moved once per batch attached.
func TestPostgresGoingAwayMidBatchLeavesEachBatchWholeOrAbsent(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	dbName := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	s := openOptions(t, t.TempDir(), nil, store.Options{DatabaseURL: dsn})

	ws, err := s.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	primary, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "local", Path: "/src/p"})
	require.NoError(t, err)
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t"}, primary.ID)
	require.NoError(t, err)
	const perBatch, most = 3, 150
	batches := make([][]string, most)
	for i := range batches {
		for j := range perBatch {
			r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "github", Host: "github.com",
				Path: fmt.Sprintf("acme/r%d-%d", i, j)})
			require.NoError(t, err)
			batches[i] = append(batches[i], r.ID)
		}
	}

	// The fault: another session of the server ends every connection of
	// the store's database, again and again, at random intervals.
	admin, err := sql.Open("pgx", c.URL("postgres"))
	require.NoError(t, err)
	defer admin.Close()
	stop := make(chan struct{})
	var killer sync.WaitGroup
	kills := 0
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rand.IntN(4000)) * time.Microsecond):
			}
			var n int
			if admin.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
				dbName).Scan(&n) == nil {
				kills += n
			}
		}
	})

	// Batches until some committed and some failed (the fault met the
	// store), or all were tried; the deadline only catches a hang.
	committed := map[int]bool{}
	ran, failed := 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for i := range batches {
		if (failed >= 5 && len(committed) >= 5) || time.Now().After(deadline) {
			break
		}
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := s.AddSources(bctx, task.ID, batches[i], testActor)
		cancel()
		ran++
		if err == nil {
			committed[i] = true
		} else {
			failed++
		}
	}
	close(stop)
	killer.Wait()
	t.Logf("%d batches: %d reported committed, %d failed; %d connections ended", ran, len(committed), failed, kills)
	require.Positive(t, failed, "the fault never met a batch")

	// A fresh store (new connections) reads what the database kept.
	check := openOptions(t, t.TempDir(), nil, store.Options{DatabaseURL: dsn})
	got, err := check.GetTask(ctx, task.ID)
	require.NoError(t, err)
	attachedIDs := map[string]bool{}
	for _, r := range got.Repositories {
		attachedIDs[r.ID] = true
	}
	whole := 0
	for i := range ran {
		n := 0
		for _, id := range batches[i] {
			if attachedIDs[id] {
				n++
			}
		}
		switch {
		case n == perBatch:
			whole++
		case n != 0:
			t.Errorf("batch %d is partial: %d of %d repositories attached", i, n, perBatch)
		case committed[i]:
			t.Errorf("batch %d was reported committed but is absent", i)
		}
	}
	assert.Len(t, got.Repositories, 1+whole*perBatch, "only whole batches attached")
	assert.Equal(t, uint64(1+whole), got.Providers.Generation, "the generation moved once per batch attached")
}
