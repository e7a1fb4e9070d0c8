package hosted_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/hosted"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

// calls records the calls the endpoint hands to the orchestrator and
// answers each with the identity it was given.
type calls struct {
	mu   sync.Mutex
	seen []executors.ToolCall
}

func (c *calls) handle(_ context.Context, call executors.ToolCall) executors.ToolResult {
	c.mu.Lock()
	c.seen = append(c.seen, call)
	c.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"session_id": call.SessionID, "task_id": call.TaskID})
	return executors.ToolResult{Text: "ok", Structured: b}
}

func serve(t *testing.T, limits mcpserver.Limits) (*hosted.Executor, *calls) {
	t.Helper()
	c := &calls{}
	x := hosted.New(hosted.Options{Calls: c.handle, Limits: limits})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	x.Serve(lis, "http://"+lis.Addr().String())
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	return x, c
}

type launched struct {
	h     executors.Handle
	url   string
	token string
}

func launch(t *testing.T, x *hosted.Executor, id string, mode executors.Mode, set ...string) launched {
	t.Helper()
	h, st, err := x.Launch(context.Background(), executors.Spec{SessionID: id, TaskID: "task_" + id, Mode: mode,
		Providers: providers.Of(set...), Generation: 1}, nil)
	require.NoError(t, err)
	require.NotEmpty(t, st.MCPToken)
	assert.NotContains(t, string(h.State), st.MCPToken, "the handle keeps the token's hash, never the token")
	return launched{h: h, url: st.MCPURL, token: st.MCPToken}
}

// TestHostedSurfaceFollowsPushes: a hosted session serves the tool table's
// surface for its provider set, and each push through the in-process
// Agentctl (the reconciler's path) gives its clients exactly one
// list_changed, at every protocol version; a stale push none.
func TestHostedSurfaceFollowsPushes(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{})
	for _, v := range mcptest.ProtocolVersions {
		t.Run(mcptest.VersionName(v), func(t *testing.T) {
			id := "s" + strings.ReplaceAll(mcptest.VersionName(v), "-", "")
			s := launch(t, x, id, executors.ModeTask, "github")
			ep, err := x.Endpoint(s.h)
			require.NoError(t, err)
			c := mcptest.Connect(t, mcptest.HTTP(s.url, s.token), v)
			assert.Equal(t, mcptest.Expected(v), c.Negotiated())
			assert.Equal(t, toolapi.Surface("github"), c.Names(t))

			gen := uint64(1)
			push := func(set ...string) executors.PushResult {
				gen++
				res, err := ep.Agentctl.ApplySurface(context.Background(), id, executors.Surface{Providers: providers.Of(set...), Generation: gen})
				require.NoError(t, err)
				return res
			}
			toggle := [][]string{{"gitlab"}, {"github"}}
			i := 0
			c.Subscribe(t, func() { push(toggle[i%2]...); i++ })
			// Push to notification, measured over toggles (each a change).
			var took []time.Duration
			for range 10 {
				start := time.Now()
				push(toggle[i%2]...)
				i++
				c.WaitChanged(t)
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			testutil.Figure(t, "hosted push to list_changed ("+mcptest.VersionName(v)+")", "median %s, max %s over %d pushes (the publisher's 25 ms interval and the SDK's 10 ms debounce included)",
				took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
			res := push("github", "gitlab")
			assert.True(t, res.ToolsChanged)
			c.WaitChanged(t)
			c.ExpectNone(t, "one push, one notification")
			assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))

			stale, err := ep.Agentctl.ApplySurface(context.Background(), id, executors.Surface{Providers: providers.Of(), Generation: 1})
			require.NoError(t, err)
			assert.False(t, stale.Accepted)
			c.ExpectNone(t, "a stale push changes nothing")

			_, err = ep.Agentctl.ApplySurface(context.Background(), id, executors.Surface{Mode: executors.ModePlan, Generation: gen + 1})
			assert.ErrorIs(t, err, errdefs.ErrInvalidArgument, "the mode is fixed at launch")
		})
	}
}

