package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

func newService(t *testing.T) *service.Service {
	t.Helper()
	svc, _ := newServiceAndStore(t)
	return svc
}

func newServiceAndStore(t *testing.T) (*service.Service, *store.Store) {
	t.Helper()
	broker := &events.Broker{}
	st, err := store.Open(context.Background(), t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{})
	t.Cleanup(svc.Close)
	return svc, st
}

type world struct {
	svc    *service.Service
	ws     model.Workspace
	github model.Repository
	gitlab model.Repository
	task   model.Task
}

func newWorld(t *testing.T) world {
	t.Helper()
	ctx := context.Background()
	w := world{svc: newService(t)}
	var err error
	w.ws, err = w.svc.CreateWorkspace(ctx, "  acme  ")
	require.NoError(t, err)
	w.github, err = w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "github", RemoteURL: "https://github.com/acme/api.git"})
	require.NoError(t, err)
	w.gitlab, err = w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab", Host: "gitlab.com", Path: "/acme/web/"})
	require.NoError(t, err)
	w.task, err = w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "fix login", RepositoryID: w.github.ID})
	require.NoError(t, err)
	return w
}

func TestInvalidRequestsNameTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	svc := w.svc
	cases := []struct {
		field string
		call  func() error
	}{
		{"name", func() error { _, err := svc.CreateWorkspace(ctx, " \t"); return err }},
		{"name", func() error { _, err := svc.CreateWorkspace(ctx, strings.Repeat("x", 101)); return err }},
		{"name", func() error { _, err := svc.CreateWorkspace(ctx, "bad\x07name"); return err }},
		{"workspace_id", func() error { _, err := svc.GetWorkspace(ctx, ""); return err }},
		{"provider", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "local",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "T"}})
			return err
		}},
		{"api_base_url", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github", APIBaseURL: "ftp://x",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "T"}})
			return err
		}},
		{"api_base_url", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github", APIBaseURL: "https://me:pw@ghe.local/api/v3",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "T"}})
			return err
		}},
		{"credential", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github"})
			return err
		}},
		{"credential.env_var", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "ghp_secretvalue-with-dash"}})
			return err
		}},
		{"credential.file_path", func() error {
			_, err := svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: "token.txt"}})
			return err
		}},
		{"path", func() error {
			_, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local"})
			return err
		}},
		{"host", func() error {
			_, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: " GitHub", Path: "acme/x"})
			return err
		}},
		{"remote_url", func() error {
			_, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "github", RemoteURL: "not a url"})
			return err
		}},
		{"title", func() error {
			_, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, RepositoryID: w.github.ID})
			return err
		}},
		{"repository_id", func() error {
			_, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "t"})
			return err
		}},
		{"repository_ids", func() error { _, err := svc.AddSources(ctx, w.task.ID, nil); return err }},
		{"repository_ids", func() error { _, err := svc.AddSources(ctx, w.task.ID, make([]string, service.MaxBatch+1)); return err }},
		{"repository_ids[1]", func() error { _, err := svc.AddSources(ctx, w.task.ID, []string{w.gitlab.ID, " "}); return err }},
		{"repository_ids[2]", func() error {
			_, err := svc.AddSources(ctx, w.task.ID, []string{w.gitlab.ID, "repo_b", w.gitlab.ID})
			return err
		}},
		{"task_id", func() error { _, err := svc.AddSources(ctx, "", []string{w.gitlab.ID}); return err }},
		{"executor", func() error {
			_, err := svc.LaunchSession(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "nomad"}, nil)
			return err
		}},
		{"executor", func() error {
			_, err := svc.LaunchSession(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "hosted"}, nil)
			if err != nil && !strings.Contains(err.Error(), "toolscope session attach") {
				return fmt.Errorf("the refusal does not point at session attach: %v", err)
			}
			return err
		}},
		{"mode", func() error {
			_, err := svc.LaunchSession(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", Mode: "yolo"}, nil)
			return err
		}},
		{"agent.argv[1]", func() error {
			_, err := svc.LaunchSession(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{"a", "b\x00"}}, nil)
			return err
		}},
		{"session_id", func() error { _, err := svc.StopSession(ctx, "", false); return err }},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, c.field), func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
			assert.Equal(t, c.field, errdefs.FieldOf(err), err.Error())
		})
	}

	got, err := svc.GetTask(ctx, w.task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 1, "no invalid batch attached anything")
	assert.Equal(t, uint64(1), got.Providers.Generation)
}

