package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/lifecycle"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/toolcalls"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

const token = "ghp_THECONNECTIONSTESTSECRET0123456"

// world: a workspace connected to a stand-in GitHub (its credential in
// the variable GH_TOKEN of env), a task on a repository with an open pull
// request #1, a running session, and a dispatcher and a lifecycle poller
// sharing one connections component.
type world struct {
	st      *store.Store
	gh      *forgetest.GitHub
	ws      model.Workspace
	task    model.Task
	session model.Session
	conns   *connections.Connections
	d       *toolcalls.Dispatcher
	poller  *lifecycle.Poller

	mu  sync.Mutex
	env map[string]string
}

func newWorld(t *testing.T, limits forge.LimiterOptions) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{env: map[string]string{"GH_TOKEN": token}}
	var err error
	w.st, err = store.Open(ctx, t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.st.Close() })
	w.gh = forgetest.NewGitHub(t, token, "octo-bot")
	w.gh.AddRepo("acme/api", "main", "fix")
	w.ws, err = w.st.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	_, err = w.st.SetConnection(ctx, w.ws.ID, model.Connection{Provider: providers.GitHub, APIBaseURL: w.gh.URL, Username: "octo-bot",
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}})
	require.NoError(t, err)
	repo, err := w.st.CreateRepository(ctx, model.Repository{WorkspaceID: w.ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	w.task, err = w.st.CreateTask(ctx, model.Task{WorkspaceID: w.ws.ID, Title: "t"}, repo.ID)
	require.NoError(t, err)
	w.session, err = w.st.CreateSession(ctx, model.Session{TaskID: w.task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude"}})
	require.NoError(t, err)
	client, err := forge.New(providers.GitHub, w.gh.URL, token, nil)
	require.NoError(t, err)
	ch, err := client.Create(ctx, forge.Repo{Path: "acme/api"}, forge.CreateInput{Branch: "fix", Base: "main", Title: "Fix"})
	require.NoError(t, err)
	_, err = w.st.RecordChangeRequest(ctx, model.ChangeRequest{TaskID: w.task.ID, RepositoryID: repo.ID, Provider: providers.GitHub,
		Number: ch.Number, URL: ch.URL, Title: ch.Title, SourceBranch: "fix", TargetBranch: "main", Automation: model.DefaultAutomation})
	require.NoError(t, err)

	w.conns = connections.New(w.st, connections.Options{Limits: limits, Credentials: credentials.Resolver{Secrets: &scrub.Set{},
		Env: func(k string) (string, bool) {
			w.mu.Lock()
			defer w.mu.Unlock()
			v, ok := w.env[k]
			return v, ok
		}}})
	w.d = toolcalls.New(w.st, nil)
	w.d.SetConnections(w.conns)
	w.poller = lifecycle.New(lifecycle.Options{Store: w.st, Connections: w.conns})
	return w
}

func (w *world) setEnv(k, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.env[k] = v
}

// status is an agent's github_pr_status call.
func (w *world) status() toolcalls.Result {
	return w.d.Handle(context.Background(), toolcalls.Call{SessionID: w.session.ID, TaskID: w.task.ID,
		Tool: "github_pr_status", Arguments: json.RawMessage(`{}`), OnLink: true})
}

// cycle runs one poll and returns the provider requests it made.
func (w *world) cycle(t *testing.T) []string {
	t.Helper()
	before := len(w.gh.Requests())
	require.NoError(t, w.poller.Cycle(context.Background()))
	return w.gh.Requests()[before:]
}

const pullGet = "GET /repos/acme/api/pulls/1"

// TestPollerRateLimitPausesToolCalls: a 429 the poller meets pauses the
// agents' calls on the same connection: they are refused rate_limited
// with the provider's retry-after, and reach no provider.
func TestPollerRateLimitPausesToolCalls(t *testing.T) {
	t.Parallel()
	w := newWorld(t, forge.LimiterOptions{})
	require.False(t, w.status().IsError, "control: the agents' calls reach the provider before")
	w.gh.FailNext("GET", "/pulls/1", 429, 60)
	assert.Equal(t, []string{pullGet}, w.cycle(t), "the poller met the 429")

	before := w.gh.Requests()
	r := w.status()
	assert.True(t, r.IsError)
	assert.Equal(t, forge.CodeRateLimited, r.Code, r.Text)
	assert.Contains(t, r.Text, "github asked toolscope to wait; retry after 1m0s")
	assert.Equal(t, before, w.gh.Requests(), "the agent's call reached no provider")
}

// TestToolCallRateLimitPausesThePoller: the reverse: a 429 an agent's
// call meets leaves the connection alone in the poller's next cycle.
func TestToolCallRateLimitPausesThePoller(t *testing.T) {
	t.Parallel()
	w := newWorld(t, forge.LimiterOptions{})
	assert.Equal(t, []string{pullGet}, w.cycle(t), "control: the poller reaches the provider before")
	w.gh.FailNext("GET", "/pulls/1", 429, 60)
	r := w.status()
	require.True(t, r.IsError)
	require.Equal(t, forge.CodeRateLimited, r.Code, r.Text)

	assert.Empty(t, w.cycle(t), "the poller made no request on the rate-limited connection")
}

// TestCallsInFlightAreBoundedAcrossCallers: the bound on calls in flight
// is the connection's, not each caller's: with one place and no queue,
// an agent's call held at the provider leaves the poller none, and the
// poller's cycle makes no request.
func TestCallsInFlightAreBoundedAcrossCallers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, forge.LimiterOptions{MaxConcurrent: 1, MaxQueued: 0})
	release := w.gh.Hold()
	defer release()
	done := make(chan toolcalls.Result, 1)
	go func() { done <- w.status() }()
	require.Eventually(t, func() bool { now, _ := w.gh.InFlight(); return now == 1 }, time.Minute, 5*time.Millisecond,
		"the agent's call is at the provider")
	require.NoError(t, w.poller.Cycle(context.Background()))
	now, peak := w.gh.InFlight()
	assert.Equal(t, 1, now, "the poller added no request while the agent's call holds the place")
	assert.Equal(t, 1, peak)
	release()
	r := <-done
	assert.False(t, r.IsError, "%s: %s", r.Code, r.Text)
	assert.Equal(t, []string{pullGet}, w.cycle(t), "with the place free the poller polls again")
}

// TestValidationSharesTheGate: the connection validation of 'workspace
// connect' goes through the same component: a 429 it meets pauses the
// agents' calls, and a validation while the connection is rate limited
// fails Unavailable without a request.
func TestValidationSharesTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, forge.LimiterOptions{})
	svc := service.New(w.st, &events.Broker{}, service.Options{Connections: w.conns})
	in := service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github", APIBaseURL: w.gh.URL,
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}}
	conn, err := svc.SetConnection(ctx, in)
	require.NoError(t, err, "control: the validation reaches the provider")
	assert.Equal(t, "octo-bot", conn.Username)

	w.gh.FailNext("GET", "/user", 429, 60)
	_, err = svc.SetConnection(ctx, in)
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	before := w.gh.Requests()
	r := w.status()
	assert.Equal(t, forge.CodeRateLimited, r.Code, r.Text)
	_, err = svc.SetConnection(ctx, in)
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), "github asked toolscope to wait")
	assert.Equal(t, before, w.gh.Requests(), "neither the agent's call nor the second validation reached the provider")
}