// TestPlanModeServesReadOnlyTools: a plan-mode session's surface holds
// only the table's read-only tools.
func TestPlanModeServesReadOnlyTools(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{})
	s := launch(t, x, "plan", executors.ModePlan, "github", "gitlab")
	c := mcptest.Connect(t, mcptest.HTTP(s.url, s.token), "2025-11-25")
	names := c.Names(t)
	require.NotEmpty(t, names)
	for _, n := range names {
		tool, ok := toolapi.Lookup(n)
		require.True(t, ok, n)
		assert.True(t, tool.ReadOnly, "plan mode lists %s, which changes things", n)
	}
	assert.NotContains(t, names, toolapi.AddSourcesTool)
}

// TestCallsCarryTheTokensSession: a call is handed to the orchestrator
// with the session the token proved and its task, on the link (nothing
// the client sends can name another session).
func TestCallsCarryTheTokensSession(t *testing.T) {
	x, c := serve(t, mcpserver.Limits{})
	a := launch(t, x, "a", executors.ModeTask)
	launch(t, x, "b", executors.ModeTask)
	cl := mcptest.Connect(t, mcptest.HTTP(a.url, a.token), "")
	res, err := cl.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.TaskInfoTool,
		Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.seen, 1)
	assert.Equal(t, "a", c.seen[0].SessionID)
	assert.Equal(t, "task_a", c.seen[0].TaskID)
	assert.True(t, c.seen[0].OnLink)
	assert.Equal(t, toolapi.TaskInfoTool, c.seen[0].Tool)
}

// refusal is what a refused request was answered.
type refusal struct {
	status int
	body   string
	close  bool
	auth   string
}

func request(t *testing.T, url, token string) refusal {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return refusal{status: resp.StatusCode, body: string(b), close: resp.Close, auth: resp.Header.Get("WWW-Authenticate")}
}

// TestAttackersAreRefusedAlike: no token, a wrong token, another
// session's token, a stopped session's token (a replay) and a session
// that does not exist are all answered 401 with the same words, the
// connection closed: nothing tells whether the session exists.
func TestAttackersAreRefusedAlike(t *testing.T) {
	x, c := serve(t, mcpserver.Limits{})
	a := launch(t, x, "a", executors.ModeTask, "github")
	b := launch(t, x, "b", executors.ModeTask, "github")
	gone := launch(t, x, "gone", executors.ModeTask, "github")
	// The stopped session's token worked before it stopped.
	assert.Equal(t, http.StatusOK, request(t, gone.url, gone.token).status)
	require.NoError(t, x.Stop(context.Background(), gone.h))
	unknown := strings.Replace(a.url, "/sessions/a/", "/sessions/nope/", 1)

	invalid := refusal{status: http.StatusUnauthorized, body: "invalid token\n", close: true}
	for name, got := range map[string]refusal{
		"wrong token":             request(t, a.url, "tsh_"+strings.Repeat("0", 64)),
		"another session's token": request(t, a.url, b.token),
		"a stopped session's":     request(t, gone.url, gone.token),
		"an unknown session":      request(t, unknown, a.token),
		"an unknown, no token":    request(t, unknown, ""),
	} {
		if name == "an unknown, no token" {
			assert.Equal(t, refusal{status: http.StatusUnauthorized, body: "no bearer token\n", close: true}, got, name)
			continue
		}
		assert.Equal(t, invalid, got, name)
	}
	assert.Equal(t, refusal{status: http.StatusUnauthorized, body: "no bearer token\n", close: true}, request(t, a.url, ""))
	assert.Equal(t, http.StatusOK, request(t, a.url, a.token).status, "the session's own token works")
	c.mu.Lock()
	assert.Empty(t, c.seen, "no refused request reached the orchestrator")
	c.mu.Unlock()
}

