package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/periodic"
)

// Limits bound what one MCP endpoint holds for its clients. Each has a
// default (docs/operations.md#limits) and an `agentctl serve` flag.
//
// A client's notification stream (the GET stream of a stateful session, the
// subscriptions/listen request of a 2026-07-28 client) is one request that
// lasts as long as the client, so there is deliberately no http.Server
// WriteTimeout: it would cut every stream at the deadline. Nor is there a
// ReadTimeout (net/http clears it once a body is read, so it would spare
// streams, but it counts headers and body together and leaves a slow body
// to the SDK's 400): the body gets a deadline of its own while it is read,
// and a slow one is answered 408 naming its flag.
type Limits struct {
	// HeaderTimeout bounds reading a request's headers, from the accepted
	// connection or from the first byte of the next request on it.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, once its headers are in.
	BodyTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request in
	// progress after this long.
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once. At the bound, a new
	// connection closes one that no request has authenticated yet (the
	// oldest of the remote address holding the most: NewHTTPServer), and
	// waits to be accepted only while all are authenticated.
	MaxConns int
	// MaxSessions bounds the stateful MCP sessions (clients before
	// 2026-07-28) at once; an initialize beyond it is refused.
	MaxSessions int
	// SessionIdle closes a stateful session with no request in progress
	// (a notification stream is one) and none for this long.
	SessionIdle time.Duration
	// EventBytes bounds, per stateful MCP session, the bytes of sent
	// messages kept so that a broken stream can be resumed (events.go).
	EventBytes int
	// EventAge drops a stateful session's request stream, and what it
	// sent, this long after it opened (events.go).
	EventAge time.Duration
	// KeepAlive pings, on this interval, every stateful session that holds
	// a notification stream, and closes those that do not answer within
	// half of it. It is not a bound on clients, and has no flag.
	KeepAlive time.Duration
	// MaxBodyBytes bounds a request's body, at most (and by default)
	// MaxRequestBytes. agentctl keeps the default; the orchestrator's
	// hosted endpoint has a flag.
	MaxBodyBytes int64
	// RefusalReports bounds the reports, per session and second, of the
	// calls the endpoint refuses itself (refusals.go); the rest are
	// counted in the next report.
	RefusalReports int
	// FlagPrefix is how refusals name the flags of these bounds:
	// DefaultFlagPrefix (agentctl's) if empty; the orchestrator's hosted
	// endpoint names its own.
	FlagPrefix string
}

// DefaultFlagPrefix is the spelling of agentctl's flags of Limits.
const DefaultFlagPrefix = "agentctl serve --mcp-"

// Defaults of Limits.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	// DefaultIdleTimeout outlasts the idle timeouts of common HTTP
	// clients (Go's http.DefaultTransport keeps an idle connection 90 s,
	// Node's and Python's a few seconds), so that the client, not the
	// server, closes an idle connection. When the server closes first, a
	// client may send a POST on the connection as it closes, and Go does
	// not retry a POST. The bound was 60 s until one tools/list in 54,694
	// failed, without its reason on record, in a 116 s load storm; this
	// race is the likely cause, not a proven one.
	DefaultIdleTimeout = 2 * time.Minute
	DefaultMaxConns    = 512
	DefaultMaxSessions = 128
	DefaultSessionIdle = 2 * time.Minute
	DefaultKeepAlive   = 30 * time.Second
)

