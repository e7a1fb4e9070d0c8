package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/console"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestEveryActionNeedsTheRoleOfItsRPC: each console action performs an
// RPC of access.Table, so the console states no role of its own.
func TestEveryActionNeedsTheRoleOfItsRPC(t *testing.T) {
	t.Parallel()
	for action, rpc := range console.RPCs {
		role, ok := access.Table[rpc]
		require.True(t, ok, "%s performs %s, which is not in access.Table", action, rpc)
		assert.Equal(t, role, console.Needs(action), "%s", action)
	}
	assert.Equal(t, model.RoleMember, console.Needs(console.StopSession))
	assert.Equal(t, model.RoleViewer, console.Needs(console.ViewSession))
	assert.Equal(t, model.RoleAdmin, console.Needs(console.EnableTool))
	assert.Equal(t, model.RoleAdmin, console.Needs("no-such-action"), "an unknown action needs the most")
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// consoleOn serves a console over a real store and service (no
// executors) on an httptest server.
func consoleOn(t *testing.T, opts console.Options) (*httptest.Server, *service.Service, *console.Console) {
	t.Helper()
	srv, svc, c, _ := consoleOver(t, opts, service.Options{})
	return srv, svc, c
}

// consoleOver is consoleOn with the service's options (its executors),
// and the store, for records no executor here would make.
func consoleOver(t *testing.T, opts console.Options, svcOpts service.Options) (*httptest.Server, *service.Service, *console.Console, *store.Store) {
	t.Helper()
	ctx := context.Background()
	broker := &events.Broker{}
	st, err := store.Open(ctx, t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, svcOpts)
	t.Cleanup(svc.Close)
	opts.Service, opts.Auth = svc, &access.Authenticator{Credentials: st, Now: opts.Now}
	c, err := console.New(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, svc, c, st
}

func token(t *testing.T, svc *service.Service, name string, role model.Role) string {
	t.Helper()
	_, secret, err := svc.CreateAPIToken(context.Background(), name, role, 24*time.Hour)
	require.NoError(t, err)
	return secret
}

// browserLike is an HTTP client with a cookie jar that does not follow
// redirects, so each answer can be checked.
func browserLike(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func logIn(t *testing.T, c *http.Client, base, tok string) *http.Response {
	t.Helper()
	resp, err := c.PostForm(base+"/login", url.Values{"token": {tok}})
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func get(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// TestLoginCookieAndBounds: the cookie is HttpOnly and SameSite=Strict; a
// login idle longer than SessionTTL ends; beyond MaxSessions a token's
// new login ends its own least recently used one; a revoked token ends
// its login at once.
func TestLoginCookieAndBounds(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	srv, svc, c := consoleOn(t, console.Options{SessionTTL: time.Hour, MaxSessions: 2, Now: clk.Now})
	tok := token(t, svc, "alice", model.RoleMember)

	first := browserLike(t)
	resp := logIn(t, first, srv.URL, tok)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	set := resp.Header.Get("Set-Cookie")
	assert.Contains(t, set, "HttpOnly")
	assert.Contains(t, set, "SameSite=Strict")
	assert.NotContains(t, set, tok[5:17], "the cookie is not the token")
	assert.Equal(t, http.StatusOK, get(t, first, srv.URL+"/sessions").StatusCode)

	// Idle past the TTL: back to the login page.
	clk.Add(time.Hour + time.Second)
	resp = get(t, first, srv.URL+"/sessions")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login"))

	// Three logins of one token, room for two: its least recently used
	// one ends.
	a, b, d := browserLike(t), browserLike(t), browserLike(t)
	logIn(t, a, srv.URL, tok)
	clk.Add(time.Second)
	logIn(t, b, srv.URL, tok)
	clk.Add(time.Second)
	logIn(t, d, srv.URL, tok)
	assert.Equal(t, 2, c.Logins())
	assert.Equal(t, http.StatusSeeOther, get(t, a, srv.URL+"/sessions").StatusCode)
	assert.Equal(t, http.StatusOK, get(t, b, srv.URL+"/sessions").StatusCode)
	assert.Equal(t, http.StatusOK, get(t, d, srv.URL+"/sessions").StatusCode)

	// Revoked: the next request is not served.
	_, err := svc.RevokeAPIToken(context.Background(), "alice")
	require.NoError(t, err)
	assert.Equal(t, http.StatusSeeOther, get(t, d, srv.URL+"/sessions").StatusCode)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// TestFormsNeedTheirCSRFTokenAndOrigin: a POST without the login's CSRF
// token, or from another origin, is refused before anything is done.
func TestFormsNeedTheirCSRFTokenAndOrigin(t *testing.T) {
	t.Parallel()
	srv, svc, _ := consoleOn(t, console.Options{})
	c := browserLike(t)
	logIn(t, c, srv.URL, token(t, svc, "bob", model.RoleAdmin))
	resp, err := c.Get(srv.URL + "/sessions")
	require.NoError(t, err)
	var page strings.Builder
	_, _ = ioCopy(&page, resp)
	m := csrfField.FindStringSubmatch(page.String())
	require.NotNil(t, m, "the page's forms carry the CSRF token")

	post := func(form url.Values, origin string) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/catalog/servers/nope/refresh", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, post(url.Values{}, ""), "no CSRF token")
	assert.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {strings.Repeat("0", 64)}}, ""), "a wrong one")
	assert.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {m[1]}}, "http://evil.example"), "another origin")
	// The right token from this origin reaches the action: the catalog
	// has no server "nope".
	assert.Equal(t, http.StatusOK, post(url.Values{"csrf": {m[1]}}, srv.URL), "the refresh page reports the missing server")
}

