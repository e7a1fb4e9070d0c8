// Package console is the orchestrator's web console: server-rendered
// pages (html/template) with htmx for partial updates and server-sent
// events for what changes live, all embedded in the binary. It serves on
// its own address (server.Config.Console, loopback unless TLS), behind the
// API's authentication and roles: a person logs in with an API token or a
// client certificate, and every page and button is an Action performing
// one RPC whose role access.Table states (actions.go). The console calls
// the service layer, as the gRPC handlers do, with the caller's identity
// in the context. See ADR 0022 and docs/console.md.
package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

//go:embed static templates
var files embed.FS

// Defaults of the console's bounds (each a `serve --console-*` flag).
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerCredential bounds the logins of one credential
	// (one API token, one client certificate): a person's few browsers.
	// Filling DefaultMaxSessions takes 100 credentials, which only an
	// admin (token create) or the CA issues.
	DefaultMaxSessionsPerCredential = 10
	// DefaultToolsTimeout bounds listing a session's tools over MCP.
	DefaultToolsTimeout = 5 * time.Second
	// DefaultMaxStreams bounds the event streams (open session and
	// events pages) served at once.
	DefaultMaxStreams = 256
)

// CookieName is the console's login cookie.
const CookieName = "toolscope_console"

// Options configure a Console.
type Options struct {
	Service *service.Service
	// Auth authenticates the person's credential and checks the role of
	// each action's RPC, exactly as on the gRPC API.
	Auth *access.Authenticator
	// Secure marks the cookie Secure (the console serves TLS).
	Secure bool
	// SessionTTL ends a login idle this long; DefaultSessionTTL if zero.
	SessionTTL time.Duration
	// MaxSessions bounds the logins held (the console's memory). When it
	// is reached, a credential holding logins gives up its own least
	// recently used one; a credential holding none is refused (429)
	// until a login ends: no login ever ends for another credential's.
	// DefaultMaxSessions if zero.
	MaxSessions int
	// MaxSessionsPerCredential bounds the logins of one credential (one
	// API token, one client certificate); its new login beyond ends its
	// own least recently used one. DefaultMaxSessionsPerCredential if
	// zero; at most MaxSessions.
	MaxSessionsPerCredential int
	// ToolsTimeout bounds listing a session's tools; DefaultToolsTimeout
	// if zero.
	ToolsTimeout time.Duration
	// MaxStreams bounds the event streams served at once (each holds a
	// subscription to a task's events); beyond it a page's stream is
	// answered 503 and the browser retries. DefaultMaxStreams if zero.
	MaxStreams int
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Log receives errors the console answers with a generic page; nil
	// discards.
	Log *slog.Logger
}

// Console is the web console's HTTP handler.
type Console struct {
	opts  Options
	svc   *service.Service
	pages *pages
	mux   *http.ServeMux

	mu     sync.Mutex
	logins map[string]*login            // by the SHA-256 of the cookie's value
	byCred map[string]map[string]*login // each credential's logins, by the same key
	// idleFrom is when the first held login can end idle, at the
	// earliest (lastSeen only grows): before it, sweeping finds nothing.
	idleFrom time.Time

	streams chan struct{} // a place per event stream served
}

// login is one person's console session. It holds the API token the person
// logged in with (in memory only), so every request is authenticated again
// and a revoked or expired token ends the login at once; or the
// fingerprint of the client certificate, which each request must present.
type login struct {
	token    string
	certFP   [32]byte
	cred     string // the credential, whose logins are counted together
	csrf     string
	lastSeen time.Time
}

// credential names the login's credential: the SHA-256 of its API token
// (the access layer compares the whole token, so no other string passes
// for it) or its client certificate's fingerprint.
func (l *login) credential() string {
	if l.token != "" {
		sum := sha256.Sum256([]byte(l.token))
		return "token:" + hex.EncodeToString(sum[:])
	}
	return "cert:" + hex.EncodeToString(l.certFP[:])
}

