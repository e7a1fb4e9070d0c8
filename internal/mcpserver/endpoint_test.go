package mcpserver_test

import (
	"context"
	"net"
	"net/http"
	"sync"
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
// several keepalive rounds. go-sdk's own KeepAlive pinged the stateless
// session too and closed it on the failed ping, so list_changed stopped one
// interval after connecting.
//
// The rounds are counted by events, whatever the scheduling: one fresh
// 2025-11-25 session after another, each waiting for its first ping. A
// ping is received whether or not its answer then arrives within half an
// interval (on a starved machine it may not, and the endpoint rightly
// closes that session, even before the client's Connect returns), and each
// session connects after the previous one was pinged, so every ping is of
// a later round than the one before. A session closed before its ping was
// seen is replaced, and counted.
func TestKeepAliveSparesModernSubscriptions(t *testing.T) {
	t.Parallel()
	const (
		interval = 50 * time.Millisecond
		rounds   = 4
		hang     = time.Minute // only catches a hang
	)
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{KeepAlive: interval})

	modern := mcptest.Connect(t, mcptest.HTTP(url, testToken), "2026-07-28")
	toggle := []*registry.Registry{build("gitlab"), build("github")}
	modern.Subscribe(t, func() { p.Publish(toggle[0]); toggle[0], toggle[1] = toggle[1], toggle[0] })

	began := time.Now()
	deadline := time.After(hang)
	replaced := 0
	for round := 0; round < rounds; {
		pinged := make(chan struct{})
		var once sync.Once
		old := mcp.NewClient(&mcp.Implementation{Name: "old", Version: "1"}, nil)
		old.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "ping" {
					once.Do(func() { close(pinged) })
				}
				return next(ctx, method, req)
			}
		})
		cs, err := old.Connect(context.Background(), mcptest.HTTP(url, testToken), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			// Pinged while still connecting (the SDK opens the stream
			// before it sends notifications/initialized), and the answer
			// was late: the endpoint closed the session under the client.
			require.ErrorIs(t, err, mcp.ErrSessionMissing)
			select {
			case <-pinged:
				round++
			default:
				replaced++
			}
			continue
		}
		ended := make(chan struct{})
		go func() { _ = cs.Wait(); close(ended) }()
		select {
		case <-pinged:
			round++
		case <-ended:
			replaced++
		case <-deadline:
			t.Fatalf("%d stateful sessions pinged, want %d (%d closed before their ping)", round, rounds, replaced)
		}
		// Bounded: with the SDK's keepalive, this Close never returned.
		closed := make(chan struct{})
		go func() { _ = cs.Close(); close(closed) }()
		select {
		case <-closed:
		case <-deadline:
			t.Fatalf("closing stateful session %d hung", round)
		}
	}
	t.Logf("%d keepalive rounds (interval %s) in %s; %d sessions closed before their ping and replaced",
		rounds, interval, time.Since(began).Round(time.Millisecond), replaced)

	require.True(t, p.Publish(build("github", "gitlab")))
	modern.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("github", "gitlab"), modern.Names(t))
}

// TestSessionLimitRefusesWithAClearErrorAndIdleSessionsAreReaped: an
// initialize beyond MaxSessions gets a JSON-RPC error that names the
// limit and its flag; sessions that hold no stream are closed
// once idle, which frees their places, while a session holding its
// notification stream is kept.
func TestSessionLimitRefusesWithAClearErrorAndIdleSessionsAreReaped(t *testing.T) {
	t.Parallel()
	// Not shorter: a session is idle from its initialize until its next
	// request, and at 300 ms a loaded machine let a client's
	// notifications/initialized come too late (its Connect then failed
	// with "session not found").
	const idle = 5 * time.Second
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

	// The quiet ones are closed once idle, which frees their places
	// (polled with initializes: a request of theirs would make them busy).
	// Each is closed by the first sweep after its own idle bound, so the
	// two may go in different sweeps: wait for both places, not for one.
	var again []*mcp.ClientSession
	require.Eventually(t, func() bool {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "again", Version: "1"}, nil).
			Connect(context.Background(), mcptest.HTTP(url, testToken), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			again = append(again, cs)
			t.Cleanup(func() { _ = cs.Close() })
		}
		return len(again) == len(quiet)
	}, idle+mcptest.Hang, idle/20, "idle sessions free their places")
	for i, q := range quiet {
		_, err := q.ListTools(context.Background(), nil)
		assert.Error(t, err, "idle session %d is closed", i)
	}
	require.True(t, p.Publish(build("gitlab")))
	live.WaitChanged(t)
	assert.Equal(t, toolapi.Surface("gitlab"), live.Names(t))
}
