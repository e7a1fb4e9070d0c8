package store_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m, pgtest.StopShared)) }

// backend opens fresh stores of one implementation. The conformance suite
// is every test that runs through forEachStore: what the orchestrator
// relies on, checked against SQLite and PostgreSQL alike.
type backend struct {
	name string
	// options returns the options of a new, empty database; a store
	// opened with them in the same data directory again finds its data.
	options func(t *testing.T) store.Options
}

// open opens a fresh store of b.
func (b backend) open(t *testing.T, rec *recorder) *store.Store {
	t.Helper()
	return openOptions(t, t.TempDir(), rec, b.options(t))
}

var backends = []backend{
	{"sqlite", func(*testing.T) store.Options { return store.Options{} }},
	{"postgres", func(t *testing.T) store.Options {
		t.Helper()
		return store.Options{DatabaseURL: pgtest.Shared(t).NewDatabase(t)}
	}},
}

// forEachStore runs fn as a subtest per backend.
func forEachStore(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

func openOptions(t *testing.T, dir string, rec *recorder, opts store.Options) *store.Store {
	t.Helper()
	if rec != nil {
		opts.OnCommit = rec.onCommit
	}
	s, err := store.Open(context.Background(), dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The helper process: with envHelper set, TestHelperProcess opens the
// store at envHelperURL and attaches the repositories in envHelperRepos
// (comma-separated; none: it only opens, which migrates), one batch each.
const (
	envHelper      = "TOOLSCOPE_STORE_HELPER"
	envHelperURL   = "TOOLSCOPE_STORE_HELPER_URL"
	envHelperTask  = "TOOLSCOPE_STORE_HELPER_TASK"
	envHelperRepos = "TOOLSCOPE_STORE_HELPER_REPOS"
)

func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) == "" {
		return
	}
	ctx := context.Background()
	s, err := store.Open(ctx, t.TempDir(), store.Options{DatabaseURL: os.Getenv(envHelperURL)})
	require.NoError(t, err)
	defer s.Close()
	for _, id := range strings.FieldsFunc(os.Getenv(envHelperRepos), func(r rune) bool { return r == ',' }) {
		_, err := s.AddSources(ctx, os.Getenv(envHelperTask), []string{id}, testActor)
		require.NoError(t, err)
	}
}

// helpers starts one helper process per repository list, at once, and
// waits for all of them.
func helpers(t *testing.T, url, taskID string, repoLists ...[]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([][]byte, len(repoLists))
	errs := make([]error, len(repoLists))
	for i, repos := range repoLists {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envHelper+"=1", envHelperURL+"="+url, envHelperTask+"="+taskID,
			envHelperRepos+"="+strings.Join(repos, ","))
		wg.Go(func() { outs[i], errs[i] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for i := range errs {
		require.NoError(t, errs[i], "helper %d: %s", i, outs[i])
	}
}

func TestPostgresWritersInTwoProcesses(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	s := openOptions(t, t.TempDir(), nil, store.Options{DatabaseURL: url})
	ws, err := s.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	primary, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "local", Path: "/src/p"})
	require.NoError(t, err)
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t"}, primary.ID)
	require.NoError(t, err)
	const perProcess = 8
	var lists [2][]string
	for i := range 2 * perProcess {
		provider := []string{"github", "gitlab", "local"}[i%3]
		r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: provider,
			Host: provider + ".example", Path: "acme/r" + string(rune('a'+i))})
		require.NoError(t, err)
		lists[i%2] = append(lists[i%2], r.ID)
	}

	helpers(t, url, task.ID, lists[0], lists[1])

	got, err := s.GetTask(ctx, task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 1+2*perProcess, "every batch of both processes attached")
	assert.Equal(t, "github,gitlab", got.Providers.Set.String())
	evs, err := s.Events(ctx, task.ID, 0, 1000)
	require.NoError(t, err)
	var lastSeq, lastGen uint64
	attached := 0
	for _, e := range evs {
		assert.Greater(t, e.Seq, lastSeq, "sequence numbers increase")
		if e.Providers.Generation != 0 {
			assert.GreaterOrEqual(t, e.Providers.Generation, lastGen, "generations never go back (event %d)", e.Seq)
			lastGen = e.Providers.Generation
		}
		lastSeq = e.Seq
		if e.Kind == model.EventSourcesAdded {
			attached++
		}
	}
	assert.Equal(t, 2*perProcess, attached, "one event per batch, none lost")
	assert.Equal(t, got.Providers.Generation, lastGen, "the last event carries the task's generation")
}

