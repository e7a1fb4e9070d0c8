package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/console"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// noRedirects is a client that answers each request as is, without a
// cookie jar (each login's cookie is kept by the test), on a transport of
// its own: closing another test's server closes http.DefaultTransport's
// idle connections, which breaks a request about to reuse one.
func noRedirects(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// loginAnswer is a login's answer, read whole.
type loginAnswer struct {
	status     int
	body       string
	retryAfter string
}

// loginCookie logs in with tok and returns the answer and its cookie (nil
// if none was set).
func loginCookie(t *testing.T, hc *http.Client, base, tok string) (loginAnswer, *http.Cookie) {
	t.Helper()
	resp, err := hc.PostForm(base+"/login", url.Values{"token": {tok}})
	require.NoError(t, err)
	var b strings.Builder
	_, err = ioCopy(&b, resp)
	require.NoError(t, err)
	a := loginAnswer{status: resp.StatusCode, body: b.String(), retryAfter: resp.Header.Get("Retry-After")}
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName {
			return a, ck
		}
	}
	return a, nil
}

// authorizes reports whether the login of ck is served a page.
func authorizes(t *testing.T, hc *http.Client, base string, ck *http.Cookie) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/sessions", nil)
	require.NoError(t, err)
	req.AddCookie(ck)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login"), resp.Header.Get("Location"))
	}
	return resp.StatusCode == http.StatusOK
}

// TestOneTokenCannotEndOthersLogins replays the attack: while an admin is
// logged in, a viewer's token logs in DefaultMaxSessions (1,000) times.
// The admin's login still works; the viewer holds only its newest
// DefaultMaxSessionsPerCredential logins.
func TestOneTokenCannotEndOthersLogins(t *testing.T) {
	t.Parallel()
	srv, svc, c := consoleOn(t, console.Options{})
	hc := noRedirects(t)
	admin := browserLike(t)
	admin.Transport = hc.Transport
	require.Equal(t, http.StatusSeeOther, logIn(t, admin, srv.URL, token(t, svc, "root", model.RoleAdmin)).StatusCode)
	viewerToken := token(t, svc, "mallory", model.RoleViewer)

	cookies := make([]*http.Cookie, console.DefaultMaxSessions)
	for i := range cookies {
		p, ck := loginCookie(t, hc, srv.URL, viewerToken)
		require.Equal(t, http.StatusSeeOther, p.status, "login %d", i)
		require.NotNil(t, ck, "login %d", i)
		cookies[i] = ck
	}

	assert.Equal(t, http.StatusOK, get(t, admin, srv.URL+"/sessions").StatusCode, "the admin is still logged in")
	assert.Equal(t, 1+console.DefaultMaxSessionsPerCredential, c.Logins())
	var working, newest []int
	for i, ck := range cookies {
		if authorizes(t, hc, srv.URL, ck) {
			working = append(working, i)
		}
		if i >= len(cookies)-console.DefaultMaxSessionsPerCredential {
			newest = append(newest, i)
		}
	}
	assert.Equal(t, newest, working, "only the viewer's newest logins work")
	assert.Equal(t, http.StatusOK, get(t, admin, srv.URL+"/sessions").StatusCode)
}