// New returns a console serving svc.
func New(opts Options) (*Console, error) {
	if opts.Service == nil || opts.Auth == nil {
		return nil, errors.New("console: Service and Auth are required")
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxSessionsPerCredential <= 0 {
		opts.MaxSessionsPerCredential = DefaultMaxSessionsPerCredential
	}
	opts.MaxSessionsPerCredential = min(opts.MaxSessionsPerCredential, opts.MaxSessions)
	if opts.ToolsTimeout <= 0 {
		opts.ToolsTimeout = DefaultToolsTimeout
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, svc: opts.Service, pages: p, logins: map[string]*login{}, byCred: map[string]map[string]*login{}, streams: make(chan struct{}, opts.MaxStreams)}
	c.routes()
	return c, nil
}

// ServeHTTP serves the console, with headers that keep its pages out of
// frames, caches and other origins' scripts.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make browsers send "Origin: null" on our own forms
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/sessions", http.StatusSeeOther) })
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.loginToken)
	m.HandleFunc("POST /login/certificate", c.loginCert)
	m.HandleFunc("POST /logout", c.logout)

	m.HandleFunc("GET /sessions", c.page(ViewSessions, c.sessionsPage))
	m.HandleFunc("GET /sessions/{id}", c.page(ViewSession, c.sessionPage))
	m.HandleFunc("GET /sessions/{id}/tools", c.page(ViewSession, c.sessionTools))
	m.HandleFunc("GET /sessions/{id}/live", c.page(ViewSession, c.sessionLive))
	m.HandleFunc("GET /sessions/{id}/log", c.page(ReadSessionLog, c.sessionLog))
	m.HandleFunc("POST /sessions/{id}/resume", c.form(ResumeSession, c.resumeSession))
	m.HandleFunc("POST /sessions/{id}/stop", c.form(StopSession, c.stopSession))
	m.HandleFunc("POST /sessions/{id}/clean", c.form(CleanSession, c.cleanSession))
	m.HandleFunc("POST /sessions/{id}/mcp", c.form(ShowSessionMCP, c.showSessionMCP))

	m.HandleFunc("GET /tasks", c.page(ViewTasks, c.tasksPage))
	m.HandleFunc("GET /tasks/{id}", c.page(ViewTask, c.taskPage))
	m.HandleFunc("POST /tasks/{id}/sources", c.form(AddSources, c.addSources))
	m.HandleFunc("POST /workspaces/{id}/policy", c.form(SetSourcePolicy, c.setPolicy))
	m.HandleFunc("POST /requests/{id}/approve", c.form(ApproveRequest, c.approveRequest))
	m.HandleFunc("POST /requests/{id}/reject", c.form(RejectRequest, c.rejectRequest))

	m.HandleFunc("GET /tasks/{id}/events", c.page(WatchEvents, c.eventsPage))
	m.HandleFunc("GET /tasks/{id}/events/stream", c.page(WatchEvents, c.eventsStream))

	m.HandleFunc("GET /workspaces", c.page(ViewWorkspaces, c.workspacesPage))
	m.HandleFunc("POST /workspaces/{id}/connections/{provider}/test", c.form(TestConnection, c.testConnection))

	m.HandleFunc("GET /catalog", c.page(ViewCatalog, c.catalogPage))
	m.HandleFunc("GET /catalog/tools/{id}", c.page(ViewCatalogTool, c.catalogToolPage))
	m.HandleFunc("POST /catalog/servers/{id}/test", c.form(TestMCPServer, c.testServer))
	m.HandleFunc("POST /catalog/servers/{id}/refresh", c.form(RefreshMCPServer, c.refreshServer))
	m.HandleFunc("POST /catalog/servers/{id}/enabled", c.form(EnableMCPServer, c.enableServer))
	m.HandleFunc("POST /catalog/tools/{id}/enabled", c.form(EnableTool, c.enableTool))
	m.HandleFunc("POST /catalog/tools/{id}/assign", c.form(AssignTool, c.assignTool))
	c.mux = m
}