// WithDefaults returns l with every unset (zero or negative) field at
// its default.
func (l Limits) WithDefaults() Limits {
	orDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orDefault(&l.HeaderTimeout, DefaultHeaderTimeout)
	orDefault(&l.BodyTimeout, DefaultBodyTimeout)
	orDefault(&l.IdleTimeout, DefaultIdleTimeout)
	orDefault(&l.SessionIdle, DefaultSessionIdle)
	orDefault(&l.KeepAlive, DefaultKeepAlive)
	orDefault(&l.EventAge, DefaultEventAge)
	if l.EventBytes <= 0 {
		l.EventBytes = DefaultEventBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxSessions <= 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.RefusalReports <= 0 {
		l.RefusalReports = DefaultRefusalReports
	}
	if l.MaxBodyBytes <= 0 || l.MaxBodyBytes > MaxRequestBytes {
		l.MaxBodyBytes = MaxRequestBytes
	}
	if l.FlagPrefix == "" {
		l.FlagPrefix = DefaultFlagPrefix
	}
	return l
}

// CodeSessionLimit is the JSON-RPC error code of an initialize refused
// because the endpoint holds Limits.MaxSessions sessions (a server error
// code, in the range JSON-RPC leaves to implementations).
const CodeSessionLimit = -32000

// Endpoint serves a publisher over streamable HTTP, behind a bearer token,
// within Limits. It is started by Serve and ended by Close.
//
// A request is first authenticated: a refused one is answered 401 and its
// connection closed, before any of its body is read, so an unauthenticated
// client holds no connection and creates no session state (and one still
// sending its headers gives way at MaxConns: NewHTTPServer). An
// authenticated request's body is read whole within BodyTimeout (and
// MaxRequestBytes) before the SDK sees it. Stateful sessions are counted
// against MaxSessions and closed in bulk once idle for SessionIdle.
type Endpoint struct {
	pub    *Publisher
	limits Limits
	log    *slog.Logger
	srv    *http.Server
	authed http.Handler // the bearer check, then serveAuthenticated
	inner  http.Handler // Publisher.HTTPHandler

	table sessionTable

	stop    context.CancelFunc
	stopped context.Context
	workers sync.WaitGroup
	once    sync.Once
}

// Serve serves p's MCP endpoint on lis until Close: requests must carry a
// bearer token that verify accepts.
func (p *Publisher) Serve(lis net.Listener, verify auth.TokenVerifier, limits Limits) *Endpoint {
	e := p.Handler(verify, limits)
	srv, bounded := NewHTTPServer(e, lis, e.limits, e.log)
	e.srv = srv
	go func() { _ = srv.Serve(bounded) }()
	return e
}

// Handler returns p's endpoint without a listener of its own, for an
// http.Server that routes to many (the orchestrator's hosted endpoint,
// which applies HeaderTimeout, IdleTimeout and MaxConns once for all of
// them, through NewHTTPServer). The endpoint still checks the bearer token, reads bodies within
// BodyTimeout, and counts, sweeps and pings its MCP sessions. Requests
// reach it with the URL path Path. Close ends its sessions.
func (p *Publisher) Handler(verify auth.TokenVerifier, limits Limits) *Endpoint {
	limits = limits.WithDefaults()
	e := &Endpoint{pub: p, limits: limits, log: p.log, inner: p.httpHandler(limits), table: sessionTable{byID: map[string]*sessionUse{}}}
	e.authed = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(http.HandlerFunc(e.serveAuthenticated))
	e.stopped, e.stop = context.WithCancel(context.Background())
	e.workers.Go(e.sweeper)
	e.workers.Go(e.keepAlive)
	return e
}

// ServeHTTP serves one request of the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.serve(w, r) }

// Close ends the endpoint: its listener, every connection (notification
// streams included: the session is over) and every MCP session.
func (e *Endpoint) Close() {
	e.once.Do(func() {
		e.stop()
		if e.srv != nil {
			_ = e.srv.Close()
		}
		e.workers.Wait()
		for ss := range e.pub.server.Sessions() {
			_ = ss.Close()
		}
	})
}

// Path is the URL path of an Endpoint; others are not found.
const Path = "/mcp"

// serve is the first handler: it closes the connection after a refusal of
// the bearer check (or a path not served), so that net/http neither keeps
// the connection alive nor reads the refused request's body.
func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		w.Header().Set("Connection", "close")
		http.NotFound(w, r)
		return
	}
	e.authed.ServeHTTP(closeOnRefusal{w}, r)
}

// closeOnRefusal marks the connection for closing when the bearer check
// answers an error status. Authenticated requests get the writer it wraps
// (serveAuthenticated), so the SDK's streams write to net/http's own.
type closeOnRefusal struct{ http.ResponseWriter }

func (c closeOnRefusal) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		c.Header().Set("Connection", "close")
	}
	c.ResponseWriter.WriteHeader(code)
}

