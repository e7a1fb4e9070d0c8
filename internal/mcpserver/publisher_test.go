package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

func build(raw ...string) *registry.Registry {
	return registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of(raw...)})
}

func echo(tool registry.Tool) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "called " + tool.Name}}}, nil
	}
}

func newPublisher(t testing.TB, initial *registry.Registry) *mcpserver.Publisher {
	t.Helper()
	p := mcpserver.New(initial, mcpserver.Options{Name: "test", Version: "1", Handler: echo})
	t.Cleanup(p.Close)
	return p
}

// transports connect a client to a publisher's server: streamable HTTP
// on a loopback socket, and newline-delimited JSON-RPC over OS pipes (the
// stdio framing).
var transports = map[string]func(t testing.TB, p *mcpserver.Publisher) mcp.Transport{
	"http": func(t testing.TB, p *mcpserver.Publisher) mcp.Transport {
		srv := httptest.NewServer(p.HTTPHandler())
		t.Cleanup(srv.Close)
		return mcptest.HTTP(srv.URL, "")
	},
	"stdio": func(t testing.TB, p *mcpserver.Publisher) mcp.Transport {
		toServer, fromClient, err := os.Pipe()
		require.NoError(t, err)
		toClient, fromServer, err := os.Pipe()
		require.NoError(t, err)
		ss, err := p.Server().Connect(context.Background(), &mcp.IOTransport{Reader: toServer, Writer: fromServer}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		return &mcp.IOTransport{Reader: toClient, Writer: fromClient}
	},
}

// TestOneNotificationPerEffectiveChange: every transport, every protocol
// version: a change gives exactly one list_changed and the new list; an
// equivalent snapshot gives none.
func TestOneNotificationPerEffectiveChange(t *testing.T) {
	t.Parallel()
	for name, connect := range transports {
		for _, version := range mcptest.ProtocolVersions {
			t.Run(name+"/"+mcptest.VersionName(version), func(t *testing.T) {
				t.Parallel()
				p := newPublisher(t, build())
				c := mcptest.Connect(t, connect(t, p), version)
				assert.Equal(t, mcptest.Expected(version), c.Negotiated(), "negotiated protocol version")
				assert.Equal(t, toolapi.Surface(), c.Names(t))

				toggle := []*registry.Registry{build("github"), build("gitlab")}
				calls := c.Subscribe(t, func() { p.Publish(toggle[0]); toggle[0], toggle[1] = toggle[1], toggle[0] })
				t.Logf("subscribed after %d change(s)", calls)

				require.True(t, p.Publish(build("github", "gitlab")))
				c.WaitChanged(t)
				c.ExpectNone(t, "one change must give one notification")
				assert.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))

				assert.False(t, p.Publish(build(" GitLab", "GITHUB", "local")), "equivalent set")
				c.ExpectNone(t, "an equivalent set must not notify")

				require.True(t, p.Publish(build("gitlab")))
				c.WaitChanged(t)
				c.ExpectNone(t, "one change must give one notification")
				assert.Equal(t, toolapi.Surface("gitlab"), c.Names(t))

				res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "gitlab_mr_status"})
				require.NoError(t, err)
				assert.Equal(t, "called gitlab_mr_status", res.Content[0].(*mcp.TextContent).Text)
			})
		}
	}
}

// TestOneNotificationWhateverTheScheduling: the SDK notifies 10 ms after
// the last AddTool of a burst, so a publisher descheduled between two SDK
// calls of one application would make it notify twice. The hook stands for
// that scheduler: it holds the application until the client has received
// the first notification. The client must still get exactly one per
// change (a second change follows, and nothing may arrive after its own
// notification), and a listing on that first notification sees the whole
// change.
func TestOneNotificationWhateverTheScheduling(t *testing.T) {
	t.Parallel()
	for name, connect := range transports {
		for _, version := range mcptest.ProtocolVersions {
			t.Run(name+"/"+mcptest.VersionName(version), func(t *testing.T) {
				t.Parallel()
				p := newPublisher(t, build())
				c := mcptest.Connect(t, connect(t, p), version)
				toggle := []*registry.Registry{build("github"), build()}
				c.Subscribe(t, func() { p.Publish(toggle[0]); toggle[0], toggle[1] = toggle[1], toggle[0] })
				settle(t, p)
				c.Drain()

				held := 0
				p.SetBetweenSDKCalls(func() {
					if held++; held == 1 {
						c.WaitChanged(t) // the SDK's debounce fired mid-application
					}
				})
				require.True(t, p.Publish(build("github", "gitlab")))
				settle(t, p)
				names := c.Names(t)
				assert.Equal(t, toolapi.Surface("github", "gitlab"), names, "a listing on the first notification sees the whole change")
				require.Positive(t, held, "the application made several SDK calls")

				p.SetBetweenSDKCalls(nil)
				require.True(t, p.Publish(build("gitlab")))
				c.WaitChanged(t)
				c.ExpectNone(t, "one change must give one notification, however the publisher was scheduled")
				assert.Equal(t, toolapi.Surface("gitlab"), c.Names(t))
			})
		}
	}
}

// settle waits until the publisher has applied its latest snapshot.
func settle(t *testing.T, p *mcpserver.Publisher) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Published().Equal(p.Desired()) }, time.Minute, time.Millisecond)
}