// TestBoundsAreTheEndpoints: a body over --hosted-body-max-bytes is
// answered 413 naming the bound, and MCP sessions beyond
// --hosted-max-sessions are refused naming that flag.
func TestBoundsAreTheEndpoints(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{MaxBodyBytes: 512, MaxSessions: 1})
	s := launch(t, x, "b", executors.ModeTask)
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","pad":"`+strings.Repeat("x", 600)+`"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, string(body), "over 512 bytes")

	mcptest.Connect(t, mcptest.HTTP(s.url, s.token), "2025-11-25")
	client := mcp.NewClient(&mcp.Implementation{Name: "second"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.Connect(ctx, mcptest.HTTP(s.url, s.token), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mcp_session_limit")
	assert.Contains(t, err.Error(), "toolscope serve --hosted-max-sessions")
}

// TestAHostedSessionRunsNoAgent: a launch with an agent is refused, and a
// restarted orchestrator's hosted sessions are lost (they lived in the
// process that served them).
func TestAHostedSessionRunsNoAgent(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{})
	_, _, err := x.Launch(context.Background(), executors.Spec{SessionID: "x", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{"claude"}}}, nil)
	assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)

	s := launch(t, x, "r", executors.ModeTask)
	assert.NoError(t, x.Reattach(context.Background(), s.h))
	restarted, _ := serve(t, mcpserver.Limits{})
	assert.ErrorIs(t, restarted.Reattach(context.Background(), s.h), executors.ErrLost)
}

// TestTypeScriptSDKClientInterop runs the interop case agentctl's
// endpoint passes with the official TypeScript SDK client against a hosted
// session: it lists the tools, and receives list_changed on each push,
// once.
func TestTypeScriptSDKClientInterop(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{})
	s := launch(t, x, "ts", executors.ModeTask, "github")
	ep, err := x.Endpoint(s.h)
	require.NoError(t, err)
	gen := uint64(1)
	push := func(set ...string) {
		gen++
		_, err := ep.Agentctl.ApplySurface(context.Background(), "ts", executors.Surface{Providers: providers.Of(set...), Generation: gen})
		require.NoError(t, err)
	}
	ts := mcptest.RunTSClient(t, nil, "http", s.url, s.token)
	ready, ok := ts.Next(t, 60*time.Second)
	require.True(t, ok, "no ready line from the TypeScript client")
	require.Equal(t, "ready", ready.Event)
	if ready.Protocol != nil {
		t.Logf("TypeScript client negotiated %s with the hosted endpoint", *ready.Protocol)
	}
	// A 2025 client is offered call_tool until it is seen re-listing
	// (ADR 0019); its re-lists below no longer hold it.
	assert.Equal(t, append([]string{toolapi.CallTool}, toolapi.Surface("github")...), ready.Names)

	// The client opens its notification stream after connecting; toggle
	// until it reports a change.
	toggle := [][]string{{"gitlab"}, {"github"}}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		require.True(t, time.Now().Before(deadline), "the TypeScript client never received list_changed")
		push(toggle[i%2]...)
		if e, ok := ts.Next(t, 500*time.Millisecond); ok {
			require.Equal(t, "changed", e.Event)
			break
		}
	}
	push("gitlab", "github")
	want := toolapi.Surface("github", "gitlab")
	for {
		e, ok := ts.Next(t, 10*time.Second)
		require.True(t, ok, "no list_changed after the push")
		if assert.ObjectsAreEqual(want, e.Names) {
			break
		}
	}
	_, extra := ts.Next(t, mcptest.Quiet)
	assert.False(t, extra, "one push, one notification")
	ts.Stop()
}

