package mcpserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// slowloris is the attack reported against the hosted endpoint: 600
// connections, over the default bound of 512, each sending its headers
// byte by byte and never ending them.
const slowloris = 600

// openSlow opens a connection from d to addr that starts a request to
// path, a byte at a time, and never ends its headers.
func openSlow(t testing.TB, d *net.Dialer, addr, path string) net.Conn {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range []byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
		_, err := c.Write([]byte{b})
		require.NoError(t, err)
	}
	return c
}

// closedByServer reports, without waiting, whether the server has closed
// c: it never answers a connection whose headers do not end, so anything
// to read (an end of stream, a reset) is its closing.
func closedByServer(t testing.TB, c net.Conn) bool {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var recvErr error
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		_, _, recvErr = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}))
	return !errors.Is(recvErr, syscall.EAGAIN)
}

// awaitClosed waits for the server to close c; the deadline only catches
// a hang.
func awaitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(mcptest.Hang)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server never closed the connection")
}

// TestSlowHeadersGiveWayToClients replays the slowloris attack reported
// against the hosted endpoint (where a real initialize then waited up to
// 7 s for a slow connection's header timeout to free a place): with the
// default bound of connections and a header timeout no slow connection
// reaches, a client that connects after 600 slow-header connections
// initializes and lists its tools while the newest of them still hold
// their places. The places were made by closing the oldest slow ones, and
// none was taken from a client whose requests had authenticated its
// connections before the attack: it still gets list_changed and lists
// its tools, on the connections it had.
func TestSlowHeadersGiveWayToClients(t *testing.T) {
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{HeaderTimeout: time.Hour}) // only making room frees a place
	addr := strings.TrimPrefix(strings.TrimSuffix(url, mcpserver.Path), "http://")

	// A client from before the attack, whose connections are counted.
	var dials atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	early := mcptest.ConnectCounting(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: mcptest.Bearer(testToken, tr)}}, "2025-11-25")
	surface := []string{"github"}
	early.Subscribe(t, func() { // its notification stream is up
		surface = map[string][]string{"github": {"gitlab"}, "gitlab": {"github"}}[surface[0]]
		p.Publish(build(surface...))
	})
	assert.Equal(t, toolapi.Surface(surface...), early.Names(t))
	dialed := dials.Load()

	conns := make([]net.Conn, slowloris)
	for i := range conns {
		conns[i] = openSlow(t, &net.Dialer{}, addr, mcpserver.Path)
	}

	fresh := mcptest.Connect(t, mcptest.HTTP(url, testToken), "2025-11-25")
	assert.Equal(t, toolapi.Surface(surface...), fresh.Names(t))

	// The kernel queues connections in the order they were dialed, and the
	// server accepted all of them before the fresh client's: the oldest
	// were closed to make room...
	for _, c := range conns[:slowloris-mcpserver.DefaultMaxConns] {
		awaitClosed(t, c)
	}
	// ...and the newest still hold their places: the client was served
	// beside them, not after they timed out.
	open := 0
	for _, c := range conns[slowloris-400:] {
		if !closedByServer(t, c) {
			open++
		}
	}
	assert.Equal(t, 400, open, "the newest slow connections are still open")

	require.True(t, p.Publish(build("github", "gitlab")))
	early.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("github", "gitlab"), early.Names(t))
	assert.Equal(t, dialed, dials.Load(), "the early client's authenticated connections were not closed to make room")
}

// TestSlowHeadersOfOneAddressSpareAnother: at the bound, the connection
// closed to make room is the oldest of the remote address holding the
// most that have not authenticated, so an attacker's connections from one
// address do not push out a slow client's from another, though it is the
// oldest of all.
func TestSlowHeadersOfOneAddressSpareAnother(t *testing.T) {
	t.Parallel()
	const bound = 8
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{HeaderTimeout: time.Hour, MaxConns: bound})
	addr := strings.TrimPrefix(strings.TrimSuffix(url, mcpserver.Path), "http://")

	other := openSlow(t, &net.Dialer{}, addr, mcpserver.Path) // from 127.0.0.1
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	probe, err := attacker.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	conns := []net.Conn{probe}
	t.Cleanup(func() { _ = probe.Close() })
	for len(conns) < 3*bound {
		conns = append(conns, openSlow(t, attacker, addr, mcpserver.Path))
	}
	// other and bound-1 of the attacker's fill the bound: each later one
	// closed the attacker's oldest. (Had other been closed instead, it
	// would have been the first, and all but the last of these closed.)
	kept := len(conns) - (bound - 1)
	for _, c := range conns[:kept-1] {
		awaitClosed(t, c)
	}
	require.False(t, closedByServer(t, other), "another address's connection was closed to make room")
	awaitClosed(t, conns[kept-1])
	for i, c := range conns[kept:] {
		assert.False(t, closedByServer(t, c), "the attacker's connection %d of the newest", i)
	}
}