// TestChurnIsCoalescedButNeverStarved publishes a new surface every 2 ms
// — faster than the SDK's 10 ms debounce, which alone would send nothing
// until the churn stops — and keeps churning until notifications have
// arrived during it (starved, none would, and the test would end at its
// hang deadline), then expects the final list. How many arrive per second
// of churn is a figure: a loaded machine stalls the whole process.
func TestChurnIsCoalescedButNeverStarved(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, build())
	c := mcptest.Connect(t, transports["http"](t, p), "")
	surfaces := []*registry.Registry{build("github"), build("gitlab"), build("github", "gitlab"), build()}
	i := 0
	c.Subscribe(t, func() { i++; p.Publish(surfaces[i%len(surfaces)]) })

	const want = 5
	var during int
	began := time.Now()
	hang := time.After(2 * time.Minute)
	ticker := time.NewTicker(2 * time.Millisecond)
	defer ticker.Stop()
	for during < want {
		select {
		case <-ticker.C:
			i++
			p.Publish(surfaces[i%len(surfaces)])
		case <-c.Changed():
			during++
		case <-hang:
			t.Fatalf("starved: %d notifications during %s of churn (%d publishes)", during, time.Since(began), i)
		}
	}
	final := surfaces[i%len(surfaces)]
	t.Logf("%d notifications during %s of churn (%d publishes)", during, time.Since(began).Round(time.Millisecond), i)
	require.Eventually(t, func() bool { return slices.Equal(final.Names(), c.Names(t)) }, time.Minute, 5*time.Millisecond)
}

// surface returns a synthetic registry of 20 tools whose names all carry
// k, so any mixture of two surfaces is recognizable.
func surface(k int) *registry.Registry {
	var tools []registry.Tool
	for i := range 20 {
		tools = append(tools, registry.Tool{
			Name: fmt.Sprintf("s%d_tool%02d", k, i), Description: "d",
			InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnly: true,
		})
	}
	return registry.FromTools(tools)
}

// TestStormNeverShowsATornList: publishers race listers and callers; every
// list is one whole surface, the final list is the last one published, and
// no goroutine outlives the test.
func TestStormNeverShowsATornList(t *testing.T) {
	baseline := runtime.NumGoroutine()
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // only a hang outlasts it (a 2-core machine at load 40 gives a test process a twentieth of a core)
		defer cancel()
		surfaces := make([]*registry.Registry, 6)
		for k := range surfaces {
			surfaces[k] = surface(k)
		}
		// Apply every publish (no coalescing), so the SDK's tool set keeps
		// changing under the listers.
		p := mcpserver.New(surfaces[0], mcpserver.Options{Name: "storm", Handler: echo, MinInterval: time.Nanosecond})
		defer p.Close()
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.Server() }, nil)
		srv := httptest.NewServer(h)
		defer srv.Close()

		var clients []*mcp.ClientSession
		for range 3 {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "lister"}, nil).Connect(ctx, mcptest.HTTP(srv.URL, ""), nil)
			require.NoError(t, err)
			clients = append(clients, cs)
			defer cs.Close() // before srv.Close, which waits for the clients' streams, even when the test fails
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			progress = sync.NewCond(&mu)
			lists    int
			listing  = len(clients) // listers still listing
			listErrs []error
			torn     []string
			publish  sync.WaitGroup
		)
		// The publishers keep pace with the listers (publish i waits for
		// (i+1)/2 lists), so that however a loaded machine schedules them
		// the 400 publishes overlap at least 50 lists by construction:
		// neither side runs ahead of the other.
		for w := range 4 {
			publish.Go(func() {
				for i := range 100 {
					mu.Lock()
					for lists < (i+1)/2 && listing > 0 {
						progress.Wait()
					}
					mu.Unlock()
					p.Publish(surfaces[(w*7+i)%len(surfaces)])
				}
			})
		}
		done := make(chan struct{})
		for _, cs := range clients {
			wg.Go(func() {
				defer func() { mu.Lock(); listing--; progress.Broadcast(); mu.Unlock() }()
				for {
					select {
					case <-done:
						return
					default:
					}
					res, err := cs.ListTools(ctx, nil)
					if err != nil {
						mu.Lock()
						listErrs = append(listErrs, err)
						mu.Unlock()
						return
					}
					prefixes := map[string]bool{}
					tools := slices.DeleteFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == toolapi.CallTool }) // offered: it never listens
					for _, tool := range tools {
						prefixes[strings.SplitN(tool.Name, "_", 2)[0]] = true
					}
					mu.Lock()
					lists++
					progress.Broadcast()
					if len(prefixes) != 1 || len(tools) != 20 {
						torn = append(torn, fmt.Sprintf("%d tools from %v", len(res.Tools), prefixes))
					}
					mu.Unlock()
				}
			})
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					// Any tool may vanish mid-call; the call must answer, not hang.
					_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "s0_tool00"})
				}
			})
		}
		publish.Wait()
		final := p.Desired()
		require.Eventually(t, func() bool { return p.Published() == final }, time.Minute, time.Millisecond)
		close(done)
		wg.Wait()
		mu.Lock()
		t.Logf("%d lists during the storm", lists)
		assert.Empty(t, torn, "torn lists")
		assert.Empty(t, listErrs, "lists that failed")
		assert.GreaterOrEqual(t, lists, 50, "the listers overlapped the storm")
		mu.Unlock()
		res, err := clients[0].ListTools(ctx, nil)
		require.NoError(t, err)
		var got []string
		for _, tool := range res.Tools {
			got = append(got, tool.Name)
		}
		assert.Equal(t, final.Names(), got, "the final list is the last surface published")
		for _, cs := range clients {
			require.NoError(t, cs.Close())
		}
	}()
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseline+2 }, time.Minute, 10*time.Millisecond,
		"goroutines leaked: %d, baseline %d", runtime.NumGoroutine(), baseline)
}