func (e *Endpoint) serveAuthenticated(w http.ResponseWriter, r *http.Request) {
	authenticated(r.Context())
	if c, ok := w.(closeOnRefusal); ok {
		w = c.ResponseWriter
	}
	body, ok := e.readBody(w, r)
	if !ok {
		return
	}
	if isModern(r) {
		e.inner.ServeHTTP(w, r) // stateless: no session outlives its request
		return
	}
	switch id := r.Header.Get(sessionIDHeader); {
	case id != "":
		stream := r.Method == http.MethodGet
		e.table.begin(id, stream)
		defer e.table.end(id, stream)
	case r.Method == http.MethodPost:
		if !e.admit() {
			e.refuseSession(w, body)
			return
		}
		// The SDK names a new session in the response's header: the table
		// holds it before the client can learn its ID and open its stream.
		named := &sessionNamer{ResponseWriter: w, settle: func(id string) { e.table.settle(id, e.sessions()) }}
		defer named.name()
		w = named
	}
	e.inner.ServeHTTP(w, r)
}

// sessionNamer settles a reserved place as the response's headers go out
// (or when the request ends without a response).
type sessionNamer struct {
	http.ResponseWriter
	settle func(id string)
	once   sync.Once
}

func (n *sessionNamer) name() {
	n.once.Do(func() { n.settle(n.Header().Get(sessionIDHeader)) })
}

func (n *sessionNamer) WriteHeader(code int) {
	n.name()
	n.ResponseWriter.WriteHeader(code)
}

func (n *sessionNamer) Write(b []byte) (int, error) {
	n.name()
	return n.ResponseWriter.Write(b)
}

func (n *sessionNamer) Flush() {
	n.name()
	_ = http.NewResponseController(n.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach net/http's writer.
func (n *sessionNamer) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// sessionIDHeader is the header of a stateful session's ID.
const sessionIDHeader = "Mcp-Session-Id"

// readBody reads r's body whole, within BodyTimeout and MaxRequestBytes,
// and hands the SDK a copy. Only while it reads is a read deadline set on
// the connection: after the body, net/http's background read watches the
// connection for the rest of the request, and a deadline then would cancel
// a long-lived stream (a subscriptions/listen POST is one).
func (e *Endpoint) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(e.limits.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.limits.MaxBodyBytes))
	// On an error the deadline stays: net/http would otherwise drain the
	// rest of the body (up to 256 KiB) at the client's pace before closing.
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case err == nil:
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		return body, true
	case errors.As(err, &tooLarge):
		http.Error(w, fmt.Sprintf("the request body is over %d bytes, the limit", e.limits.MaxBodyBytes), http.StatusRequestEntityTooLarge)
	case errors.As(err, &netErr) && netErr.Timeout():
		e.log.Warn("cut an MCP request whose body did not arrive in time", "remote", r.RemoteAddr, "body_timeout", e.limits.BodyTimeout, "bytes_read", len(body))
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("the request body did not arrive within %s (%sbody-timeout)", e.limits.BodyTimeout, e.limits.FlagPrefix), http.StatusRequestTimeout)
	default:
		w.Header().Set("Connection", "close")
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
	}
	return nil, false
}

// admit reserves a place for a new stateful session. At the limit it
// first sweeps (sessions that ended, idle ones), then tries again.
func (e *Endpoint) admit() bool {
	if e.table.reserve(e.limits.MaxSessions) {
		return true
	}
	e.sweep(time.Now())
	return e.table.reserve(e.limits.MaxSessions)
}