// Me is the person a request is from, as pages see them.
type Me struct {
	Actor model.Actor
	CSRF  string
}

// Can reports whether the person's role reaches action (by the role its
// RPC needs in access.Table); pages grey out what it does not.
func (m Me) Can(action string) bool { return m.Actor.Role.AtLeast(Needs(Action(action))) }

// Needs names the role an action needs, for the hint on a greyed-out
// button.
func (m Me) Needs(action string) model.Role { return Needs(Action(action)) }

// handler is a page or form handler, called with the context the access
// layer authorized (it carries the person as model.ActorFrom).
type handler func(ctx context.Context, w http.ResponseWriter, r *http.Request, me Me)

// page wraps a GET handler: the person must be logged in and their role
// must reach action.
func (c *Console) page(action Action, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, me, ok := c.authorize(w, r, action)
		if ok {
			h(ctx, w, r, me)
		}
	}
}

// form wraps a state-changing POST: same origin, the login's CSRF token,
// then as page.
func (c *Console) form(action Action, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !sameOrigin(r) {
			c.fail(w, r, Me{}, http.StatusForbidden, "This form was sent from another site, so it was refused.")
			return
		}
		l, _ := c.current(r)
		if l == nil {
			c.toLogin(w, r)
			return
		}
		sent := r.Header.Get("X-CSRF-Token")
		if sent == "" {
			sent = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(sent), []byte(l.csrf)) != 1 {
			c.fail(w, r, Me{}, http.StatusForbidden, "This form is stale or forged (its CSRF token does not match your login); reload the page.")
			return
		}
		ctx, me, ok := c.authorize(w, r, action)
		if ok {
			h(ctx, w, r, me)
		}
	}
}

// maxFormBytes bounds a form's body.
const maxFormBytes = 64 << 10

// sameOrigin refuses a POST whose Origin (sent by every browser on POST)
// names another site. SameSite=Strict already keeps the cookie off such
// requests; this also covers the login form.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// authorize authenticates the request's login and asks the access layer
// whether its credential may perform action's RPC. On failure it has
// answered the request.
func (c *Console) authorize(w http.ResponseWriter, r *http.Request, action Action) (context.Context, Me, bool) {
	l, key := c.current(r)
	if l == nil {
		c.toLogin(w, r)
		return nil, Me{}, false
	}
	ctx, err := c.opts.Auth.Authorize(credentialContext(r, l), RPCs[action])
	switch {
	case errors.Is(err, errdefs.ErrUnauthenticated):
		// Revoked or expired: the login ends with its credential.
		c.forget(key)
		c.toLogin(w, r)
		return nil, Me{}, false
	case err != nil && !errors.Is(err, errdefs.ErrPermissionDenied):
		// The orchestrator could not check (its database, say): the login
		// stays.
		c.failErr(w, r, Me{CSRF: l.csrf}, err)
		return nil, Me{}, false
	case err != nil:
		who, _ := c.whoAmI(r, l)
		c.fail(w, r, Me{Actor: who, CSRF: l.csrf}, http.StatusForbidden,
			fmt.Sprintf("Your role (%s) cannot do this: it needs %s.", who.Role, Needs(action)))
		return nil, Me{}, false
	}
	actor, _ := model.ActorFrom(ctx)
	return ctx, Me{Actor: actor, CSRF: l.csrf}, true
}

func (c *Console) whoAmI(r *http.Request, l *login) (model.Actor, error) {
	ctx, err := c.opts.Auth.Authorize(credentialContext(r, l), RPCs[WhoAmI])
	if err != nil {
		return model.Actor{}, err
	}
	a, _ := model.ActorFrom(ctx)
	return a, nil
}

