package toolcalls

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

const (
	githubToken = "ghp_THISISTHEGITHUBSECRET0123456789"
	gitlabToken = "glpat-THISISTHEGITLABSECRET01234"
)

type fixture struct {
	d              *Dispatcher
	st             *store.Store
	dir            string
	logs           *testutil.SyncBuffer
	gh             *forgetest.GitHub
	gl             *forgetest.GitLab
	ws             model.Workspace
	task           model.Task
	session        model.Session
	github, gitlab model.Repository
	env            map[string]string
	results        []Result // every result, for the leak check
}

// newFixture: a workspace connected to a fake GitHub and a fake GitLab, a
// task on a GitHub repository with a GitLab one attached, a running session.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{dir: t.TempDir(), logs: &testutil.SyncBuffer{},
		env: map[string]string{"GH_TOKEN": githubToken, "GL_TOKEN": gitlabToken}}
	var err error
	f.st, err = store.Open(ctx, f.dir, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.st.Close() })
	f.d = New(f.st, slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.d.conns = f.connections(nil)

	f.gh = forgetest.NewGitHub(t, githubToken, "octo-bot")
	f.gh.AddRepo("acme/api", "main", "fix-login")
	f.gl = forgetest.NewGitLab(t, gitlabToken, "gl-bot")
	f.gl.AddProject("acme/web", "main", "fix-login")
	f.gl.AddUser("erin")

	f.ws, err = f.st.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	for _, c := range []model.Connection{
		{Provider: providers.GitHub, APIBaseURL: f.gh.URL, Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}, Username: "octo-bot"},
		{Provider: providers.GitLab, APIBaseURL: f.gl.URL, Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GL_TOKEN"}, Username: "gl-bot"},
	} {
		_, err = f.st.SetConnection(ctx, f.ws.ID, c)
		require.NoError(t, err)
	}
	f.github, err = f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	f.gitlab, err = f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"})
	require.NoError(t, err)
	f.task, err = f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "fix login"}, f.github.ID)
	require.NoError(t, err)
	f.task, err = f.st.AddSources(ctx, f.task.ID, []string{f.gitlab.ID}, testActor)
	require.NoError(t, err)
	f.session, err = f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude"}})
	require.NoError(t, err)
	t.Cleanup(func() { f.assertNoTokenLeaked(t) })
	return f
}

// connections is a connections component reading the fixture's
// environment, recording what it resolves in secrets (nil: a set of its
// own).
func (f *fixture) connections(secrets *scrub.Set) *connections.Connections {
	return connections.New(f.st, connections.Options{Credentials: credentials.Resolver{Secrets: secrets,
		Env: func(k string) (string, bool) { v, ok := f.env[k]; return v, ok }}})
}

func (f *fixture) call(tool string, args any) Result {
	b, _ := json.Marshal(args)
	return f.callAs(f.session.ID, f.task.ID, tool, b)
}

func (f *fixture) callAs(session, task, tool string, args json.RawMessage) Result {
	r := f.d.Handle(context.Background(), Call{SessionID: session, TaskID: task, Tool: tool, Arguments: args, OnLink: true})
	f.results = append(f.results, r)
	return r
}

// callOffLink is a call that claims session but came on the agentctl link
// of linkSessions.
func (f *fixture) callOffLink(session, task, tool string, args json.RawMessage, linkSessions ...string) Result {
	r := f.d.Handle(context.Background(), Call{SessionID: session, TaskID: task, Tool: tool, Arguments: args, LinkSessions: linkSessions})
	f.results = append(f.results, r)
	return r
}

// assertNoTokenLeaked: no token appears in any result or log line.
func (f *fixture) assertNoTokenLeaked(t testing.TB) {
	everything := f.logs.String()
	for _, r := range f.results {
		b, _ := json.Marshal(r.Structured)
		everything += r.Code + r.Text + string(b)
	}
	for _, secret := range []string{githubToken, gitlabToken, "THISISTHE"} {
		assert.NotContains(t, everything, secret, "a token leaked into a result or a log line")
	}
}

func structured[T any](t *testing.T, r Result) T {
	t.Helper()
	require.False(t, r.IsError, "%s: %s", r.Code, r.Text)
	v, ok := r.Structured.(T)
	require.True(t, ok, "structured result is %T", r.Structured)
	return v
}

