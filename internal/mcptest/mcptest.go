// Package mcptest holds helpers for tests that drive toolscope's MCP
// servers with real go-sdk clients over real transports: connect at a given
// protocol version, count notifications/tools/list_changed, and wait for
// them with deadlines instead of sleeps.
package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// ProtocolVersions are the MCP versions every server must serve; "" is
// the go-sdk client's default (2026-07-28: discover plus listen).
var ProtocolVersions = []string{"2025-06-18", "2025-11-25", ""}

// VersionName names a protocol version for subtests.
func VersionName(v string) string {
	if v == "" {
		return "default"
	}
	return v
}

// Client is a connected client session that counts list_changed
// notifications.
type Client struct {
	Session *mcp.ClientSession
	changed chan struct{}
	logs    chan string

	mu       sync.Mutex
	arrivals []time.Time
}

// Connect connects a go-sdk client over transport at protocol version
// (empty: the client's default) that re-lists on every list_changed, as
// agent hosts do. The session is closed when the test ends.
func Connect(t testing.TB, transport mcp.Transport, version string) *Client {
	t.Helper()
	return connect(t, transport, version, true)
}

// ConnectCounting is Connect for a client that only counts list_changed
// and never re-lists on it: for load tests whose listing is paced by the
// test itself (the load storm's 100 clients re-listing on each of ~46,000
// notifications under -race starve the publisher's write lock).
func ConnectCounting(t testing.TB, transport mcp.Transport, version string) *Client {
	t.Helper()
	return connect(t, transport, version, false)
}

func connect(t testing.TB, transport mcp.Transport, version string, relist bool) *Client {
	t.Helper()
	c := &Client{changed: make(chan struct{}, 1024), logs: make(chan string, 1024)}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolscope-test", Version: "1"}, &mcp.ClientOptions{
		// Like the agent hosts it stands in for, it re-lists on every
		// list_changed (agentctl holds the result of a call that changed
		// the caller's own tools until its client re-listed, within a
		// bound).
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			c.mu.Lock()
			c.arrivals = append(c.arrivals, time.Now())
			c.mu.Unlock()
			c.changed <- struct{}{}
			if relist {
				go func() { _, _ = req.Session.ListTools(context.Background(), nil) }()
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			text, _ := req.Params.Data.(string)
			c.logs <- text
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (protocol %q): %v", VersionName(version), err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if tr, ok := transport.(*mcp.StreamableClientTransport); ok && tr.HTTPClient != nil {
			tr.HTTPClient.CloseIdleConnections()
		}
	})
	c.Session = cs
	return c
}

// Arrivals returns the arrival time of every list_changed notification
// received so far, in order.
func (c *Client) Arrivals() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.arrivals...)
}

// HTTP returns a streamable HTTP client transport for url, sending token
// as a bearer token when it is not empty. Each has connections of its own,
// like the agents it stands in for: clients sharing http.DefaultTransport's
// pool would send one client's request on a kept-alive connection another
// client's server just closed (seen through the Kubernetes port-forward,
// where a close arrives late: "Post …: EOF").
func HTTP(url, token string) *mcp.StreamableClientTransport {
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if token != "" {
		rt = Bearer(token, rt)
	}
	return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
}

