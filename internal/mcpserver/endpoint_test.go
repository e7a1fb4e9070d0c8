package mcpserver_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

const testToken = "endpoint-test-token"

// serveEndpoint serves p on a loopback port within limits, behind
// testToken, and returns the endpoint's URL.
func serveEndpoint(t testing.TB, p *mcpserver.Publisher, limits mcpserver.Limits) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != testToken {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "test"}, nil
	}
	e := p.Serve(lis, verify, limits)
	t.Cleanup(e.Close)
	return "http://" + lis.Addr().String() + mcpserver.Path
}

// TestKeepAliveSparesModernSubscriptions: with a keepalive running, a
// 2025-11-25 client (a stateful session holding a notification stream) is
// pinged, and a 2026-07-28 client's subscriptions/listen stream outlives
// several intervals. go-sdk's own KeepAlive pinged the stateless session
// too and closed it on the failed ping, so list_changed stopped one
// interval after connecting.
func TestKeepAliveSparesModernSubscriptions(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{KeepAlive: interval})

	modern := mcptest.Connect(t, mcptest.HTTP(url, testToken), "2026-07-28")
	toggle := []*registry.Registry{build("gitlab"), build("github")}
	modern.Subscribe(t, func() { p.Publish(toggle[0]); toggle[0], toggle[1] = toggle[1], toggle[0] })

	pings := make(chan struct{}, 100)
	old := mcp.NewClient(&mcp.Implementation{Name: "old", Version: "1"}, nil)
	old.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" {
				pings <- struct{}{}
			}
			return next(ctx, method, req)
		}
	})
	cs, err := old.Connect(context.Background(), mcptest.HTTP(url, testToken), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Bounded: with the SDK's keepalive, this Close never returned.
		closed := make(chan struct{})
		go func() { _ = cs.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Error("closing the 2025-11-25 client hung")
		}
	})
	for i := range 4 {
		select {
		case <-pings:
		case <-time.After(10 * time.Second):
			t.Fatalf("the stateful session got %d keepalive pings, want 4", i)
		}
	}

	require.True(t, p.Publish(build("github", "gitlab")))
	modern.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("github", "gitlab"), modern.Names(t))
}

// TestSessionLimitRefusesWithAClearErrorAndIdleSessionsAreReaped: an
// initialize beyond MaxSessions gets a JSON-RPC error that names the
// limit and its flag; sessions that hold no stream are closed together
// once idle, which frees their places, while a session holding its
// notification stream is kept.
func TestSessionLimitRefusesWithAClearErrorAndIdleSessionsAreReaped(t *testing.T) {
	t.Parallel()
	const idle = 300 * time.Millisecond
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{MaxSessions: 3, SessionIdle: idle})

	live := mcptest.Connect(t, mcptest.HTTP(url, testToken), "2025-11-25") // holds its GET stream
	quiet := make([]*mcp.ClientSession, 2)
	for i := range quiet {
		tr := mcptest.HTTP(url, testToken)
		tr.DisableStandaloneSSE = true // no stream: idle between requests
		var err error
		quiet[i], err = mcp.NewClient(&mcp.Implementation{Name: "quiet", Version: "1"}, nil).
			Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = quiet[i].Close() })
	}

	// Within the idle bound, the fourth is refused.
	_, err := mcp.NewClient(&mcp.Implementation{Name: "fourth", Version: "1"}, nil).
		Connect(context.Background(), mcptest.HTTP(url, testToken), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mcp_session_limit: this MCP endpoint already holds 3 sessions, its limit (agentctl serve --mcp-max-sessions)")

	// The quiet ones are closed together once idle, which frees their
	// places (polled with initializes: a request of theirs would make them
	// busy); the live one is kept and still notified.
	var again *mcp.ClientSession
	require.Eventually(t, func() bool {
		again, err = mcp.NewClient(&mcp.Implementation{Name: "again", Version: "1"}, nil).
			Connect(context.Background(), mcptest.HTTP(url, testToken), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		return err == nil
	}, 10*time.Second, idle/4, "idle sessions free their places")
	t.Cleanup(func() { _ = again.Close() })
	for i, q := range quiet {
		_, err := q.ListTools(context.Background(), nil)
		assert.Error(t, err, "idle session %d is closed", i)
	}
	require.True(t, p.Publish(build("gitlab")))
	live.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("gitlab"), live.Names(t))
}