// TestTimeoutsAreTheFlags: the shared listener cuts a request whose
// headers do not arrive (--hosted-header-timeout) and a kept-alive
// connection left idle (--hosted-idle-timeout); a session's endpoint
// answers 408 to a body that does not arrive (--hosted-body-timeout),
// naming the hosted flag.
func TestTimeoutsAreTheFlags(t *testing.T) {
	const bound = 300 * time.Millisecond
	x, _ := serve(t, mcpserver.Limits{HeaderTimeout: bound, IdleTimeout: bound, BodyTimeout: bound})
	s := launch(t, x, "t", executors.ModeTask)
	addr := strings.TrimPrefix(x.Base(), "http://")
	path := strings.TrimPrefix(s.url, x.Base())
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		return c
	}
	// closedWithin reads until the server closes c, and how long it took.
	closedWithin := func(c net.Conn, start time.Time) (string, time.Duration) {
		b, _ := io.ReadAll(c)
		return string(b), time.Since(start)
	}

	// The server's clock for the headers starts when it accepts the
	// connection, which may be before Dial returns here: the lower bound
	// is measured from before the dial.
	start := time.Now()
	c := dial()
	_, err := c.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	_, took := closedWithin(c, start)
	assert.Less(t, took, 5*time.Second, "headers that never end are cut")
	assert.GreaterOrEqual(t, took, bound)

	c = dial()
	start = time.Now()
	_, err = c.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.token +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\""))
	require.NoError(t, err)
	answer, took := closedWithin(c, start)
	assert.Contains(t, answer, "408")
	assert.Contains(t, answer, "toolscope serve --hosted-body-timeout")
	assert.Less(t, took, 5*time.Second)

	c = dial()
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	_, err = c.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.token +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	require.NoError(t, err)
	start = time.Now()
	answer, took = closedWithin(c, start)
	assert.Contains(t, answer, "HTTP/1.1 ")
	assert.Less(t, took, 5*time.Second, "an idle kept-alive connection is closed")
}

// TestConnectionsAreBounded: beyond --hosted-max-conns, all sessions
// together, a connection that no request has authenticated (its headers
// still coming) gives way to a new one at once, and a new connection waits
// to be accepted while every place is held by an authenticated connection,
// until one closes.
func TestConnectionsAreBounded(t *testing.T) {
	x, _ := serve(t, mcpserver.Limits{MaxConns: 1, HeaderTimeout: time.Hour})
	s := launch(t, x, "c", executors.ModeTask)
	slow := openSlow(t, strings.TrimPrefix(x.Base(), "http://"), strings.TrimPrefix(s.url, x.Base()))

	// This client's connection takes the slow one's place, and is kept
	// alive, authenticated.
	held := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: mcptest.Hang}
	defer held.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := held.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	awaitClosed(t, slow)

	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			answered <- -1
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("a second connection was served (%d) while the one allowed was held", code)
	case <-time.After(mcptest.Quiet):
	}
	held.CloseIdleConnections()
	select {
	case code := <-answered:
		assert.Positive(t, code, "served once the held connection closed")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was never served")
	}
}

// TestIdleMCPSessionsMakeRoom: with --hosted-max-sessions 1, a second
// initialize is refused while the first session is in use, and accepted
// once the first has been idle for --hosted-session-idle.
func TestIdleMCPSessionsMakeRoom(t *testing.T) {
	// Long enough that the first session is still in use, on a loaded
	// machine, when the second initialize arrives.
	const idle = 2 * time.Second
	x, _ := serve(t, mcpserver.Limits{MaxSessions: 1, SessionIdle: idle})
	s := launch(t, x, "i", executors.ModeTask)
	first := request(t, s.url, s.token)
	require.Equal(t, http.StatusOK, first.status, first.body)
	second := request(t, s.url, s.token)
	assert.Contains(t, second.body, "mcp_session_limit")
	assert.Contains(t, second.body, "toolscope serve --hosted-session-idle")
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(idle / 4) // waiting on the bound itself: no event marks a session idle
		if r := request(t, s.url, s.token); r.status == http.StatusOK && !strings.Contains(r.body, "mcp_session_limit") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the idle session never made room")
	}
}
