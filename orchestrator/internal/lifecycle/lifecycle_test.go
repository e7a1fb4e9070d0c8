package lifecycle_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/lifecycle"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

const token = "glpat-LIFECYCLETOKEN"

type world struct {
	st      *store.Store
	dir     string
	poller  *lifecycle.Poller
	gl      *forgetest.GitLab
	gh      *forgetest.GitHub
	ws      model.Workspace
	task    model.Task
	repo    model.Repository
	mu      sync.Mutex
	prompts []model.Prompt
}

// newWorld: a task with a merge request (GitLab) or pull request (GitHub)
// number 1, the workspace connected as username.
func newWorld(t testing.TB, provider providers.Provider, username string) *world {
	t.Helper()
	return newWorldOn(t, provider, username, store.Options{})
}

// newWorldOn is newWorld on the database opts name (SQLite in a new
// directory without a DatabaseURL).
func newWorldOn(t testing.TB, provider providers.Provider, username string, opts store.Options) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{dir: t.TempDir()}
	var err error
	w.st, err = store.Open(ctx, w.dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.st.Close() })
	w.ws, err = w.st.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	var baseURL, path string
	switch provider {
	case providers.GitLab:
		w.gl = forgetest.NewGitLab(t, token, "gl-bot")
		w.gl.AddProject("acme/web", "main", "fix")
		baseURL, path = w.gl.URL, "acme/web"
	case providers.GitHub:
		w.gh = forgetest.NewGitHub(t, token, "octo-bot")
		w.gh.AddRepo("acme/api", "main", "fix")
		baseURL, path = w.gh.URL, "acme/api"
	}
	_, err = w.st.SetConnection(ctx, w.ws.ID, model.Connection{Provider: provider, APIBaseURL: baseURL, Username: username,
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "TOKEN"}})
	require.NoError(t, err)
	w.repo, err = w.st.CreateRepository(ctx, model.Repository{WorkspaceID: w.ws.ID, Provider: string(provider), Host: "example.com", Path: path})
	require.NoError(t, err)
	w.task, err = w.st.CreateTask(ctx, model.Task{WorkspaceID: w.ws.ID, Title: "t"}, w.repo.ID)
	require.NoError(t, err)
	client, err := forge.New(provider, baseURL, token, nil)
	require.NoError(t, err)
	ch, err := client.Create(ctx, forge.Repo{Path: path}, forge.CreateInput{Branch: "fix", Base: "main", Title: "Fix"})
	require.NoError(t, err)
	_, err = w.st.RecordChangeRequest(ctx, model.ChangeRequest{TaskID: w.task.ID, RepositoryID: w.repo.ID, Provider: provider,
		Number: ch.Number, URL: ch.URL, Title: ch.Title, SourceBranch: "fix", TargetBranch: "main", Automation: model.DefaultAutomation})
	require.NoError(t, err)
	w.poller = lifecycle.New(lifecycle.Options{
		Store:       w.st,
		Connections: connections.New(w.st, connections.Options{Credentials: credentials.Resolver{Env: func(string) (string, bool) { return token, true }}}),
		Deliver: func(_ context.Context, p model.Prompt) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.prompts = append(w.prompts, p)
		},
	})
	return w
}

func (w *world) requests() []string {
	if w.gl != nil {
		return w.gl.Requests()
	}
	return w.gh.Requests()
}

// cycle runs one poll and returns the provider requests it made.
func (w *world) cycle(t testing.TB) []string {
	t.Helper()
	before := len(w.requests())
	require.NoError(t, w.poller.Cycle(context.Background()))
	return w.requests()[before:]
}

func (w *world) delivered() []model.Prompt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]model.Prompt(nil), w.prompts...)
}

func (w *world) events(t *testing.T, kind model.EventKind) []model.Event {
	t.Helper()
	all, err := w.st.Events(context.Background(), w.task.ID, 0, 1000)
	require.NoError(t, err)
	var out []model.Event
	for _, e := range all {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

const mrStatus = "GET /api/v4/projects/acme%2Fweb/merge_requests/1"

func TestNormalPathIsOneStatusCallPerCycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitLab, "gl-bot")
	for range 3 {
		assert.Equal(t, []string{mrStatus}, w.cycle(t), "one status call, nothing for the evaluation")
	}
	assert.Empty(t, w.delivered())
}

// TestReviewRequestedPromptsExactlyOnce: the reviewers come to include the
// workspace's user (in another case): one prompt, with one call per cycle,
// however many polls see the same state.
func TestReviewRequestedPromptsExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitLab, "GL-Bot")
	id := w.gl.UserID("gl-bot")
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = []int64{id} })
	for range 3 {
		assert.Equal(t, []string{mrStatus}, w.cycle(t))
	}
	prompts := w.delivered()
	require.Len(t, prompts, 1)
	assert.Contains(t, prompts[0].Text, "review of merge request #1 was requested from GL-Bot")
	assert.Contains(t, prompts[0].Link, "/merge_requests/1")
	assert.Len(t, w.events(t, model.EventPrompted), 1)
	taken, err := w.st.TakePrompts(context.Background(), w.task.ID)
	require.NoError(t, err)
	assert.Len(t, taken, 1, "the prompt waits in the inbox too")

	// Removed, then requested again: a new transition.
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = nil })
	w.cycle(t)
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = []int64{id} })
	w.cycle(t)
	assert.Len(t, w.delivered(), 2)
}

