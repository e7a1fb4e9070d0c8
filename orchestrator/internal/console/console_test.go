package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	ctx := context.Background()
	broker := &events.Broker{}
	st, err := store.Open(ctx, t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{})
	t.Cleanup(svc.Close)
	opts.Service, opts.Auth = svc, &access.Authenticator{Credentials: st, Now: opts.Now}
	c, err := console.New(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv, svc, c
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
// login idle longer than SessionTTL ends; beyond MaxSessions the least
// recently used login ends; a revoked token ends its login at once.
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

	// Three logins, room for two: the least recently used one ends.
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