// TestRefusalsNeverReachTheProvider: each check has its code, and a refused
// call makes no HTTP request, whatever the agent was shown.
func TestRefusalsNeverReachTheProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	// A second task, in the same workspace, on its own repository.
	other, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "github.com", Path: "acme/other"})
	require.NoError(t, err)
	_, err = f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "other"}, other.ID)
	require.NoError(t, err)
	// A github-only task and its session.
	ghOnly, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "github only"}, f.github.ID)
	require.NoError(t, err)
	ghSession, err := f.st.CreateSession(ctx, model.Session{TaskID: ghOnly.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionRunning})
	require.NoError(t, err)

	cases := []struct {
		name string
		res  Result
		code string
	}{
		{"unknown session", f.callAs("sess_nope", f.task.ID, toolapi.GitHubPRStatus, nil), toolapi.CodeUnknownSession},
		{"session claims another task", f.callAs(f.session.ID, ghOnly.ID, toolapi.GitHubPRStatus, nil), toolapi.CodePermissionDenied},
		{"github-only task calls a gitlab tool", f.callAs(ghSession.ID, ghOnly.ID, toolapi.GitLabMRCreate,
			json.RawMessage(`{"branch":"fix-login","title":"x"}`)), toolapi.CodeProviderNotAttached},
		{"repository of another task", f.call(toolapi.GitHubPRCreate, map[string]any{"repository_id": other.ID, "branch": "fix-login", "title": "x"}),
			toolapi.CodeRepositoryNotAttached},
		{"repository of the other provider", f.call(toolapi.GitHubPRCreate, map[string]any{"repository_id": f.gitlab.ID, "branch": "fix-login", "title": "x"}),
			toolapi.CodeProviderMismatch},
		{"unknown argument", f.call(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "x", "task_id": "task_other"}),
			toolapi.CodeInvalidArguments},
		{"missing title", f.call(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login"}), toolapi.CodeInvalidArguments},
		{"no pull request yet", f.call(toolapi.GitHubPRStatus, nil), toolapi.CodeNoChangeRequest},
		{"unknown tool", f.call("github_pr_merge_everything", nil), toolapi.CodeUnknownTool},
	}
	for _, c := range cases {
		assert.True(t, c.res.IsError, c.name)
		assert.Equal(t, c.code, c.res.Code, "%s: %s", c.name, c.res.Text)
	}

	// The repository's provider changed after launch: judged now.
	db, err := sql.Open("sqlite", filepath.Join(f.dir, store.FileName))
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE repositories SET provider = 'bitbucket' WHERE id = ?`, f.gitlab.ID)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	res := f.call(toolapi.GitLabMRCreate, map[string]any{"repository_id": f.gitlab.ID, "branch": "fix-login", "title": "x"})
	assert.Equal(t, toolapi.CodeProviderMismatch, res.Code, res.Text)

	// Missing credential: named, not shown.
	delete(f.env, "GH_TOKEN")
	res = f.call(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "x"})
	assert.Equal(t, toolapi.CodeCredentialUnavailable, res.Code)
	assert.Contains(t, res.Text, "GH_TOKEN")

	assert.Empty(t, f.gh.Requests(), "no refused call reached GitHub")
	assert.Empty(t, f.gl.Requests(), "no refused call reached GitLab")
}

// TestPullAndMergeRequests drives every provider tool on both providers.
func TestPullAndMergeRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, p := range []struct {
		name     string
		group    toolapi.Group
		reviewer string
		provider string
	}{
		{"github", toolapi.GroupGitHub, "carol", "github"},
		{"gitlab", toolapi.GroupGitLab, "erin", "gitlab"},
	} {
		t.Run(p.name, func(t *testing.T) {
			created := structured[toolapi.ChangeRequest](t, f.call(p.group.Like(toolapi.GitHubPRCreate), map[string]any{"branch": "fix-login", "title": "Fix login", "draft": true}))
			assert.Equal(t, int64(1), created.Number)
			assert.Equal(t, "main", created.TargetBranch)
			assert.Equal(t, p.provider, created.Provider)
			again := f.call(p.group.Like(toolapi.GitHubPRCreate), map[string]any{"branch": "fix-login", "title": "Fix login"})
			assert.Equal(t, toolapi.CodeAlreadyExists, again.Code, "one change request per task and repository")

			var thread string
			if p.provider == "github" {
				f.gh.Update("acme/api", 1, func(pr *forgetest.GitHubPull) {
					pr.Checks = [][3]string{{"build", "completed", "success"}}
					pr.Reviews = [][2]string{{"alice", "APPROVED"}}
				})
				thread = strconv.FormatInt(f.gh.AddComment("acme/api", 1, "alice", "nit", "login.go", 3), 10)
			} else {
				f.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Pipeline, mr.ApprovedBy = "success", []string{"frank"} })
				thread = f.gl.AddDiscussion("acme/web", 1, "frank", "nit", "login.go", 3)
			}
			st := structured[toolapi.ChangeStatus](t, f.call(p.group.Like(toolapi.GitHubPRStatus), nil))
			assert.Equal(t, "passing", st.Checks)
			assert.True(t, st.Approved)
			assert.Equal(t, 1, st.UnresolvedThreads)

			comments := structured[toolapi.Comments](t, f.call(p.group.Like(toolapi.GitHubPRComments), map[string]any{}))
			require.Len(t, comments.Comments, 1)
			assert.Equal(t, thread, comments.Comments[0].ThreadID)
			replied := structured[toolapi.Comment](t, f.call(p.group.Like(toolapi.GitHubPRReply), map[string]any{"thread_id": thread, "body": "fixed"}))
			assert.Equal(t, thread, replied.ThreadID)

			reviewers := structured[toolapi.ReviewersResult](t, f.call(p.group.Like(toolapi.GitHubPRRequestReviewers), map[string]any{"reviewers": []string{p.reviewer}}))
			assert.Equal(t, []string{p.reviewer}, reviewers.RequestedReviewers)

			auto := structured[toolapi.AutomationResult](t, f.call(p.group.Like(toolapi.GitHubPRAutomation), nil))
			assert.Equal(t, toolapi.Automation{PromptOnReviewRequested: true, PromptOnMerged: true, PromptOnClosed: true}, auto.Automation)
			auto = structured[toolapi.AutomationResult](t, f.call(p.group.Like(toolapi.GitHubPRSetAutomation), map[string]any{"auto_merge": true, "prompt_on_closed": false}))
			assert.Equal(t, toolapi.Automation{AutoMerge: true, PromptOnReviewRequested: true, PromptOnMerged: true}, auto.Automation)
			assert.Equal(t, int64(1), auto.ChangeRequest.Number)
		})
	}
	assert.NotEmpty(t, f.gh.Requests())
	assert.NotEmpty(t, f.gl.Requests())
}

// TestRateLimitIsRespected: after a 429 the connection is left alone until
// the retry-after passes; the agent is told when to retry.
func TestRateLimitIsRespected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	structured[toolapi.ChangeRequest](t, f.call(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "Fix"}))
	f.gh.FailNext("GET", "/pulls/1", 429, 30)
	res := f.call(toolapi.GitHubPRStatus, nil)
	assert.Equal(t, "rate_limited", res.Code)
	assert.Contains(t, res.Text, "retry after 30s")
	before := len(f.gh.Requests())
	res = f.call(toolapi.GitHubPRComments, nil)
	assert.Equal(t, "rate_limited", res.Code)
	assert.Len(t, f.gh.Requests(), before, "a rate-limited connection is not called again")
	// The other provider is unaffected.
	structured[toolapi.ChangeRequest](t, f.call(toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix"}))
}

// TestProviderErrorsAreToolErrors: 401, 404, 5xx reach the agent as codes
// with actionable messages.
func TestProviderErrorsAreToolErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	structured[toolapi.ChangeRequest](t, f.call(toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix"}))
	f.gl.FailNext("GET", "/merge_requests/1", 503, 0)
	res := f.call(toolapi.GitLabMRStatus, nil)
	assert.Equal(t, "provider_unavailable", res.Code)
	f.env["GL_TOKEN"] = "glpat-REVOKEDTOKEN"
	res = f.call(toolapi.GitLabMRStatus, nil)
	assert.Equal(t, "provider_unauthorized", res.Code)
	assert.Contains(t, res.Text, "renew")
	assert.NotContains(t, res.Text, "REVOKED")
	res = f.call(toolapi.GitHubPRCreate, map[string]any{"branch": "no-such-branch", "title": "x"})
	assert.Equal(t, "provider_invalid", res.Code)
}

func TestTaskAndSessionInfo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	info := structured[toolapi.TaskInfo](t, f.call("task_info", nil))
	assert.Equal(t, f.task.ID, info.TaskID)
	assert.Equal(t, []string{"github", "gitlab"}, info.Providers)
	require.Len(t, info.Repositories, 2)
	assert.True(t, info.Repositories[0].Primary)

	si := structured[toolapi.SessionInfo](t, f.call("session_info", nil))
	assert.Equal(t, "claude", si.Agent)
	assert.Equal(t, []toolapi.Account{{Provider: "github", Username: "octo-bot"}, {Provider: "gitlab", Username: "gl-bot"}}, si.Accounts)
	b, err := json.Marshal(si)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "GH_TOKEN", "not even the reference")

	_, err = f.st.UpdateSession(context.Background(), f.session.ID, func(s *model.Session) ([]model.Event, error) {
		s.State = model.SessionStopped
		return nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, toolapi.CodeSessionEnded, f.call("task_info", nil).Code)
}

// testActor makes the tests' changes.
var testActor = model.Actor{Kind: model.ActorPerson, Name: "test"}