// refuseSession answers an initialize beyond MaxSessions with a JSON-RPC
// error to that request, which every MCP client shows as it is; a body
// that is not one request gets the same text with HTTP 503.
func (e *Endpoint) refuseSession(w http.ResponseWriter, body []byte) {
	msg := fmt.Sprintf("mcp_session_limit: this MCP endpoint already holds %d sessions, its limit (%smax-sessions); "+
		"close MCP clients you no longer use, or retry later: a session with no request for %s (%ssession-idle) is closed",
		e.limits.MaxSessions, e.limits.FlagPrefix, e.limits.SessionIdle, e.limits.FlagPrefix)
	e.log.Warn("refused a new MCP session: the endpoint is at its session limit", "max_sessions", e.limits.MaxSessions)
	w.Header().Set("Retry-After", strconv.Itoa(int(e.limits.SessionIdle.Seconds()+0.5)))
	w.Header().Set("Connection", "close")
	var id jsonrpc.ID
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			id = req.ID
		}
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: CodeSessionLimit, Message: msg}})
	if err != nil || !id.IsValid() {
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// sessions returns the server's stateful sessions, by ID.
func (e *Endpoint) sessions() map[string]*mcp.ServerSession {
	out := map[string]*mcp.ServerSession{}
	for ss := range e.pub.server.Sessions() {
		if id := ss.ID(); id != "" {
			out[id] = ss
		}
	}
	return out
}

// sweep forgets sessions that ended and closes, all at once, those idle
// for SessionIdle.
func (e *Endpoint) sweep(now time.Time) {
	live := e.sessions()
	idle := e.table.sweep(live, now.Add(-e.limits.SessionIdle))
	for _, id := range idle {
		_ = live[id].Close()
	}
	if len(idle) > 0 {
		e.log.Info("closed idle MCP sessions", "count", len(idle), "session_idle", e.limits.SessionIdle)
	}
}

// sweeper sweeps every quarter of SessionIdle (at most every 30 s), so an
// idle session is closed between SessionIdle and 1.25 × SessionIdle after
// its last request.
func (e *Endpoint) sweeper() {
	_ = periodic.Run(e.stopped, max(min(e.limits.SessionIdle/4, 30*time.Second), time.Millisecond), func(context.Context) error {
		e.sweep(time.Now())
		return nil
	})
}

// keepAlive pings, each KeepAlive interval and all at once, the stateful
// sessions that hold a notification stream, and closes those that do not
// answer within half an interval: a client that vanished without closing
// its connection. A session without a stream cannot receive a ping (the
// idle sweep covers it), and a stateless 2026-07-28 session may not be
// sent requests at all. go-sdk's ServerOptions.KeepAlive is not used: in
// v1.8 it pings stateless sessions too, the ping fails, and the SDK closes
// the session, ending the client's subscriptions/listen stream.
func (e *Endpoint) keepAlive() {
	tick := time.NewTicker(e.limits.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-e.stopped.Done():
			return
		case <-tick.C:
		}
		live := e.sessions()
		var wg sync.WaitGroup
		for _, id := range e.table.streaming() {
			ss := live[id]
			if ss == nil {
				continue
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(e.stopped, e.limits.KeepAlive/2)
				defer cancel()
				if err := ss.Ping(ctx, nil); err != nil && e.stopped.Err() == nil {
					e.log.Info("closing an MCP session that stopped answering pings", "mcp_session", id, "error", err.Error())
					_ = ss.Close()
				}
			})
		}
		wg.Wait()
	}
}

// sessionTable tracks an endpoint's stateful sessions: how many there are
// (with places reserved by initializes in progress), which hold a
// notification stream, and when each was last used.
type sessionTable struct {
	mu      sync.Mutex
	byID    map[string]*sessionUse
	pending int
}

type sessionUse struct {
	requests int       // in progress, notification streams included
	streams  int       // GET streams open
	last     time.Time // when the last request ended, or the session began
}

// reserve takes a place for a new session unless max are taken.
func (t *sessionTable) reserve(max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID)+t.pending >= max {
		return false
	}
	t.pending++
	return true
}

// settle turns a reservation into the session id if the server holds it
// (an initialize that failed leaves none), and frees it otherwise.
func (t *sessionTable) settle(id string, live map[string]*mcp.ServerSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending--
	if _, ok := live[id]; ok && id != "" && t.byID[id] == nil {
		t.byID[id] = &sessionUse{last: time.Now()}
	}
}

// begin records a request of session id starting; ids the table does not
// hold (unknown or closed sessions) are ignored.
func (t *sessionTable) begin(id string, stream bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.byID[id]; u != nil {
		u.requests++
		if stream {
			u.streams++
		}
	}
}

func (t *sessionTable) end(id string, stream bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.byID[id]; u != nil && u.requests > 0 {
		u.requests--
		if stream && u.streams > 0 {
			u.streams--
		}
		u.last = time.Now()
	}
}

// sweep forgets sessions not in live and removes and returns those with
// no request in progress since before idleSince.
func (t *sessionTable) sweep(live map[string]*mcp.ServerSession, idleSince time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idle []string
	for id, u := range t.byID {
		switch {
		case live[id] == nil:
			delete(t.byID, id)
		case u.requests == 0 && u.last.Before(idleSince):
			delete(t.byID, id)
			idle = append(idle, id)
		}
	}
	return idle
}

// streaming returns the sessions holding a notification stream.
func (t *sessionTable) streaming() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, u := range t.byID {
		if u.streams > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}