// Bearer returns a round tripper that sends token as a bearer token on
// every request through next.
func Bearer(token string, next http.RoundTripper) http.RoundTripper {
	return bearer{token: token, next: next}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// CloseIdleConnections closes next's, for http.Client.CloseIdleConnections.
func (b bearer) CloseIdleConnections() {
	if c, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Names lists the session's tools, sorted. call_tool, which a server
// offers a client until it has seen it re-list (ADR 0019), is an entry
// point, not one of the session's tools: Names leaves it out, and
// ListsCallTool reports it.
func (c *Client) Names(t testing.TB) []string {
	names, _ := c.list(t)
	return names
}

// ListsCallTool reports whether the client's tool list holds call_tool.
func (c *Client) ListsCallTool(t testing.TB) bool {
	_, callTool := c.list(t)
	return callTool
}

func (c *Client) list(t testing.TB) (names []string, callTool bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	defer cancel()
	res, err := c.Session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names = make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		if tool.Name == toolapi.CallTool {
			callTool = true
			continue
		}
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names, callTool
}

// Subscribe makes sure the client's list_changed subscription is live:
// 2026-07-28 clients subscribe asynchronously after connecting. It calls
// change until a notification arrives (each call must change the tool
// list), then drains the count. It returns how many calls it took.
//
// A change is repeated only when no notification came within
// resubscribeAfter (normally one arrives in milliseconds; a change made
// before the stream was up is never notified). A repeated change is
// notified too, possibly after the first notification (a loaded machine
// delayed one past the old 500 ms repeat, and a test then counted it as
// its own): after a repeat, Subscribe drains until settleQuiet passes
// with none.
func (c *Client) Subscribe(t testing.TB, change func()) int {
	t.Helper()
	deadline := time.After(Hang)
	for calls := 1; ; calls++ {
		change()
		select {
		case <-c.changed:
			c.Drain()
			if calls > 1 {
				c.settle(deadline)
			}
			return calls
		case <-time.After(resubscribeAfter):
		case <-deadline:
			t.Fatalf("no list_changed after %d changes", calls)
		}
	}
}

// Subscribe's waits: before repeating a change, and the quiet that ends
// the notifications of repeated ones.
const (
	resubscribeAfter = 2 * time.Second
	settleQuiet      = 5 * time.Second
)

// settle drains notifications until settleQuiet passes with none (or the
// deadline).
func (c *Client) settle(deadline <-chan time.Time) {
	for {
		select {
		case <-c.changed:
		case <-time.After(settleQuiet):
			return
		case <-deadline:
			return
		}
	}
}

// WaitChanged waits for one list_changed notification.
func (c *Client) WaitChanged(t testing.TB) {
	t.Helper()
	select {
	case <-c.changed:
	case <-time.After(Hang):
		t.Fatalf("no notifications/tools/list_changed within %s", Hang)
	}
}

// Hang bounds every wait of a Client for something expected: long enough
// that only a hang reaches it, however loaded the machine (a flood that
// takes 15 s alone took over 4 min beside other test runs on 2 cores).
const Hang = 2 * time.Minute

// Quiet is the window in which an expected absence of notifications is
// observed: the SDK's 10 ms debounce plus ample slack for a busy machine.
const Quiet = 300 * time.Millisecond

// ExpectNone fails if a notification arrives within Quiet.
func (c *Client) ExpectNone(t testing.TB, why string) {
	t.Helper()
	select {
	case <-c.changed:
		t.Fatalf("unexpected notifications/tools/list_changed: %s", why)
	case <-time.After(Quiet):
	}
}

// Drain discards notifications received so far and returns their count.
func (c *Client) Drain() int {
	n := 0
	for {
		select {
		case <-c.changed:
			n++
		default:
			return n
		}
	}
}

// Changed exposes the notification channel, for tests that count.
func (c *Client) Changed() <-chan struct{} { return c.changed }

// Expected is the protocol version a client asking for version should end
// up with ("" asks for the client's default, 2026-07-28).
func Expected(version string) string {
	if version == "" {
		return "2026-07-28"
	}
	return version
}

// Negotiated returns the protocol version the session runs.
func (c *Client) Negotiated() string {
	if r := c.Session.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// Listen asks the server for log notifications (notifications/message).
func (c *Client) Listen(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Hang)
	defer cancel()
	if err := c.Session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
}

// WaitLog waits for one log notification and returns its text.
func (c *Client) WaitLog(t testing.TB) string {
	t.Helper()
	select {
	case text := <-c.logs:
		return text
	case <-time.After(Hang):
		t.Fatalf("no log notification within %s", Hang)
		return ""
	}
}

// Logs exposes the log notifications received, for tests that count.
func (c *Client) Logs() <-chan string { return c.logs }

// FloorServer is a bare go-sdk server with one tool whose toggle adds or
// removes a second: a real list change each time. Benchmarks use it as
// the floor for list_changed delivery.
func FloorServer() (*mcp.Server, func()) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "floor"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	tool := &mcp.Tool{Name: "toggle", InputSchema: map[string]any{"type": "object"}}
	srv.AddTool(&mcp.Tool{Name: "keep", InputSchema: map[string]any{"type": "object"}}, handler)
	present := false
	return srv, func() {
		if present {
			srv.RemoveTools("toggle")
		} else {
			srv.AddTool(tool, handler)
		}
		present = !present
	}
}

// Floor serves a FloorServer over streamable HTTP on loopback and returns
// a client subscribed to it and the toggle that changes its list.
func Floor(t testing.TB) (*Client, func()) {
	t.Helper()
	srv, toggle := FloorServer()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	c := Connect(t, HTTP(hs.URL, ""), "")
	c.Subscribe(t, toggle)
	return c, toggle
}
