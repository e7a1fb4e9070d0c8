package mcpserver

import (
	"container/list"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// NewHTTPServer returns the http.Server of an MCP endpoint that serves h,
// and the listener to serve it on: lis within limits' connection bounds.
// Publisher.Serve uses it for agentctl's endpoints, and the orchestrator's
// hosted endpoint for its shared listener.
//
// The server reads a request's headers within HeaderTimeout (a TLS
// handshake included) and closes a kept-alive connection idle for
// IdleTimeout. The listener holds at most MaxConns connections, counted in
// two kinds: a connection is unauthenticated from its accept until a
// request on it passes an Endpoint's bearer check, and authenticated from
// then on. At the bound, a new connection closes an unauthenticated one to
// make room, and waits to be accepted only when all MaxConns are
// authenticated (until one closes). The connection closed is the oldest of
// the remote address (an IPv6 /64) holding the most unauthenticated ones.
// So a slow-header client (slowloris) holding every place delays no client
// that sends its headers promptly, cannot push out a slow client of
// another address before its own, and takes no authenticated client's
// place. It is reset rather than closed, so that the endpoint keeps no
// TIME_WAIT socket of it.
func NewHTTPServer(h http.Handler, lis net.Listener, limits Limits, log *slog.Logger) (*http.Server, net.Listener) {
	limits = limits.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &connGate{Listener: lis, max: limits.MaxConns, flag: limits.FlagPrefix + "max-conns", log: log,
		conns: map[net.Conn]*gatedConn{}, sources: map[netip.Addr]*source{}}
	g.cond = sync.NewCond(&g.mu)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: limits.HeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		ConnState:         g.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, gateKey{}, gateRef{g, c})
		},
	}
	return srv, g
}

// authenticated marks the connection of a request that passed the bearer
// check: the connection gate no longer closes it to make room. A request
// not served through NewHTTPServer is left as it is.
func authenticated(ctx context.Context) {
	if ref, ok := ctx.Value(gateKey{}).(gateRef); ok {
		ref.gate.authenticated(ref.conn)
	}
}

type gateKey struct{}

type gateRef struct {
	gate *connGate
	conn net.Conn
}

// connGate is the listener of NewHTTPServer. Connections are tracked by
// identity, not wrapped: net/http must see a *tls.Conn as one (to run its
// handshake within the header timeout, and for ALPN).
type connGate struct {
	net.Listener
	max  int
	flag string
	log  *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond // broadcast when a place is freed or the gate closes
	closed  bool
	seq     uint64
	conns   map[net.Conn]*gatedConn // every connection accepted and not yet closed
	sources map[netip.Addr]*source  // the sources of unauthenticated connections
	evicted int                     // connections closed to make room since the last log
	logged  time.Time
}

// gatedConn is a connection of a gate.
type gatedConn struct {
	conn net.Conn
	seq  uint64        // accept order
	src  *source       // nil once authenticated
	el   *list.Element // in src.pending
}

// source is a remote address's unauthenticated connections, oldest first.
type source struct {
	addr    netip.Addr
	pending list.List // of *gatedConn
}

// Accept waits until a place is free or can be freed, accepts a
// connection, and makes room for it.
func (g *connGate) Accept() (net.Conn, error) {
	g.mu.Lock()
	err := g.awaitRoomLocked()
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	// The unauthenticated connection counted on may have been authenticated
	// (or the gate closed) meanwhile.
	if err := g.awaitRoomLocked(); err != nil {
		g.mu.Unlock()
		_ = c.Close()
		return nil, err
	}
	var victim net.Conn
	if len(g.conns) >= g.max {
		victim = g.evictLocked()
	}
	g.seq++
	gc := &gatedConn{conn: c, seq: g.seq}
	g.conns[c] = gc
	key := sourceOf(c.RemoteAddr())
	src := g.sources[key]
	if src == nil {
		src = &source{addr: key}
		g.sources[key] = src
	}
	gc.src, gc.el = src, src.pending.PushBack(gc)
	var report int
	if victim != nil && time.Since(g.logged) >= evictionLogEvery {
		report, g.evicted, g.logged = g.evicted, 0, time.Now()
	}
	g.mu.Unlock()
	if victim != nil {
		reset(victim)
	}
	if report > 0 {
		g.log.Warn("closed MCP connections that had not authenticated, to make room: the endpoint is at its connection bound",
			"closed", report, "max_conns", g.max, "flag", g.flag)
	}
	return c, nil
}

// evictionLogEvery bounds the log of connections closed to make room to
// one line a minute (with their count), however fast they come.
const evictionLogEvery = time.Minute

// awaitRoomLocked waits until fewer than max connections are open or one
// of them is unauthenticated, or the gate closes.
func (g *connGate) awaitRoomLocked() error {
	for !g.closed && len(g.conns) >= g.max && len(g.sources) == 0 {
		g.cond.Wait()
	}
	if g.closed {
		return net.ErrClosed
	}
	return nil
}

// evictLocked forgets, and returns for closing, the oldest unauthenticated
// connection of the source holding the most (of equal ones, the source
// whose oldest is oldest). There is one: awaitRoomLocked saw to it.
func (g *connGate) evictLocked() net.Conn {
	var worst *source
	for _, s := range g.sources {
		if worst == nil || s.pending.Len() > worst.pending.Len() ||
			s.pending.Len() == worst.pending.Len() && s.pending.Front().Value.(*gatedConn).seq < worst.pending.Front().Value.(*gatedConn).seq {
			worst = s
		}
	}
	gc := worst.pending.Front().Value.(*gatedConn)
	g.forgetLocked(gc)
	g.evicted++
	return gc.conn
}

// forgetLocked stops counting gc.
func (g *connGate) forgetLocked(gc *gatedConn) {
	delete(g.conns, gc.conn)
	g.unpendLocked(gc)
	g.cond.Broadcast()
}

// unpendLocked removes gc from its source's unauthenticated connections.
func (g *connGate) unpendLocked(gc *gatedConn) {
	if gc.src == nil {
		return
	}
	gc.src.pending.Remove(gc.el)
	if gc.src.pending.Len() == 0 {
		delete(g.sources, gc.src.addr)
	}
	gc.src, gc.el = nil, nil
}

func (g *connGate) authenticated(c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc := g.conns[c]; gc != nil && gc.src != nil {
		g.unpendLocked(gc)
	}
}

// connState frees a connection's place once net/http is done with it.
// A hijacked connection is no longer the server's to bound (an MCP
// endpoint hijacks none).
func (g *connGate) connState(c net.Conn, state http.ConnState) {
	if state != http.StateClosed && state != http.StateHijacked {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc := g.conns[c]; gc != nil {
		g.forgetLocked(gc)
	}
}

// Close closes the listener and wakes an Accept waiting for room.
func (g *connGate) Close() error {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
	return g.Listener.Close()
}

// sourceOf is the source a connection is counted under: its remote IP
// address, or its /64 for IPv6 (what one host is commonly given).
func sourceOf(a net.Addr) netip.Addr {
	var ip netip.Addr
	if t, ok := a.(*net.TCPAddr); ok {
		ip = t.AddrPort().Addr()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// reset closes a connection closed to make room: its client sent no
// authenticated request, so no TLS close_notify is owed it, and a reset
// leaves no TIME_WAIT socket behind.
func reset(c net.Conn) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.SetLinger(0)
	}
	_ = c.Close()
}