func TestDefaultsAndNormalization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	assert.Equal(t, "acme", w.ws.Name, "names are trimmed")
	assert.Equal(t, "github.com", w.github.Host)
	assert.Equal(t, "acme/api", w.github.Path, "host and path come from the remote URL")
	assert.Equal(t, "acme/web", w.gitlab.Path, "slashes around a hosted path are dropped")

	local, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/scratch"})
	require.NoError(t, err)
	assert.Equal(t, "/src/scratch", local.Path, "a local path is kept as given")

	c, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: " GitLab ", SkipValidation: true,
		Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: "/run/secrets/gitlab"}})
	require.NoError(t, err)
	assert.Equal(t, "gitlab", string(c.Provider))
	assert.Equal(t, "https://gitlab.com/api/v4", c.APIBaseURL)
	c, err = w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github", SkipValidation: true,
		APIBaseURL: "https://ghe.example.com/api/v3/", Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GHE_TOKEN"}})
	require.NoError(t, err)
	assert.Equal(t, "https://ghe.example.com/api/v3", c.APIBaseURL)

	ws, err := w.svc.GetWorkspace(ctx, w.ws.ID)
	require.NoError(t, err)
	require.Len(t, ws.Connections, 2)
	assert.Equal(t, "github", string(ws.Connections[0].Provider), "connections in canonical order")
	require.NoError(t, w.svc.RemoveConnection(ctx, w.ws.ID, "GITHUB"))
	ws, err = w.svc.GetWorkspace(ctx, w.ws.ID)
	require.NoError(t, err)
	assert.Len(t, ws.Connections, 1)
}

func TestParseRemote(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, host, path string }{
		{"https://github.com/acme/api", "github.com", "acme/api"},
		{"https://GitHub.com/acme/api.git", "github.com", "acme/api"},
		{"https://gitlab.example.com:8443/group/sub/project.git", "gitlab.example.com", "group/sub/project"},
		{"ssh://git@gitlab.com:2222/group/project.git", "gitlab.com", "group/project"},
		{"git@github.com:acme/api.git", "github.com", "acme/api"},
		{"github.com:acme/api", "github.com", "acme/api"},
		{"file:///src/scratch", "", "/src/scratch"},
	}
	for _, c := range cases {
		r, err := service.ParseRemote(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, service.Remote{Host: c.host, Path: c.path}, r, c.in)
	}
	for _, bad := range []string{"", "acme/api", "https:///acme", "git@:acme/api", "https://github.com/", "file://host/x"} {
		_, err := service.ParseRemote(bad)
		assert.Error(t, err, bad)
	}
}

// TestSecretsAreRefusedAndNeverEchoed feeds token-shaped values into every
// field that names where a secret lives or that could carry one, and checks
// each is refused with an error that names the field but not the value.
func TestSecretsAreRefusedAndNeverEchoed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	const token = "glpat-Zx9vQ2mN4bR7tY1uW3eA"
	env := model.CredentialRef{Kind: model.CredentialEnv, Ref: "GITLAB_TOKEN"}
	cases := []struct {
		field string
		call  func() error
	}{
		{"credential.env_var", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: token}})
			return err
		}},
		{"credential.env_var", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "ghp_" + token[6:]}})
			return err
		}},
		{"credential.env_var", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "x-" + token}})
			return err
		}},
		{"credential.file_path", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: token}})
			return err
		}},
		{"api_base_url", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				APIBaseURL: "https://gitlab.example.com/api/v4?private_token=" + token, Credential: env})
			return err
		}},
		{"api_base_url", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				APIBaseURL: "https://oauth2:" + token + "@gitlab.example.com/api/v4", Credential: env})
			return err
		}},
		{"api_base_url", func() error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				APIBaseURL: token, Credential: env})
			return err
		}},
		{"remote_url", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				RemoteURL: "https://oauth2:" + token + "@gitlab.com/acme/secret.git"})
			return err
		}},
		{"remote_url", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				RemoteURL: "https://" + token + "@gitlab.com/acme/secret.git"})
			return err
		}},
		{"remote_url", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab",
				RemoteURL: "https://gitlab.com/acme/secret.git?token=" + token})
			return err
		}},
		{"remote_url", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "github",
				RemoteURL: "x-access-token:" + token + "@github.com:acme/secret.git"})
			return err
		}},
	}
	for i, c := range cases {
		err := c.call()
		require.Error(t, err, "case %d", i)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "case %d: %v", i, err)
		assert.NotContains(t, err.Error(), token[6:], "case %d echoed the secret", i)
	}
	repos, err := w.svc.ListRepositories(ctx, w.ws.ID)
	require.NoError(t, err)
	assert.Len(t, repos, 2, "nothing was stored")
	ws, err := w.svc.GetWorkspace(ctx, w.ws.ID)
	require.NoError(t, err)
	assert.Empty(t, ws.Connections, "nothing was stored")
}

func TestRepositoryHostAndPathAreChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	bad := []struct {
		field string
		in    service.RepositoryInput
	}{
		{"host", service.RepositoryInput{Provider: "github", Host: "https://github.com", Path: "acme/x"}},
		{"host", service.RepositoryInput{Provider: "github", Host: "github.com/acme", Path: "acme/x"}},
		{"path", service.RepositoryInput{Provider: "github", Host: "github.com", Path: "acme"}},
		{"path", service.RepositoryInput{Provider: "github", Host: "github.com", Path: "acme/x/y"}},
		{"path", service.RepositoryInput{Provider: "gitlab", Host: "gitlab.com", Path: "group/../x"}},
		{"path", service.RepositoryInput{Provider: "gitlab", Host: "gitlab.com", Path: "group/my project"}},
		{"path", service.RepositoryInput{Provider: "gitlab", Host: "gitlab.com", Path: "project"}},
		{"remote_url", service.RepositoryInput{Provider: "github", Host: "github.com", RemoteURL: "https://gitlab.com/acme/x"}},
		{"remote_url", service.RepositoryInput{Provider: "github", RemoteURL: "/src/x"}},
	}
	for i, c := range bad {
		c.in.WorkspaceID = w.ws.ID
		_, err := w.svc.CreateRepository(ctx, c.in)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "case %d: %v", i, err)
	}

	local, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/x", RemoteURL: "/srv/git/x"})
	require.NoError(t, err, "a local source keeps any remote as given")
	assert.Equal(t, "/srv/git/x", local.RemoteURL)
	fromFile, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", RemoteURL: "file:///srv/git/y"})
	require.NoError(t, err)
	assert.Equal(t, "/srv/git/y", fromFile.Path)
	sub, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab", Host: "gitlab.example.com:8443", Path: "a/b/c"})
	require.NoError(t, err)
	assert.Equal(t, "a/b/c", sub.Path)
}

func TestSessionsWithoutAnExecutorBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	_, err := w.svc.LaunchSession(ctx, service.SessionInput{TaskID: "task_nope", Executor: "local"}, nil)
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	_, err = w.svc.LaunchSession(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "docker", Image: "alpine"}, nil)
	assert.ErrorIs(t, err, service.ErrNoExecutor)
	list, err := w.svc.ListSessions(ctx, w.task.ID)
	require.NoError(t, err)
	assert.Empty(t, list, "a refused launch records nothing")
}

// collect watches a task and returns the events received once want
// events arrived or the deadline passed.
func collect(ctx context.Context, t *testing.T, svc *service.Service, taskID string, after uint64, want int) ([]model.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got []model.Event
	errStop := errors.New("enough")
	err := svc.WatchTaskEvents(ctx, taskID, after, func(e model.Event) error {
		got = append(got, e)
		if len(got) == want {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return got, err
}

func TestWatchSendsBacklogThenLiveEventsWithoutGapsOrRepeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)

	// 30 more repositories, attached one batch at a time while a watcher
	// that started after the first event runs.
	var repos []string
	for i := range 30 {
		r, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: fmt.Sprintf("/src/%d", i)})
		require.NoError(t, err)
		repos = append(repos, r.ID)
	}
	var wg sync.WaitGroup
	var got []model.Event
	var watchErr error
	// Per batch: sources.added and providers.recomputed.
	wg.Go(func() { got, watchErr = collect(ctx, t, w.svc, w.task.ID, 0, 61) })
	for _, id := range repos {
		_, err := w.svc.AddSources(ctx, w.task.ID, []string{id})
		require.NoError(t, err)
	}
	wg.Wait()
	require.NoError(t, watchErr)
	require.Len(t, got, 61)
	gen := uint64(0)
	for i, e := range got {
		if i > 0 {
			assert.Greater(t, e.Seq, got[i-1].Seq, "strictly increasing")
		}
		if e.Kind == model.EventProvidersRecomputed || e.Kind == model.EventTaskCreated {
			gen++
			assert.Equal(t, gen, e.Providers.Generation, "every generation exactly once, in order")
		}
	}
	assert.Equal(t, uint64(31), gen)

	// Resuming after a sequence number sends exactly the rest.
	rest, err := collect(ctx, t, w.svc, w.task.ID, got[59].Seq, 1)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, got[60], rest[0])
}

