package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// recorder collects what the store hands to OnCommit.
type recorder struct {
	mu     sync.Mutex
	events []model.Event
}

func (r *recorder) onCommit(evs []model.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, evs...)
}

func (r *recorder) snapshot() []model.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]model.Event(nil), r.events...)
}

func open(t *testing.T, dir string, rec *recorder) *store.Store {
	t.Helper()
	opts := store.Options{}
	if rec != nil {
		opts.OnCommit = rec.onCommit
	}
	s, err := store.Open(context.Background(), dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fixture is a workspace with a github, a gitlab, a local and an
// unknown-provider repository.
type fixture struct {
	ws                             model.Workspace
	github, gitlab, local, unknown model.Repository
}

func newFixture(t *testing.T, s *store.Store, name string) fixture {
	t.Helper()
	ctx := context.Background()
	ws, err := s.CreateWorkspace(ctx, name)
	require.NoError(t, err)
	repo := func(provider, host, path string) model.Repository {
		r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: provider, Host: host, Path: path})
		require.NoError(t, err)
		return r
	}
	return fixture{
		ws:      ws,
		github:  repo("github", "github.com", "acme/api"),
		gitlab:  repo("GitLab ", "gitlab.com", "acme/platform/web"),
		local:   repo("local", "", "/src/scratch"),
		unknown: repo("Bitbucket", "bitbucket.org", "acme/old"),
	}
}

func TestProviderSetIsTheUnionOfEveryAttachedRepository(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")

		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "fix login"}, f.github.ID)
		require.NoError(t, err)
		assert.Equal(t, "github", task.Providers.Set.String())
		assert.Equal(t, uint64(1), task.Providers.Generation)

		task, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, f.local.ID, f.unknown.ID}, testActor)
		require.NoError(t, err)
		assert.Equal(t, "github,gitlab", task.Providers.Set.String())
		assert.Equal(t, uint64(2), task.Providers.Generation, "one batch, one generation")
		require.Len(t, task.Repositories, 4)
		for i, want := range []model.Repository{f.github, f.gitlab, f.local, f.unknown} {
			assert.Equal(t, want.ID, task.Repositories[i].ID)
			assert.Equal(t, i, task.Repositories[i].Position)
			assert.Equal(t, i == 0, task.Repositories[i].Primary)
		}
		assert.Equal(t, "GitLab ", task.Repositories[1].Provider, "provider is stored exactly as given")
		assert.Equal(t, "Bitbucket", task.Repositories[3].Provider)

		joined, err := s.TaskProviders(ctx, task.ID)
		require.NoError(t, err)
		assert.Equal(t, task.Providers, joined, "the joined query and the loaded task agree")
	})
}

func TestPrimaryRepositoryDoesNotOverrideTheUnion(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")

		cases := []struct {
			name    string
			primary model.Repository
			added   []model.Repository
			want    string
		}{
			{"local primary, github added", f.local, []model.Repository{f.github}, "github"},
			{"gitlab primary, github added", f.gitlab, []model.Repository{f.github}, "github,gitlab"},
			{"unknown primary, nothing added", f.unknown, nil, ""},
			{"local primary, unknown added", f.local, []model.Repository{f.unknown}, ""},
		}
		for _, c := range cases {
			task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: c.name}, c.primary.ID)
			require.NoError(t, err, c.name)
			if len(c.added) > 0 {
				var ids []string
				for _, r := range c.added {
					ids = append(ids, r.ID)
				}
				_, err = s.AddSources(ctx, task.ID, ids, testActor)
				require.NoError(t, err, c.name)
			}
			set, err := s.TaskProviders(ctx, task.ID)
			require.NoError(t, err, c.name)
			assert.Equal(t, c.want, set.Set.String(), c.name)
		}
	})
}

func TestAddSourcesIsAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		rec := &recorder{}
		s := b.open(t, rec)
		f := newFixture(t, s, "acme")
		other := newFixture(t, s, "other")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		before := len(rec.snapshot())

		_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, "repo_missing"}, testActor)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		assert.Contains(t, err.Error(), `"repo_missing"`)
		assert.Contains(t, err.Error(), "repository_ids[1]")

		_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, other.github.ID}, testActor)
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Equal(t, "repository_ids[1]", errdefs.FieldOf(err))

		_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, f.github.ID}, testActor)
		assert.ErrorIs(t, err, errdefs.ErrAlreadyExists)
		assert.Contains(t, err.Error(), f.github.ID)

		_, err = s.AddSources(ctx, "task_missing", []string{f.gitlab.ID}, testActor)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		assert.Contains(t, err.Error(), `"task_missing"`)

		got, err := s.GetTask(ctx, task.ID)
		require.NoError(t, err)
		assert.Len(t, got.Repositories, 1, "no failed batch attached anything")
		assert.Equal(t, uint64(1), got.Providers.Generation, "no failed batch moved the generation")
		assert.Len(t, rec.snapshot(), before, "no failed batch published an event")
	})
}

func TestConcurrentBatchesEndWithTheUnionOfBoth(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.local.ID)
		require.NoError(t, err)

		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, repo := range []model.Repository{f.github, f.gitlab} {
			wg.Go(func() { _, errs[i] = s.AddSources(ctx, task.ID, []string{repo.ID}, testActor) })
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])

		set, err := s.TaskProviders(ctx, task.ID)
		require.NoError(t, err)
		assert.Equal(t, "github,gitlab", set.Set.String())
		assert.Equal(t, uint64(3), set.Generation)
	})
}

func TestBadInputIsRefusedWithNamedErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")

		_, err := s.CreateWorkspace(ctx, "acme")
		assert.ErrorIs(t, err, errdefs.ErrAlreadyExists)

		_, err = s.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "GitHub.com", Path: "ACME/api"})
		assert.ErrorIs(t, err, errdefs.ErrAlreadyExists, "host and path compare case-insensitively")
		assert.Contains(t, err.Error(), f.github.ID)

		other, err := s.CreateWorkspace(ctx, "other")
		require.NoError(t, err)
		_, err = s.CreateRepository(ctx, model.Repository{WorkspaceID: other.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
		assert.NoError(t, err, "the same repository may live in another workspace")

		for name, call := range map[string]func() error{
			"workspace":  func() error { _, err := s.GetWorkspace(ctx, "ws_nope"); return err },
			"repository": func() error { _, err := s.GetRepository(ctx, "repo_nope"); return err },
			"task":       func() error { _, err := s.GetTask(ctx, "task_nope"); return err },
			"session":    func() error { _, err := s.GetSession(ctx, "sess_nope"); return err },
			"repos of":   func() error { _, err := s.ListRepositories(ctx, "ws_gone"); return err },
			"tasks of":   func() error { _, err := s.ListTasks(ctx, "ws_gone"); return err },
			"events of":  func() error { _, err := s.Events(ctx, "task_gone", 0, 10); return err },
			"task on":    func() error { _, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID}, "repo_nope"); return err },
			"connection": func() error { return s.RemoveConnection(ctx, f.ws.ID, providers.GitLab) },
		} {
			err := call()
			assert.ErrorIs(t, err, errdefs.ErrNotFound, name)
			assert.Regexp(t, `"(ws|repo|task|sess)_(nope|gone)"|no gitlab connection`, err.Error(), name)
		}
		_, err = s.CreateTask(ctx, model.Task{WorkspaceID: other.ID}, f.github.ID)
		assert.Equal(t, "repository_id", errdefs.FieldOf(err), "primary repository from another workspace")
	})
}

func TestDataSurvivesARestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "nested", "data dir") // created on open; a space in the path
		opts := b.options(t)
		s, err := store.Open(ctx, dir, opts)
		require.NoError(t, err)
		f := newFixture(t, s, "acme")
		conn, err := s.SetConnection(ctx, f.ws.ID, model.Connection{
			Provider: providers.GitLab, APIBaseURL: "https://gitlab.example.com/api/v4",
			Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GITLAB_TOKEN"},
		})
		require.NoError(t, err)
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t", Description: "d"}, f.github.ID)
		require.NoError(t, err)
		task, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID}, testActor)
		require.NoError(t, err)
		sess, err := s.CreateSession(ctx, model.Session{
			TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending,
			AgentArgv: []string{"claude", "--print"}, Handle: model.Handle{Version: 1, State: []byte(`{"pid":42}`)}, Image: "alpine:3", AgentProfile: "codex", AgentModel: "o4", AgentCredentialEnv: "OPENAI_API_KEY",
			AgentPassEnv: []string{"DEPLOY_REGION"},
			Applied:      task.Providers,
			Checkouts: model.Checkouts{Dir: "/data/workspaces/s", Repositories: []model.Checkout{
				{RepositoryID: f.github.ID, Key: "github.com/acme/api", Path: "/data/workspaces/s/api", Branch: "toolscope/t/s"},
				{RepositoryID: f.gitlab.ID, Key: "gitlab.com/acme/web", Branch: "toolscope/t/s", Error: "the fetch was refused"},
			}},
		})
		require.NoError(t, err)
		delivered := &model.Delivered{Commit: "0123456789abcdef0123456789abcdef01234567", At: time.Date(2026, 12, 3, 8, 0, 0, 123456789, time.UTC)}
		sess, err = s.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
			m.Checkouts.Repositories[0].Delivered = delivered
			return nil, nil
		})
		require.NoError(t, err)
		events, err := s.Events(ctx, task.ID, 0, 100)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		s2 := openOptions(t, dir, nil, opts)
		ws, err := s2.GetWorkspace(ctx, f.ws.ID)
		require.NoError(t, err)
		assert.Equal(t, "acme", ws.Name)
		assert.Equal(t, []model.Connection{conn}, ws.Connections)
		gotTask, err := s2.GetTask(ctx, task.ID)
		require.NoError(t, err)
		assert.Equal(t, task, gotTask)
		gotSess, err := s2.GetSession(ctx, sess.ID)
		require.NoError(t, err)
		assert.Equal(t, sess, gotSess)
		assert.Equal(t, delivered, gotSess.Checkouts.Repositories[0].Delivered, "the workspace and its deliveries are kept")
		gotEvents, err := s2.Events(ctx, task.ID, 0, 100)
		require.NoError(t, err)
		assert.Equal(t, events, gotEvents)
		v, err := s2.SchemaVersion(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(14), v)
	})
}

func TestEventsArePublishedAfterCommitInOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		rec := &recorder{}
		s := b.open(t, rec)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID, f.local.ID}, testActor)
		require.NoError(t, err)

		published := rec.snapshot()
		stored, err := s.Events(ctx, task.ID, 0, 100)
		require.NoError(t, err)
		assert.Equal(t, stored, published)
		require.Len(t, stored, 2)
		assert.Equal(t, model.EventTaskCreated, stored[0].Kind)
		assert.Equal(t, model.EventSourcesAdded, stored[1].Kind)
		assert.Equal(t, []string{f.gitlab.ID, f.local.ID}, stored[1].RepositoryIDs)
		assert.Equal(t, "github,gitlab", stored[1].Providers.Set.String())
		assert.Less(t, stored[0].Seq, stored[1].Seq)

		after, err := s.Events(ctx, task.ID, stored[0].Seq, 100)
		require.NoError(t, err)
		assert.Equal(t, stored[1:], after)
	})
}

func TestUpdateSessionWritesNothingWhenItFails(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		rec := &recorder{}
		s := b.open(t, rec)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		sess, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
		require.NoError(t, err)
		before := len(rec.snapshot())

		_, err = s.UpdateSession(ctx, sess.ID, func(s *model.Session) ([]model.Event, error) {
			s.State = model.SessionRunning
			return nil, fmt.Errorf("executor refused: %w", errdefs.ErrUnavailable)
		})
		assert.ErrorIs(t, err, errdefs.ErrUnavailable)
		got, err := s.GetSession(ctx, sess.ID)
		require.NoError(t, err)
		assert.Equal(t, model.SessionPending, got.State)

		got, err = s.UpdateSession(ctx, sess.ID, func(s *model.Session) ([]model.Event, error) {
			s.State, s.NeedsRepair, s.StatusMessage = model.SessionRunning, true, "push failed"
			return []model.Event{{Kind: model.EventSessionStarted, Message: "started"}}, nil
		})
		require.NoError(t, err)
		assert.True(t, got.NeedsRepair)
		evs := rec.snapshot()[before:]
		require.Len(t, evs, 1)
		assert.Equal(t, sess.ID, evs[0].SessionID)
		assert.Equal(t, task.ID, evs[0].TaskID)
	})
}

