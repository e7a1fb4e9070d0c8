package hosted_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/hosted"
)

// openSlow opens a connection to addr that starts a request to path, a
// byte at a time, and never ends its headers.
func openSlow(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, b := range []byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
		_, err := c.Write([]byte{b})
		require.NoError(t, err)
	}
	return c
}

// closedByServer reports, without waiting, whether the server has closed
// c, which it never answers: anything to read is its closing.
func closedByServer(t *testing.T, c net.Conn) bool {
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
func awaitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(mcptest.Hang)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server never closed the connection")
}

// TestSlowHeadersGiveWayToClients replays the slowloris attack reported
// against the hosted endpoint: 600 connections (over the default
// --hosted-max-conns, 512) sending a session's request headers byte by
// byte and never ending them made a real initialize wait up to 7 s, for
// a header timeout to free a place. With a header timeout none of them
// reaches, a client initializes and lists its session's tools while the
// newest still hold their places: the oldest were closed to make room.
func TestSlowHeadersGiveWayToClients(t *testing.T) {
	const slowloris = 600
	x, _ := serve(t, mcpserver.Limits{HeaderTimeout: time.Hour}) // only making room frees a place
	s := launch(t, x, "slow", executors.ModeTask, "github")
	addr, path := strings.TrimPrefix(x.Base(), "http://"), strings.TrimPrefix(s.url, x.Base())
	conns := make([]net.Conn, slowloris)
	for i := range conns {
		conns[i] = openSlow(t, addr, path)
	}

	c := mcptest.Connect(t, mcptest.HTTP(s.url, s.token), "2025-11-25")
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))

	// Accepted in the order dialed, all before the client's connections.
	for _, c := range conns[:slowloris-mcpserver.DefaultMaxConns] {
		awaitClosed(t, c)
	}
	open := 0
	for _, c := range conns[slowloris-400:] {
		if !closedByServer(t, c) {
			open++
		}
	}
	assert.Equal(t, 400, open, "the newest slow connections are still open")
}

// TestTLSClientsGetHTTP2: over TLS (toolscope serve --hosted with
// --tls-cert, whose listener offers h2), a client that offers h2, as Go's
// default transport does, is served over HTTP/2; at the bound, a
// connection that never starts its TLS handshake gives way to it, and its
// connection, authenticated, does not give way to a later one. The
// endpoint's listener hands net/http the TLS connection itself: wrapped,
// as it was by netutil.LimitListener, net/http spoke HTTP/1.1 on a
// connection whose ALPN had agreed on h2, and every such client failed
// ("http2: frame too large").
func TestTLSClientsGetHTTP2(t *testing.T) {
	ca, err := pki.NewCA("hosted test CA", time.Hour)
	require.NoError(t, err)
	pair, err := ca.IssueServer("hosted", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM))

	x := hosted.New(hosted.Options{Calls: (&calls{}).handle, Limits: mcpserver.Limits{MaxConns: 1, HeaderTimeout: time.Hour}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// As serveHosted configures it.
	x.Serve(tls.NewListener(lis, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}),
		"https://"+lis.Addr().String())
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	s := launch(t, x, "tls", executors.ModeTask, "github")

	silent, err := net.Dial("tcp", lis.Addr().String()) // no ClientHello
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	rec := &protoRecorder{next: tr, protos: make(chan string, 64)}
	c := mcptest.Connect(t, &mcp.StreamableClientTransport{Endpoint: s.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: mcptest.Bearer(s.token, rec)}}, "2025-11-25")
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))
	assert.Equal(t, "HTTP/2.0", <-rec.protos)
	awaitClosed(t, silent)

	// The client's connection is authenticated by its requests over
	// HTTP/2 too: a later connection waits for the place instead of
	// taking it (had it been taken, the next request's new connection
	// would have taken the place back from it).
	later, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = later.Close() })
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))
	assert.False(t, closedByServer(t, later))
}

// protoRecorder records the protocol of the responses it passes on.
type protoRecorder struct {
	next   *http.Transport
	protos chan string
}

func (p *protoRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(r)
	if err == nil {
		select {
		case p.protos <- resp.Proto:
		default:
		}
	}
	return resp, err
}

func (p *protoRecorder) CloseIdleConnections() { p.next.CloseIdleConnections() }