func TestWatchEndsOnShutdownAndUnknownTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	_, err := collect(ctx, t, w.svc, "task_nope", 0, 1)
	assert.ErrorIs(t, err, errdefs.ErrNotFound)

	done := make(chan error, 1)
	go func() { _, err := collect(ctx, t, w.svc, w.task.ID, 0, 99); done <- err }()
	w.svc.Close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, service.ErrShuttingDown)
	case <-time.After(time.Minute):
		t.Fatal("watcher did not end on Close")
	}
}

func TestStopSessionIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, st := newServiceAndStore(t)
	ws, err := svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	task, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: repo.ID})
	require.NoError(t, err)
	sess, err := st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionPending})
	require.NoError(t, err)

	stopped, err := svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err)
	assert.Equal(t, model.SessionStopped, stopped.State)
	again, err := svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err, "stopping a stopped session succeeds")
	assert.Equal(t, stopped, again)

	evs, err := st.Events(ctx, task.ID, 0, 100)
	require.NoError(t, err)
	var ended int
	for _, e := range evs {
		if e.Kind == model.EventSessionEnded {
			ended++
			assert.Equal(t, sess.ID, e.SessionID)
		}
	}
	assert.Equal(t, 1, ended, "one session.ended event, not one per stop")

	_, err = svc.StopSession(ctx, "sess_nope", false)
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestStoppingAFailedSessionRecordsItStopped: a failed session is stopped
// (its executor ends what is left of it) and recorded stopped, with one
// session.ended event; when its backend is off here, it is recorded
// stopped all the same.
func TestStoppingAFailedSessionRecordsItStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, st := newServiceAndStore(t)
	ws, err := svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	task, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: repo.ID})
	require.NoError(t, err)
	sess, err := st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "docker", Mode: model.ModeTask,
		State: model.SessionFailed, Handle: model.Handle{Version: 1, State: []byte(`{"container_id":"gone"}`)}})
	require.NoError(t, err)

	stopped, err := svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err)
	assert.Equal(t, model.SessionStopped, stopped.State)
	again, err := svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err)
	assert.Equal(t, stopped, again)
	evs, err := st.Events(ctx, task.ID, 0, 100)
	require.NoError(t, err)
	var ended []string
	for _, e := range evs {
		if e.Kind == model.EventSessionEnded {
			ended = append(ended, e.Message)
		}
	}
	assert.Equal(t, []string{"stopped after it failed"}, ended)
}

// TestConnectValidatesAndRecordsTheUsername asks a (fake) GitHub who the
// token belongs to; a missing variable or a rejected token is refused with
// a message naming the reference, never the value.
func TestConnectValidatesAndRecordsTheUsername(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const token = "ghp_validatetoken0123456789"
	fake := forgetest.NewGitHub(t, token, "octo-bot")
	env := map[string]string{"GH_TOKEN": token, "WRONG_TOKEN": "ghp_wrong"}
	broker := &events.Broker{}
	st, err := store.Open(ctx, t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{Connections: connections.New(st, connections.Options{Credentials: credentials.Resolver{Env: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}})})
	ws, err := svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	in := func(ref string) service.ConnectionInput {
		return service.ConnectionInput{WorkspaceID: ws.ID, Provider: "github", APIBaseURL: fake.URL,
			Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: ref}}
	}

	c, err := svc.SetConnection(ctx, in("GH_TOKEN"))
	require.NoError(t, err)
	assert.Equal(t, "octo-bot", c.Username)
	assert.False(t, c.ValidatedAt.IsZero())
	got, err := svc.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, "octo-bot", got.Connections[0].Username, "the username is persisted")

	_, err = svc.SetConnection(ctx, in("UNSET_TOKEN"))
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "UNSET_TOKEN")
	_, err = svc.SetConnection(ctx, in("WRONG_TOKEN"))
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "rejected")
	assert.NotContains(t, err.Error(), "ghp_wrong")
	got, err = svc.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, "octo-bot", got.Connections[0].Username, "a failed validation changes nothing")
}