func TestNewerSchemaIsRefusedWithoutTouchingTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(ctx, dir, store.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	path := filepath.Join(dir, store.FileName)
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = raw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)`)
	require.NoError(t, err)
	_, err = raw.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	filesBefore := listDir(t, dir)

	_, err = store.Open(ctx, dir, store.Options{})
	require.ErrorIs(t, err, store.ErrSchemaTooNew)
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "schema version 999")
	assert.Contains(t, err.Error(), path)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(before, after), "the database file was changed")
	assert.Equal(t, filesBefore, listDir(t, dir), "files appeared or vanished in the data dir")
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestUnusableDataIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("not a database", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, store.FileName)
		junk := []byte("this is not an SQLite database, just some text that is long enough to matter\n")
		require.NoError(t, os.WriteFile(path, junk, 0o600))
		_, err := store.Open(ctx, dir, store.Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, junk, after)
		assert.Equal(t, []string{store.FileName}, listDir(t, dir))
	})
	t.Run("another application's database", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, store.FileName)
		raw, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = raw.Exec(`CREATE TABLE notes (body TEXT)`)
		require.NoError(t, err)
		require.NoError(t, raw.Close())
		_, err = store.Open(ctx, dir, store.Options{})
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
		assert.Contains(t, err.Error(), "not a toolscope database")
	})
	t.Run("data dir is a file", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "occupied")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		_, err := store.Open(ctx, file, store.Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), file)
	})
	t.Run("no data dir", func(t *testing.T) {
		t.Parallel()
		_, err := store.Open(ctx, "", store.Options{})
		assert.Equal(t, "data_dir", errdefs.FieldOf(err))
	})
}

// TestReadsSeeOneSnapshot reads a task while batches land: its generation,
// repositories and provider set must always belong to the same commit.
func TestReadsSeeOneSnapshot(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.local.ID)
		require.NoError(t, err)

		const batches = 60
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(done)
			for i := range batches {
				r, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "local", Path: fmt.Sprintf("/src/%d", i)})
				if !assert.NoError(t, err) {
					return
				}
				if _, err := s.AddSources(ctx, task.ID, []string{r.ID}, testActor); !assert.NoError(t, err) {
					return
				}
			}
		})
		reads := 0
		for {
			select {
			case <-done:
				wg.Wait()
				t.Logf("%d consistent reads during %d batches", reads, batches)
				return
			default:
			}
			got, err := s.GetTask(ctx, task.ID)
			require.NoError(t, err)
			// Generation g means g-1 batches of one repository each.
			require.Equal(t, int(got.Providers.Generation), len(got.Repositories), "torn read")
			list, err := s.ListTasks(ctx, f.ws.ID)
			require.NoError(t, err)
			require.Equal(t, int(list[0].Providers.Generation), len(list[0].Repositories), "torn list")
			reads++
		}
	})
}

func TestEventsRefuseAnImpossibleSequence(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		s := b.open(t, nil)
		_, err := s.Events(context.Background(), "task_x", 1<<63, 10)
		assert.Equal(t, "after_sequence", errdefs.FieldOf(err))
	})
}

func TestChangeRequestsAndAutomation(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)

		_, err = s.ChangeRequest(ctx, task.ID, f.github.ID)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		cr, err := s.RecordChangeRequest(ctx, model.ChangeRequest{TaskID: task.ID, RepositoryID: f.github.ID, Provider: providers.GitHub,
			Number: 7, URL: "https://github.example/acme/api/pull/7", Title: "Fix", SourceBranch: "fix", TargetBranch: "main",
			Automation: model.DefaultAutomation})
		require.NoError(t, err)
		_, err = s.RecordChangeRequest(ctx, cr)
		assert.ErrorIs(t, err, errdefs.ErrAlreadyExists, "one change request per task and repository")

		updated, err := s.UpdateAutomation(ctx, task.ID, f.github.ID, func(a *model.Automation) { a.AutoMerge, a.PromptOnClosed = true, false })
		require.NoError(t, err)
		assert.Equal(t, model.Automation{AutoMerge: true, PromptOnReviewRequested: true, PromptOnMerged: true}, updated.Automation)
		got, err := s.ChangeRequest(ctx, task.ID, f.github.ID)
		require.NoError(t, err)
		assert.Equal(t, updated, got)
		_, err = s.UpdateAutomation(ctx, task.ID, f.gitlab.ID, func(*model.Automation) {})
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
	})
}

// testActor makes the tests' changes.
var testActor = model.Actor{Kind: model.ActorPerson, Name: "test"}

// TestTheReaderPoolIsBounded: reads beyond Options.MaxReaders wait for a
// connection instead of opening one each; a negative bound is refused.
func TestTheReaderPoolIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	_, err := store.Open(ctx, dir, store.Options{MaxReaders: -1})
	assert.Equal(t, "max_readers", errdefs.FieldOf(err))

	s, err := store.Open(ctx, dir, store.Options{MaxReaders: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	f := newFixture(t, s, "acme")
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			_, err := s.GetWorkspace(ctx, f.ws.ID)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	stats := s.ReaderStats()
	assert.Equal(t, 2, stats.MaxOpenConnections)
	assert.LessOrEqual(t, stats.OpenConnections, 2)
	assert.Positive(t, stats.WaitCount, "reads waited for a connection")
}

// damage overwrites the middle of the database file with bytes that are
// not a b-tree page (after checkpointing everything into it), as a disk
// or a careless copy can.
func damage(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	const page = 4096
	require.Greater(t, info.Size(), int64(4*page), "a database of several pages")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	junk := bytes.Repeat([]byte{0xA5, 0x5A, 0xFF, 0x00}, 2*page/4)
	_, err = f.WriteAt(junk, (info.Size()/page/2)*page)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestDamagedDatabasesAreRefusedWithoutWritingToThem: an empty database
// file beside a previous run's files, and a file whose quick_check fails,
// stop Open with an error that names the file and the recovery step; the
// file and the data directory are left exactly as they were. An empty file
// in an otherwise new directory is a new database.
func TestDamagedDatabasesAreRefusedWithoutWritingToThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refused := func(t *testing.T, dir string, want string) {
		t.Helper()
		path := filepath.Join(dir, store.FileName)
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		files := listDir(t, dir)
		_, openErr := store.Open(ctx, dir, store.Options{})
		require.ErrorIs(t, openErr, store.ErrDamaged)
		assert.ErrorIs(t, openErr, errdefs.ErrFailedPrecondition)
		assert.ErrorContains(t, openErr, path)
		assert.ErrorContains(t, openErr, want)
		assert.ErrorContains(t, openErr, "restore it from a backup")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(before, after), "the database file was changed")
		assert.Equal(t, files, listDir(t, dir), "files appeared or vanished in the data dir")
		testutil.Figure(t, "damaged database: "+t.Name()[strings.LastIndex(t.Name(), "/")+1:], "refused (%s), its %d bytes and the data directory unchanged",
			openErr.Error()[len("open database "+path+": "):], len(after))
	}
	t.Run("empty beside a previous run's sessions", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sessions"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, store.FileName), nil, 0o600))
		refused(t, dir, "is empty, but the data directory holds sessions")
	})
	t.Run("empty beside a write-ahead log", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, store.FileName), nil, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, store.FileName+"-wal"), []byte("wal of a previous run"), 0o600))
		refused(t, dir, "is empty, but the data directory holds "+store.FileName+"-wal")
	})
	t.Run("quick_check fails", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s, err := store.Open(ctx, dir, store.Options{})
		require.NoError(t, err)
		ws, err := s.CreateWorkspace(ctx, "acme")
		require.NoError(t, err)
		for i := range 200 {
			_, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: ws.ID, Provider: "local", Path: fmt.Sprintf("/src/%d/%s", i, strings.Repeat("x", 200))})
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		damage(t, filepath.Join(dir, store.FileName))
		refused(t, dir, "quick_check")
	})
	t.Run("empty in a new directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, store.FileName), nil, 0o600))
		s, err := store.Open(ctx, dir, store.Options{})
		require.NoError(t, err)
		_, err = s.CreateWorkspace(ctx, "acme")
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})
}

// TestAbandonSessionForgetsOnlyALaunchThatNeverStarted: a pending
// session without a handle is deleted, with its event on the task; a
// session that ran is kept.
func TestAbandonSessionForgetsOnlyALaunchThatNeverStarted(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, &recorder{})
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		never, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
		require.NoError(t, err)
		ran, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
		require.NoError(t, err)
		_, err = s.UpdateSession(ctx, ran.ID, func(m *model.Session) ([]model.Event, error) {
			m.State, m.Handle = model.SessionFailed, model.Handle{Version: 1, State: []byte(`{"pid":1}`)}
			return nil, nil
		})
		require.NoError(t, err)

		require.NoError(t, s.AbandonSession(ctx, never.ID, model.Event{Kind: model.EventSessionEnded, Message: "launch failed, no session kept: refused"}))
		_, err = s.GetSession(ctx, never.ID)
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		err = s.AbandonSession(ctx, ran.ID, model.Event{Kind: model.EventSessionEnded, Message: "x"})
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
		list, err := s.ListSessions(ctx, task.ID)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, ran.ID, list[0].ID)
		evs, err := s.Events(ctx, task.ID, 0, 100)
		require.NoError(t, err)
		last := evs[len(evs)-1]
		assert.Equal(t, never.ID, last.SessionID)
		assert.Equal(t, model.EventSessionEnded, last.Kind)
		assert.Contains(t, last.Message, "no session kept")
	})
}

// model.Every lists every workspace's tasks and every task's sessions in
// one read, in creation order, with each task's repositories; a real id
// still lists its own only, and an unknown one is still not found.
func TestEveryListsAcrossWorkspacesAndTasks(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		acme, globex := newFixture(t, s, "acme"), newFixture(t, s, "globex")
		var tasks []model.Task
		for _, f := range []fixture{acme, globex, acme} {
			task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
			require.NoError(t, err)
			tasks = append(tasks, task)
		}
		_, err := s.AddSources(ctx, tasks[1].ID, []string{globex.gitlab.ID}, testActor)
		require.NoError(t, err)
		var sessions []model.Session
		for _, task := range []model.Task{tasks[2], tasks[0], tasks[2]} {
			sess, err := s.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
			require.NoError(t, err)
			sessions = append(sessions, sess)
		}

		all, err := s.ListTasks(ctx, model.Every)
		require.NoError(t, err)
		require.Len(t, all, 3)
		for i, task := range all {
			assert.Equal(t, tasks[i].ID, task.ID, "creation order across workspaces")
		}
		assert.Equal(t, "github,gitlab", all[1].Providers.Set.String(), "each task with its own repositories")
		assert.Len(t, all[1].Repositories, 2)
		assert.Len(t, all[0].Repositories, 1)
		mine, err := s.ListTasks(ctx, acme.ws.ID)
		require.NoError(t, err)
		assert.Len(t, mine, 2, "a workspace's own")

		everySession, err := s.ListSessions(ctx, model.Every)
		require.NoError(t, err)
		require.Len(t, everySession, 3)
		for i, sess := range everySession {
			assert.Equal(t, sessions[i].ID, sess.ID, "creation order across tasks")
		}
		own, err := s.ListSessions(ctx, tasks[2].ID)
		require.NoError(t, err)
		assert.Len(t, own, 2, "a task's own")

		everyRepo, err := s.ListRepositories(ctx, model.Every)
		require.NoError(t, err)
		var repoIDs []string
		for _, r := range everyRepo {
			repoIDs = append(repoIDs, r.ID)
		}
		ownRepos, err := s.ListRepositories(ctx, globex.ws.ID)
		require.NoError(t, err)
		require.NotEmpty(t, ownRepos)
		acmeRepos, err := s.ListRepositories(ctx, acme.ws.ID)
		require.NoError(t, err)
		var want []string
		for _, r := range append(acmeRepos, ownRepos...) {
			want = append(want, r.ID)
		}
		assert.Equal(t, want, repoIDs, "every workspace's, in creation order")

		_, err = s.ListTasks(ctx, "ws_gone")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, err = s.ListSessions(ctx, "task_gone")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
		_, err = s.ListRepositories(ctx, "ws_gone")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)
	})
}

// TestCertificateRevocations: a revocation is found by its serial with
// what describes it, listed oldest first, and a second revocation of the
// same serial is a failed precondition that changes nothing.
func TestCertificateRevocations(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		_, err := s.CertificateRevocation(ctx, "abc")
		assert.ErrorIs(t, err, errdefs.ErrNotFound)

		notAfter := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
		bob, err := s.RevokeCertificate(ctx, model.RevokedCertificate{Serial: "abc", Name: "bob", Issuer: "CN=toolscope CA", NotAfter: notAfter, RevokedBy: "person:local:1000"})
		require.NoError(t, err)
		assert.False(t, bob.RevokedAt.IsZero())
		_, err = s.RevokeCertificate(ctx, model.RevokedCertificate{Serial: "def"})
		require.NoError(t, err)
		_, err = s.RevokeCertificate(ctx, model.RevokedCertificate{Serial: "abc", Name: "not bob"})
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)

		got, err := s.CertificateRevocation(ctx, "abc")
		require.NoError(t, err)
		assert.Equal(t, "bob", got.Name, "the first revocation stands")
		assert.Equal(t, "CN=toolscope CA", got.Issuer)
		assert.True(t, notAfter.Equal(got.NotAfter))
		assert.Equal(t, "person:local:1000", got.RevokedBy)
		list, err := s.ListRevokedCertificates(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "abc", list[0].Serial)
		assert.True(t, list[1].NotAfter.IsZero(), "revoked by serial alone")
	})
}

// TestPruneAuditKeepsTheNewestAndSaysWhereItCut (issue 33, item 6): the
// audit of a task is bounded to its newest tool.called events; the others
// go, their number recorded, and no event of another kind or another task
// is touched.
func TestPruneAuditKeepsTheNewestAndSaysWhereItCut(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := b.open(t, nil)
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		small, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "small"}, f.github.ID)
		require.NoError(t, err)
		call := func(task string, i int) model.Event {
			return model.Event{TaskID: task, Kind: model.EventToolCalled, Message: fmt.Sprintf("tool=task_info outcome=ok n=%d", i)}
		}
		for i := range 50 {
			require.NoError(t, s.AppendEvents(ctx, call(task.ID, i)))
		}
		for i := range 5 {
			require.NoError(t, s.AppendEvents(ctx, call(small.ID, i)))
		}
		_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID}, testActor)
		require.NoError(t, err)

		removed, err := s.PruneAudit(ctx, 10)
		require.NoError(t, err)
		assert.EqualValues(t, 40, removed)
		evs, err := s.Events(ctx, task.ID, 0, 1000)
		require.NoError(t, err)
		var calls []string
		kinds := map[model.EventKind]int{}
		for _, e := range evs {
			kinds[e.Kind]++
			if e.Kind == model.EventToolCalled {
				calls = append(calls, e.Message)
			}
		}
		require.Len(t, calls, 11, "the newest 10 calls, and the record of the cut")
		assert.Equal(t, "tool=task_info outcome=ok n=40", calls[0], "the newest kept, in order")
		assert.Regexp(t, `^tool=\(pruned\) outcome=pruned pruned_calls=40 through_seq=\d+$`, calls[10])
		assert.Equal(t, 1, kinds[model.EventTaskCreated], "other kinds untouched")
		assert.Equal(t, 1, kinds[model.EventSourcesAdded])
		other, err := s.Events(ctx, small.ID, 0, 1000)
		require.NoError(t, err)
		assert.Len(t, other, 6, "a task within its bound untouched")

		removed, err = s.PruneAudit(ctx, 11)
		require.NoError(t, err)
		assert.Zero(t, removed, "a second pass within the bound removes nothing")
	})
}
