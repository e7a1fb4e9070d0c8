package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// BenchmarkTaskProvidersAtScale: the provider-set query for one task in a
// database of 1,000 tasks × 10 repositories each, interleaved with the
// floor — a primary-key read of one task column on the same file through
// the same driver, the cheapest question SQLite can answer about a task.
func BenchmarkTaskProvidersAtScale(b *testing.B) {
	dir := b.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName)+"?mode=ro")
	require.NoError(b, err)
	b.Cleanup(func() { _ = raw.Close() })
	taskProvidersAtScale(b, dir, store.Options{}, raw, `SELECT provider_generation FROM tasks WHERE id = ?`)
}

// BenchmarkPostgresTaskProvidersAtScale is BenchmarkTaskProvidersAtScale
// on PostgreSQL (a throw-away cluster on a Unix socket, fsync off): the
// floor is the same primary-key read through pgx.
func BenchmarkPostgresTaskProvidersAtScale(b *testing.B) {
	url := pgtest.Shared(b).NewDatabase(b)
	raw, err := sql.Open("pgx", url)
	require.NoError(b, err)
	b.Cleanup(func() { _ = raw.Close() })
	taskProvidersAtScale(b, b.TempDir(), store.Options{DatabaseURL: url}, raw, `SELECT provider_generation FROM tasks WHERE id = $1`)
}

func taskProvidersAtScale(b *testing.B, dir string, opts store.Options, raw *sql.DB, floorQuery string) {
	const tasks, perTask, repos = 1000, 10, 200
	ctx := context.Background()
	s, err := store.Open(ctx, dir, opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	ws, err := s.CreateWorkspace(ctx, "scale")
	require.NoError(b, err)
	kinds := []string{"github", "gitlab", "local", "bitbucket"}
	ids := make([]string, repos)
	for i := range ids {
		r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: kinds[i%len(kinds)],
			Host: "example.com", Path: fmt.Sprintf("acme/r%d", i)})
		require.NoError(b, err)
		ids[i] = r.ID
	}
	rng := rand.New(rand.NewPCG(1, 2))
	taskIDs := make([]string, tasks)
	for i := range taskIDs {
		perm := rng.Perm(repos)[:perTask]
		attach := make([]string, perTask)
		for j, k := range perm {
			attach[j] = ids[k]
		}
		t, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: fmt.Sprintf("t%d", i)}, attach[0])
		require.NoError(b, err)
		_, err = s.AddSources(ctx, t.ID, attach[1:], testActor)
		require.NoError(b, err)
		taskIDs[i] = t.ID
	}

	var figure, floor benchstats.Samples
	i := 0
	for b.Loop() {
		id := taskIDs[i%tasks]
		i++
		figure.Time(func() {
			set, err := s.TaskProviders(ctx, id)
			if err != nil || set.Generation == 0 {
				b.Fatalf("TaskProviders(%s) = %v, %v", id, set, err)
			}
		})
		floor.Time(func() {
			var gen int64
			if err := raw.QueryRowContext(ctx, floorQuery, id).Scan(&gen); err != nil {
				b.Fatal(err)
			}
		})
	}
	benchstats.Report(b, figure, floor)
}

// BenchmarkOpenAtScale: opening an existing database of 1,000 tasks, each
// with a repository — which includes the start-up checks (schema version,
// PRAGMA quick_check) over the whole file.
func BenchmarkOpenAtScale(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := store.Open(ctx, dir, store.Options{})
	require.NoError(b, err)
	ws, err := s.CreateWorkspace(ctx, "scale")
	require.NoError(b, err)
	for i := range 1000 {
		r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "github", Host: "example.com", Path: fmt.Sprintf("acme/r%d", i)})
		require.NoError(b, err)
		_, err = s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: fmt.Sprintf("task %d", i), Description: "a description of some length"}, r.ID)
		require.NoError(b, err)
	}
	require.NoError(b, s.Close())
	info, err := os.Stat(filepath.Join(dir, store.FileName))
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		s, err := store.Open(ctx, dir, store.Options{})
		require.NoError(b, err)
		require.NoError(b, s.Close())
	}
	b.ReportMetric(float64(info.Size()), "db-bytes")
}