func ioCopy(b *strings.Builder, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	return io.Copy(b, resp.Body)
}

// TestEmptyStates: a first run's pages say what to do next.
func TestEmptyStates(t *testing.T) {
	t.Parallel()
	srv, svc, _ := consoleOn(t, console.Options{})
	c := browserLike(t)
	logIn(t, c, srv.URL, token(t, svc, "carol", model.RoleAdmin))
	for path, want := range map[string]string{
		"/sessions":   "No sessions yet",
		"/tasks":      "No workspaces yet",
		"/workspaces": "No workspaces yet",
		"/catalog":    "No MCP servers in the catalog yet",
	} {
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		var page strings.Builder
		_, _ = ioCopy(&page, resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, page.String(), want, path)
	}
}

// TestEventStreamsAreBounded: beyond MaxStreams, a page's event stream is
// answered 503 with Retry-After; a place is free again once a stream ends.
func TestEventStreamsAreBounded(t *testing.T) {
	t.Parallel()
	srv, svc, _ := consoleOn(t, console.Options{MaxStreams: 1})
	ctx := context.Background()
	ws, err := svc.CreateWorkspace(ctx, "w")
	require.NoError(t, err)
	repo, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: "a/b"})
	require.NoError(t, err)
	task, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: repo.ID})
	require.NoError(t, err)
	c := browserLike(t)
	logIn(t, c, srv.URL, token(t, svc, "dave", model.RoleViewer))

	open := func(ctx context.Context) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/tasks/"+task.ID+"/events/stream", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		return resp
	}
	first, cancel := context.WithCancel(ctx)
	resp := open(first)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	line := make([]byte, 64)
	_, err = resp.Body.Read(line) // the stream has started
	require.NoError(t, err)

	second := open(ctx)
	second.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, second.StatusCode)
	assert.Equal(t, "5", second.Header.Get("Retry-After"))

	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool {
		r, cancel := context.WithCancel(ctx)
		defer cancel()
		resp := open(r)
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 20*time.Millisecond, "the place is free once the first stream ends")
}

// TestLoginRedirectStaysOnTheConsole: after logging in, the person goes
// back to the page they asked for, never to another site.
func TestLoginRedirectStaysOnTheConsole(t *testing.T) {
	t.Parallel()
	srv, svc, _ := consoleOn(t, console.Options{})
	tok := token(t, svc, "erin", model.RoleViewer)
	for next, want := range map[string]string{
		"/tasks":               "/tasks",
		"//evil.example/x":     "/sessions",
		"https://evil.example": "/sessions",
		"/\\evil.example":      "/sessions",
		"":                     "/sessions",
	} {
		resp, err := browserLike(t).PostForm(srv.URL+"/login", url.Values{"token": {tok}, "next": {next}})
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, next)
		assert.Equal(t, want, resp.Header.Get("Location"), next)
	}
}

// remover is a fake local executor that removes workspaces (in name: it
// records the directories it was asked to remove).
type remover struct {
	*fake.Executor
	mu      sync.Mutex
	removed []string
}

func (r *remover) RemoveWorkspace(_ context.Context, _ executors.Handle, dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, dir)
	return nil
}

func (r *remover) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

// page is one answer of the console, read whole.
type page struct {
	status   int
	body     string
	location string
}

func fetch(t *testing.T, c *http.Client, method, u string, form url.Values) page {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	var b strings.Builder
	_, err = ioCopy(&b, resp)
	require.NoError(t, err)
	return page{status: resp.StatusCode, body: b.String(), location: resp.Header.Get("Location")}
}