func TestAnUpdateWithoutObservationFallsBackToOneReviewersCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitLab, "gl-bot")
	w.gl.OmitReviewers = true
	id := w.gl.UserID("gl-bot")
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = []int64{id} })
	assert.Equal(t, []string{mrStatus, mrStatus + "/reviewers"}, w.cycle(t), "the strict fallback: one targeted call")
	assert.Len(t, w.delivered(), 1)
}

func TestAMissingUsernameActsOnNothingAndSaysWhy(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitLab, "")
	id := w.gl.UserID("gl-bot")
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = []int64{id} })
	w.cycle(t)
	w.cycle(t)
	assert.Empty(t, w.delivered(), "fail closed")
	skipped := w.events(t, model.EventLifecycleSkipped)
	require.Len(t, skipped, 1, "said once, not every cycle")
	assert.Contains(t, skipped[0].Message, "username is unknown")
}

// TestARenamedAccountIsRebound: after a review request was prompted the
// account is renamed; its new name is in the reviewers and in the
// connection: the checkpoint follows, nothing fires twice.
func TestARenamedAccountIsRebound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, providers.GitLab, "gl-bot")
	id := w.gl.UserID("gl-bot")
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Reviewers = []int64{id} })
	w.cycle(t)
	require.Len(t, w.delivered(), 1)

	w.gl.RenameUser("gl-bot", "gl-robot")
	ws, err := w.st.GetWorkspace(ctx, w.ws.ID)
	require.NoError(t, err)
	conn := ws.Connections[0]
	conn.Username = "gl-robot"
	_, err = w.st.SetConnection(ctx, w.ws.ID, conn)
	require.NoError(t, err)
	w.cycle(t)
	w.cycle(t)
	assert.Len(t, w.delivered(), 1, "nothing fires twice")
	_, cp, err := w.st.Evaluation(ctx, w.task.ID, w.repo.ID)
	require.NoError(t, err)
	assert.Equal(t, "gl-robot", cp.ReviewRequestedUser, "the checkpoint is rebound")
}

func TestFailedChecksAutoMergeAndMergeActOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, providers.GitLab, "gl-bot")
	_, err := w.st.UpdateAutomation(ctx, w.task.ID, w.repo.ID, func(a *model.Automation) { a.AutoFixChecks, a.AutoMerge = true, true })
	require.NoError(t, err)

	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Pipeline, mr.MergeStatus = "failed", "ci_must_pass" })
	w.cycle(t)
	w.cycle(t)
	require.Len(t, w.delivered(), 1)
	assert.Contains(t, w.delivered()[0].Text, "Checks failed")

	// Fixed, green and approved: merged automatically, once.
	w.gl.Update("acme/web", 1, func(mr *forgetest.GitLabMR) { mr.Pipeline, mr.MergeStatus, mr.SHA = "success", "mergeable", "beef" })
	assert.Equal(t, []string{mrStatus, "PUT /api/v4/projects/acme%2Fweb/merge_requests/1/merge"}, w.cycle(t))
	assert.Len(t, w.events(t, model.EventAutoMerged), 1)
	// The next poll sees it merged: one prompt, then nothing more is polled.
	w.cycle(t)
	assert.Len(t, w.delivered(), 2)
	assert.Contains(t, w.delivered()[1].Text, "was merged")
	assert.Empty(t, w.cycle(t), "a merged request is no longer polled")
}

func TestGitHubPullRequestsFollowTheSameStructure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitHub, "octo-bot")
	const prStatus = "GET /repos/acme/api/pulls/1"
	assert.Equal(t, []string{prStatus}, w.cycle(t))
	w.gh.Update("acme/api", 1, func(p *forgetest.GitHubPull) { p.Requested = []string{"Octo-Bot"} })
	assert.Equal(t, []string{prStatus}, w.cycle(t))
	assert.Equal(t, []string{prStatus}, w.cycle(t))
	require.Len(t, w.delivered(), 1)
	assert.Contains(t, w.delivered()[0].Text, "pull request #1")

	w.gh.Update("acme/api", 1, func(p *forgetest.GitHubPull) { p.State = "closed" })
	w.cycle(t)
	assert.Len(t, w.delivered(), 2)
	assert.Contains(t, w.delivered()[1].Text, "closed without being merged")
}

// TestTheChangeRequestTableHoldsNoObservations pins the schema of the
// table behind TaskPR/TaskMR: reviewer observations are carried on
// updates, never stored there.
func TestTheChangeRequestTableHoldsNoObservations(t *testing.T) {
	t.Parallel()
	w := newWorld(t, providers.GitLab, "gl-bot")
	db, err := sql.Open("sqlite", filepath.Join(w.dir, store.FileName)+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('task_change_requests') ORDER BY cid`)
	require.NoError(t, err)
	var columns []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		columns = append(columns, name)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"task_id", "repository_id", "provider", "number", "url", "title", "source_branch", "target_branch",
		"auto_merge", "prompt_review_requested", "prompt_merged", "prompt_closed", "auto_fix_checks", "created_at", "updated_at"}, columns)
	for _, c := range columns {
		assert.False(t, strings.Contains(c, "reviewer"), "column %s", c)
	}
}