// credentialContext presents the login's credential to the access layer as
// the gRPC API receives it: the API token as bearer metadata, or the
// request's verified client certificate as the peer's TLS state.
func credentialContext(r *http.Request, l *login) context.Context {
	ctx := r.Context()
	if l.token != "" {
		return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+l.token))
	}
	if r.TLS != nil {
		addr, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
		return peer.NewContext(ctx, &peer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{State: *r.TLS}})
	}
	return ctx
}

// current returns the request's login, if its cookie names a live one.
// A certificate login must present the same certificate.
func (c *Console) current(r *http.Request) (*login, string) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, ""
	}
	key := cookieKey(ck.Value)
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logins[key]
	now := c.opts.Now()
	if l == nil {
		return nil, ""
	}
	if now.Sub(l.lastSeen) > c.opts.SessionTTL {
		c.drop(key)
		return nil, ""
	}
	if l.token == "" {
		fp, ok := certFingerprint(r.TLS)
		if !ok || subtle.ConstantTimeCompare(fp[:], l.certFP[:]) != 1 {
			return nil, ""
		}
	}
	l.lastSeen = now
	return l, key
}

func cookieKey(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

func certFingerprint(state *tls.ConnectionState) ([32]byte, bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return [32]byte{}, false
	}
	return sha256.Sum256(state.VerifiedChains[0][0].Raw), true
}

// remember starts a login and sets its cookie. It reports false, having
// answered 429, when the console is full and the credential holds no
// login of its own to give up.
//
// The caps are per credential so that no credential's logins end another
// one's. The console's cap stays, as its memory bound, but reaching it
// never evicts another credential's login: a credential at either cap
// gives up its own least recently used login, and one holding none is
// refused until a login ends (logout, idle TTL). Reserving room per
// credential instead is not possible, as credentials are not counted in
// advance (admins create tokens, the CA signs certificates), and evicting
// any other credential's login, even the biggest holder's, would let a few
// credentials together end the rest. A refusal costs only new logins, and
// only once MaxSessions/MaxSessionsPerCredential (100 by default)
// credentials hold logins; restarting the orchestrator, or a larger
// --console-max-logins, makes room.
//
// Login attempts are not rate limited: a burst of one credential now only
// replaces its own logins (O(MaxSessionsPerCredential) under the lock;
// sweeping idle logins, O(MaxSessions), runs only when one may have
// ended), and each attempt costs what an API call with the same token
// costs. A console-wide limiter would itself let one caller lock the
// others out.
func (c *Console) remember(w http.ResponseWriter, r *http.Request, l *login) bool {
	value, csrf := random(), random()
	now := c.opts.Now()
	l.cred, l.csrf, l.lastSeen = l.credential(), csrf, now
	c.mu.Lock()
	if len(c.logins) >= c.opts.MaxSessions {
		c.sweep(now)
	}
	own := c.byCred[l.cred]
	switch {
	case len(own) >= c.opts.MaxSessionsPerCredential, len(c.logins) >= c.opts.MaxSessions && len(own) > 0:
		oldest, at := "", time.Time{}
		for k, v := range own {
			if oldest == "" || v.lastSeen.Before(at) {
				oldest, at = k, v.lastSeen
			}
		}
		c.drop(oldest)
	case len(c.logins) >= c.opts.MaxSessions:
		wait := max(c.idleFrom.Sub(now), time.Second)
		c.mu.Unlock()
		_, certOK := certFingerprint(r.TLS)
		minutes := int((wait + time.Minute - 1) / time.Minute)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		c.render(w, r, http.StatusTooManyRequests, "login", Me{}, map[string]any{
			"Error": fmt.Sprintf("Not logged in: too many console logins (this console holds %d at once); log out elsewhere or wait %d minute%s.",
				c.opts.MaxSessions, minutes, plural(minutes)),
			"Next": safeNext(r.PostFormValue("next")), "Cert": certOK})
		return false
	}
	key := cookieKey(value)
	c.logins[key] = l
	if c.byCred[l.cred] == nil {
		c.byCred[l.cred] = map[string]*login{}
	}
	c.byCred[l.cred][key] = l
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.opts.Secure})
	return true
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// sweep drops the logins idle past SessionTTL, unless none can be yet, and
// notes when the first of the rest can be. c.mu is held.
func (c *Console) sweep(now time.Time) {
	if !now.After(c.idleFrom) {
		return
	}
	c.idleFrom = time.Time{}
	for k, l := range c.logins {
		switch until := l.lastSeen.Add(c.opts.SessionTTL); {
		case now.After(until):
			c.drop(k)
		case c.idleFrom.IsZero() || until.Before(c.idleFrom):
			c.idleFrom = until
		}
	}
}