// TestSessionWorkspace: a session's page lists its workspace as its
// record has it: each checkout's branch, path or why it is missing, its
// work when the stop measured it ("not measured", never "none", when it
// was not) and its last delivery. A member cleans a stopped session's
// workspace there: a refusal for undelivered work is shown with the
// server's reason and a "Discard and clean" button, which removes it. A
// viewer, and a running session's page, have no clean button.
func TestSessionWorkspace(t *testing.T) {
	t.Parallel()
	local := &remover{Executor: fake.New("local")}
	srv, svc, _, st := consoleOver(t, console.Options{}, service.Options{Executors: map[string]executors.Executor{"local": local}})
	ctx := context.Background()
	task, repo := githubTask(t, svc, "acme/api")

	measured := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	commit := "0123456789abcdef0123456789abcdef01234567"
	workspace := func(dir, branch string) model.Checkouts {
		return model.Checkouts{Dir: dir, Repositories: []model.Checkout{
			{RepositoryID: repo.ID, Key: "github.com/acme/api", Path: dir + "/api", Branch: branch,
				Delivered: &model.Delivered{Commit: commit, At: measured.Add(-time.Hour)},
				Work:      &model.Work{Head: commit, Uncommitted: 2, Unpushed: 1, At: measured}},
			{RepositoryID: "repo_web", Key: "gitlab.com/acme/web", Branch: branch, Error: "the fetch was refused"},
			{RepositoryID: "repo_lib", Key: "github.com/acme/lib", Path: dir + "/lib", Branch: branch},
		}}
	}
	stopped, err := st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionStopped, Owner: svc.Replica(), Checkouts: workspace("/data/workspaces/s1", "toolscope/t/s1")})
	require.NoError(t, err)
	// Running on an executor this orchestrator lacks: its record is all
	// there is, as for another replica's session.
	running, err := st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "remote", Mode: model.ModeTask,
		State: model.SessionRunning, Owner: svc.Replica(), Checkouts: workspace("/data/workspaces/s2", "toolscope/t/s2")})
	require.NoError(t, err)
	stoppedURL := srv.URL + "/sessions/" + stopped.ID
	cleanForm := `action="/sessions/` + stopped.ID + `/clean"`

	viewer := browserLike(t)
	logIn(t, viewer, srv.URL, token(t, svc, "vic", model.RoleViewer))
	shown := fetch(t, viewer, http.MethodGet, stoppedURL, nil)
	require.Equal(t, http.StatusOK, shown.status)
	for _, want := range []string{
		`<code data-workspace-dir>/data/workspaces/s1</code>`,
		`<tr data-checkout="github.com/acme/api">`,
		`<code data-branch>toolscope/t/s1</code>`,
		`<code class="wrap" data-path>/data/workspaces/s1/api</code>`,
		`data-uncommitted="2" data-unpushed="1">2 uncommitted path(s), 1 unpushed commit(s)</span> <span class="muted">measured 2026-12-03 08:00:00Z</span>`,
		`<code title="` + commit + `">0123456789ab</code> to <code class="wrap">refs/heads/toolscope/t/s1</code>, 2026-12-03 07:00:00Z`,
		`<span class="bad">not checked out</span>: the fetch was refused`,
		`<span class="muted" data-work-unknown>not measured</span>`,
		"Removing the workspace needs the member role",
	} {
		assert.Contains(t, shown.body, want)
	}
	assert.NotContains(t, shown.body, ">none<", "no checkout's work is known to be nothing")
	assert.NotContains(t, shown.body, cleanForm, "a viewer has no clean button")
	assert.NotContains(t, shown.body, `data-action="clean-session"`)
	csrf := csrfField.FindStringSubmatch(shown.body)
	require.NotNil(t, csrf)
	forged := fetch(t, viewer, http.MethodPost, stoppedURL+"/clean", url.Values{"csrf": {csrf[1]}, "discard": {"true"}})
	assert.Equal(t, http.StatusForbidden, forged.status, "the server refuses a viewer's clean")

	member := browserLike(t)
	logIn(t, member, srv.URL, token(t, svc, "mia", model.RoleMember))
	runningPage := fetch(t, member, http.MethodGet, srv.URL+"/sessions/"+running.ID, nil)
	require.Equal(t, http.StatusOK, runningPage.status)
	assert.Contains(t, runningPage.body, `<code data-branch>toolscope/t/s2</code>`)
	assert.Contains(t, runningPage.body, "toolscope session get "+running.ID, "a running session's work is measured by session get")
	assert.NotContains(t, runningPage.body, `data-action="clean-session"`, "a running session's workspace is not cleaned")

	shown = fetch(t, member, http.MethodGet, stoppedURL, nil)
	require.Equal(t, http.StatusOK, shown.status)
	assert.Contains(t, shown.body, cleanForm)
	assert.Contains(t, shown.body, `<button type="submit" data-action="clean-session">Clean workspace</button>`)
	assert.NotContains(t, shown.body, `name="discard"`, "discarding is offered only after a refusal")
	csrf = csrfField.FindStringSubmatch(shown.body)
	require.NotNil(t, csrf)

	// Refused: the work the record holds is named, and discarding it is
	// offered.
	refused := fetch(t, member, http.MethodPost, stoppedURL+"/clean", url.Values{"csrf": {csrf[1]}})
	assert.Equal(t, http.StatusConflict, refused.status)
	assert.Contains(t, refused.body, `data-clean-refused>session &#34;`+stopped.ID+`&#34;&#39;s workspace may hold work its provider lacks: `+
		`github.com/acme/api (branch toolscope/t/s1): 2 uncommitted path(s) and 1 unpushed commit(s) at 2026-12-03T08:00:00Z; `+
		`github.com/acme/lib (branch toolscope/t/s1): its work was never measured;`)
	assert.Contains(t, refused.body, `<form method="post" action="/sessions/`+stopped.ID+`/clean" class="inline" data-confirm="Remove this workspace and lose its undelivered work? This cannot be undone.">`)
	assert.Contains(t, refused.body, `<input type="hidden" name="discard" value="true">`)
	assert.Contains(t, refused.body, `data-action="clean-session">Discard and clean</button>`)
	assert.Contains(t, refused.body, `<code data-branch>toolscope/t/s1</code>`, "the refusal is shown on the session's page")
	assert.Empty(t, local.Removed(), "nothing removed")
	got, err := svc.GetSession(ctx, stopped.ID)
	require.NoError(t, err)
	assert.True(t, got.Checkouts.Removed.IsZero())

	// Discarded: the workspace is removed, and the page says when.
	cleaned := fetch(t, member, http.MethodPost, stoppedURL+"/clean", url.Values{"csrf": {csrf[1]}, "discard": {"true"}})
	require.Equal(t, http.StatusSeeOther, cleaned.status, cleaned.body)
	assert.Equal(t, "/sessions/"+stopped.ID, cleaned.location)
	assert.Equal(t, []string{"/data/workspaces/s1"}, local.Removed())
	got, err = svc.GetSession(ctx, stopped.ID)
	require.NoError(t, err)
	assert.False(t, got.Checkouts.Removed.IsZero())
	shown = fetch(t, member, http.MethodGet, stoppedURL, nil)
	require.Equal(t, http.StatusOK, shown.status)
	assert.Contains(t, shown.body, `<span class="warn" data-workspace-removed>removed `+got.Checkouts.Removed.UTC().Format("2006-01-02 15:04:05Z")+`</span>`)
	assert.NotContains(t, shown.body, `data-action="clean-session"`, "a removed workspace has no clean button")
}