// TestFullConsoleRefusesNewCredentials: with small bounds (4 logins, 2 a
// credential), a viewer logging in MaxSessions+1 times ends only its own
// logins; once the console is full, a credential holding logins still
// logs in (ending its own oldest), a credential holding none is refused
// 429 with when to come back, and nobody's login ends. A logout, or
// logins idle past the TTL, make room again.
func TestFullConsoleRefusesNewCredentials(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	srv, svc, c := consoleOn(t, console.Options{SessionTTL: time.Hour, MaxSessions: 4, MaxSessionsPerCredential: 2, Now: clk.Now})
	hc := noRedirects(t)
	_, admin := loginCookie(t, hc, srv.URL, token(t, svc, "root", model.RoleAdmin))
	require.NotNil(t, admin)
	viewerToken := token(t, svc, "mallory", model.RoleViewer)
	var viewer []*http.Cookie
	for range 4 + 1 {
		clk.Add(time.Minute)
		p, ck := loginCookie(t, hc, srv.URL, viewerToken)
		require.Equal(t, http.StatusSeeOther, p.status)
		viewer = append(viewer, ck)
	}
	assert.Equal(t, 3, c.Logins())
	assert.True(t, authorizes(t, hc, srv.URL, admin), "the admin is still logged in")
	for i, ck := range viewer {
		assert.Equal(t, i >= 3, authorizes(t, hc, srv.URL, ck), "the viewer's login %d", i)
	}

	// Full: a member's login takes the last place.
	member := browserLike(t)
	member.Transport = hc.Transport
	require.Equal(t, http.StatusSeeOther, logIn(t, member, srv.URL, token(t, svc, "mia", model.RoleMember)).StatusCode)
	assert.Equal(t, 4, c.Logins())

	// A new credential is refused, and told when a place frees at the
	// earliest: every login was used 10 minutes ago, and ends idle after
	// an hour.
	clk.Add(10 * time.Minute)
	eveToken := token(t, svc, "eve", model.RoleMember)
	refused, ck := loginCookie(t, hc, srv.URL, eveToken)
	assert.Equal(t, http.StatusTooManyRequests, refused.status)
	assert.Nil(t, ck)
	assert.Equal(t, "3000", refused.retryAfter)
	assert.Contains(t, refused.body, "Not logged in: too many console logins (this console holds 4 at once); log out elsewhere or wait 50 minutes.")
	assert.Contains(t, refused.body, `action="/login"`, "the login form is shown again")
	assert.Equal(t, 4, c.Logins())

	// The viewer, holding logins, logs in again: its own least recently
	// used login ends.
	clk.Add(time.Second)
	assert.True(t, authorizes(t, hc, srv.URL, viewer[4]))
	p, again := loginCookie(t, hc, srv.URL, viewerToken)
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.Equal(t, 4, c.Logins())
	assert.False(t, authorizes(t, hc, srv.URL, viewer[3]))
	assert.True(t, authorizes(t, hc, srv.URL, viewer[4]))
	assert.True(t, authorizes(t, hc, srv.URL, again))
	assert.True(t, authorizes(t, hc, srv.URL, admin))
	assert.Equal(t, http.StatusOK, get(t, member, srv.URL+"/sessions").StatusCode)

	// The member logs out: eve takes the place.
	shown := fetch(t, member, http.MethodGet, srv.URL+"/sessions", nil)
	csrf := csrfField.FindStringSubmatch(shown.body)
	require.NotNil(t, csrf)
	require.Equal(t, http.StatusSeeOther, fetch(t, member, http.MethodPost, srv.URL+"/logout", url.Values{"csrf": {csrf[1]}}).status)
	p, eve := loginCookie(t, hc, srv.URL, eveToken)
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.True(t, authorizes(t, hc, srv.URL, eve))
	assert.True(t, authorizes(t, hc, srv.URL, admin))

	// Full again; once every login is idle past the TTL, a new credential
	// logs in.
	assert.Equal(t, 4, c.Logins())
	clk.Add(time.Hour + time.Second)
	p, fay := loginCookie(t, hc, srv.URL, token(t, svc, "fay", model.RoleViewer))
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.Equal(t, 1, c.Logins(), "the idle logins were dropped")
	assert.True(t, authorizes(t, hc, srv.URL, fay))
}

// TestCertificateLoginsAreCappedPerCertificate: a client certificate is
// one credential: its logins beyond MaxSessionsPerCredential end its own
// oldest, never another certificate's.
func TestCertificateLoginsAreCappedPerCertificate(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	require.NoError(t, err)
	srvPair, err := ca.IssueServer("console", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	alice, err := ca.IssueClient("alice", time.Hour, "viewer")
	require.NoError(t, err)
	bob, err := ca.IssueClient("bob", time.Hour, "admin")
	require.NoError(t, err)

	ctx := context.Background()
	broker := &events.Broker{}
	st, err := store.Open(ctx, t.TempDir(), store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{})
	t.Cleanup(svc.Close)
	c, err := console.New(console.Options{Service: svc, Auth: &access.Authenticator{Credentials: st}, Secure: true,
		MaxSessions: 10, MaxSessionsPerCredential: 2})
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM))
	serverCert, err := tls.X509KeyPair(srvPair.CertPEM, srvPair.KeyPEM)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(c)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: roots, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	client := func(pair pki.Pair) *http.Client {
		cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		require.NoError(t, err)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Jar: jar, Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	logInCert := func(hc *http.Client) {
		p := fetch(t, hc, http.MethodPost, srv.URL+"/login/certificate", nil)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
	}
	b := client(bob)
	logInCert(b)
	var as []*http.Client
	for range 3 {
		a := client(alice)
		logInCert(a)
		as = append(as, a)
	}
	assert.Equal(t, 3, c.Logins())
	assert.Equal(t, http.StatusOK, get(t, b, srv.URL+"/sessions").StatusCode, "bob is still logged in")
	assert.Equal(t, http.StatusSeeOther, get(t, as[0], srv.URL+"/sessions").StatusCode, "alice's oldest login ended")
	assert.Equal(t, http.StatusOK, get(t, as[1], srv.URL+"/sessions").StatusCode)
	assert.Equal(t, http.StatusOK, get(t, as[2], srv.URL+"/sessions").StatusCode)
}