func TestPostgresMigrationsFromTwoProcessesAtOnce(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.NewDatabase(t)

	helpers(t, url, "", nil, nil, nil) // three processes open (and so migrate) the empty database at once

	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	var versions, rows int
	require.NoError(t, db.QueryRow(`SELECT count(DISTINCT version_id), count(*) FROM goose_db_version WHERE version_id > 0`).
		Scan(&versions, &rows))
	assert.Equal(t, versions, rows, "each migration applied once")
	s := openOptions(t, t.TempDir(), nil, store.Options{DatabaseURL: url})
	v, err := s.SchemaVersion(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(versions), v)
}

func TestPostgresStartErrors(t *testing.T) {
	c := pgtest.Shared(t)
	ctx := context.Background()
	openErr := func(opts store.Options) error {
		s, err := store.Open(ctx, t.TempDir(), opts)
		if err == nil {
			_ = s.Close()
		}
		return err
	}

	err := openErr(store.Options{DatabaseURL: "postgres://u@db.example:notaport/x"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "a malformed URL")
	assert.Contains(t, err.Error(), "not a PostgreSQL connection URL")

	err = openErr(store.Options{DatabaseURL: "postgres://u:hunter2@db.example/x"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "a password in the URL")
	assert.NotContains(t, err.Error(), "hunter2")

	err = openErr(store.Options{DatabaseURL: "postgres://u@db.example/x?password=hunter2"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "a password as a URL parameter")
	err = openErr(store.Options{DatabaseURL: "host=db.example password=hunter2"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "a password as a keyword")
	err = openErr(store.Options{DatabaseURL: "postgres://u:hunter2@db.example:notaport/x"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "a malformed URL with a password")
	assert.NotContains(t, err.Error(), "hunter2")

	t.Setenv("PGPASSWORD", "from-the-environment") // pgx's own lookup is not a password in the URL
	s, err := store.Open(ctx, t.TempDir(), store.Options{DatabaseURL: c.NewDatabase(t)})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	err = openErr(store.Options{DatabaseURL: "postgres://u@/x?host=" + t.TempDir() + "&connect_timeout=5"})
	require.ErrorIs(t, err, errdefs.ErrUnavailable, "no server there")
	assert.Contains(t, err.Error(), "cannot be reached")

	err = openErr(store.Options{DatabaseURL: strings.Replace(c.URL("postgres"), "/postgres?", "/nosuchdb?", 1)})
	require.ErrorIs(t, err, errdefs.ErrUnavailable, "no such database")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = store.Open(canceled, t.TempDir(), store.Options{DatabaseURL: c.NewDatabase(t)})
	require.ErrorIs(t, err, context.Canceled, "the caller's cancellation stays itself")
	assert.NotErrorIs(t, err, errdefs.ErrUnavailable)

	url := c.NewDatabase(t)
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE other_app (id int)`)
	require.NoError(t, err)
	err = openErr(store.Options{DatabaseURL: url})
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition, "another application's database")
	assert.Contains(t, err.Error(), "not a toolscope database")
}

// BenchmarkWriteAndReadPerStore: one write transaction (CreateTask) and
// one read (GetTask) per store, for the cost of PostgreSQL's advisory
// write lock and REPEATABLE READ reads next to SQLite's one writer.
func BenchmarkWriteAndReadPerStore(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			opts := store.Options{}
			if name == "postgres" {
				opts.DatabaseURL = pgtest.Shared(b).NewDatabase(b)
			}
			ctx := context.Background()
			s, err := store.Open(ctx, b.TempDir(), opts)
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			ws, err := s.CreateWorkspace(ctx, "bench")
			require.NoError(b, err)
			r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
			require.NoError(b, err)
			b.Run("write", func(b *testing.B) {
				for b.Loop() {
					_, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t"}, r.ID)
					require.NoError(b, err)
				}
			})
			task, err := s.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "t"}, r.ID)
			require.NoError(b, err)
			b.Run("read", func(b *testing.B) {
				for b.Loop() {
					_, err := s.GetTask(ctx, task.ID)
					require.NoError(b, err)
				}
			})
		})
	}
}