// TestSessionWithoutWorkspace: a hosted session's page says it has no
// workspace, and offers no clean.
func TestSessionWithoutWorkspace(t *testing.T) {
	t.Parallel()
	srv, svc, _, st := consoleOver(t, console.Options{}, service.Options{})
	ctx := context.Background()
	task, _ := githubTask(t, svc, "acme/api")
	hosted, err := st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: model.ExecutorHosted, Mode: model.ModeTask,
		State: model.SessionStopped, Owner: svc.Replica()})
	require.NoError(t, err)
	c := browserLike(t)
	logIn(t, c, srv.URL, token(t, svc, "max", model.RoleMember))
	shown := fetch(t, c, http.MethodGet, srv.URL+"/sessions/"+hosted.ID, nil)
	require.Equal(t, http.StatusOK, shown.status)
	assert.Contains(t, shown.body, "This session has no workspace: a hosted session's agent works elsewhere.")
	assert.NotContains(t, shown.body, `data-action="clean-session"`)
}

// githubTask is a task of a new workspace on one GitHub repository, path.
func githubTask(t *testing.T, svc *service.Service, path string) (model.Task, model.Repository) {
	t.Helper()
	ctx := context.Background()
	ws, err := svc.CreateWorkspace(ctx, "w")
	require.NoError(t, err)
	repo, err := svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws.ID, Provider: "github", Host: "github.com", Path: path})
	require.NoError(t, err)
	task, err := svc.CreateTask(ctx, service.TaskInput{WorkspaceID: ws.ID, Title: "t", RepositoryID: repo.ID})
	require.NoError(t, err)
	return task, repo
}