// drop ends the login of key. c.mu is held.
func (c *Console) drop(key string) {
	l := c.logins[key]
	if l == nil {
		return
	}
	delete(c.logins, key)
	if own := c.byCred[l.cred]; own != nil {
		delete(own, key)
		if len(own) == 0 {
			delete(c.byCred, l.cred)
		}
	}
}

func (c *Console) forget(key string) {
	c.mu.Lock()
	c.drop(key)
	c.mu.Unlock()
}

// Logins returns how many logins the console holds.
func (c *Console) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.logins)
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Redirect", "/login")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
		return
	}
	http.Error(w, "log in first", http.StatusUnauthorized)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	_, certOK := certFingerprint(r.TLS)
	c.render(w, r, http.StatusOK, "login", Me{}, map[string]any{"Cert": certOK, "Next": safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/sessions"
	}
	return next
}

func (c *Console) loginToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !sameOrigin(r) {
		c.fail(w, r, Me{}, http.StatusForbidden, "This form was sent from another site, so it was refused.")
		return
	}
	l := &login{token: strings.TrimSpace(r.PostFormValue("token"))}
	if l.token == "" {
		c.render(w, r, http.StatusUnauthorized, "login", Me{}, map[string]any{"Error": "Paste an API token ('toolscope token create').", "Next": safeNext(r.PostFormValue("next"))})
		return
	}
	if _, err := c.whoAmI(r, l); err != nil {
		// The access layer's reason names the token's record, never the
		// token.
		c.render(w, r, http.StatusUnauthorized, "login", Me{}, map[string]any{"Error": loginError(err), "Next": safeNext(r.PostFormValue("next"))})
		return
	}
	if c.remember(w, r, l) {
		http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
	}
}

func loginError(err error) string {
	if errors.Is(err, errdefs.ErrUnauthenticated) || errors.Is(err, errdefs.ErrPermissionDenied) {
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i > 0 {
			msg = msg[:i]
		}
		return "Not logged in: " + msg + "."
	}
	return "Not logged in: the orchestrator could not check the token."
}

func (c *Console) loginCert(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, Me{}, http.StatusForbidden, "This form was sent from another site, so it was refused.")
		return
	}
	fp, ok := certFingerprint(r.TLS)
	if !ok {
		c.render(w, r, http.StatusUnauthorized, "login", Me{}, map[string]any{"Error": "Your browser sent no client certificate this orchestrator's CA signed."})
		return
	}
	l := &login{certFP: fp}
	if _, err := c.whoAmI(r, l); err != nil {
		c.render(w, r, http.StatusUnauthorized, "login", Me{}, map[string]any{"Error": loginError(err)})
		return
	}
	if c.remember(w, r, l) {
		http.Redirect(w, r, "/sessions", http.StatusSeeOther)
	}
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, Me{}, http.StatusForbidden, "This form was sent from another site, so it was refused.")
		return
	}
	if l, key := c.current(r); l != nil {
		if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(l.csrf)) == 1 {
			c.forget(key)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.opts.Secure})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