// TestCredentialIsResolvedAtCallTime: the credential is read at each use,
// so a rotated secret takes effect on the next call of every caller,
// without a restart.
func TestCredentialIsResolvedAtCallTime(t *testing.T) {
	t.Parallel()
	w := newWorld(t, forge.LimiterOptions{})
	w.setEnv("GH_TOKEN", "ghp_THEOLDREVOKEDSECRET00000000000000")
	r := w.status()
	require.True(t, r.IsError)
	assert.Equal(t, forge.CodeUnauthorized, r.Code, r.Text)

	w.setEnv("GH_TOKEN", token)
	r = w.status()
	assert.False(t, r.IsError, "the rotated credential is used by the next call: %s: %s", r.Code, r.Text)
	assert.Equal(t, []string{pullGet}, w.cycle(t), "and by the poller")

	w.setEnv("GH_TOKEN", "")
	lease, err := w.conns.Open(context.Background(), w.ws.ID, model.Connection{Provider: providers.GitHub, APIBaseURL: w.gh.URL,
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}})
	assert.Nil(t, lease)
	var ce *connections.CredentialError
	require.ErrorAs(t, err, &ce)
	assert.True(t, errors.Is(err, errdefs.ErrFailedPrecondition))
	assert.Equal(t, "the workspace's github credential is not available to the orchestrator "+
		"(environment variable GH_TOKEN is not set in the orchestrator's environment)", err.Error())
}

// TestLookup: a workspace's connection by provider, or ErrNotConnected.
func TestLookup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, forge.LimiterOptions{})
	conn, err := w.conns.Lookup(context.Background(), w.ws.ID, providers.GitHub)
	require.NoError(t, err)
	assert.Equal(t, w.gh.URL, conn.APIBaseURL)
	_, err = w.conns.Lookup(context.Background(), w.ws.ID, providers.GitLab)
	assert.ErrorIs(t, err, connections.ErrNotConnected)
	_, err = w.conns.Lookup(context.Background(), "ws_missing", providers.GitHub)
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}
