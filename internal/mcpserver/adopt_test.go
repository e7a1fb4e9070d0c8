package mcpserver_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// selfChanging returns a publisher whose task_add_sources publishes the
// GitHub and GitLab surface and names the GitLab tools as tools_added, as
// agentctl's daemon does once the orchestrator pushed the new set.
func selfChanging(t *testing.T, wait time.Duration) *mcpserver.Publisher {
	t.Helper()
	var p *mcpserver.Publisher
	var ready sync.WaitGroup
	ready.Add(1)
	handler := func(tool registry.Tool) mcp.ToolHandler {
		if tool.Name != toolapi.AddSourcesTool {
			return echo(tool)
		}
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ready.Wait()
			p.Publish(build("github", "gitlab"))
			out, _ := json.Marshal(toolapi.AddSourcesResult{Providers: []string{"github", "gitlab"}, Generation: 2,
				ToolsAdded: toolapi.GroupGitLab.Names()})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "attached"}}, StructuredContent: json.RawMessage(out)}, nil
		}
	}
	p = mcpserver.New(build("github"), mcpserver.Options{Name: "test", Version: "1", Handler: handler, AdoptWait: wait})
	ready.Done()
	t.Cleanup(p.Close)
	return p
}

// relister is a client that, like Claude Code, re-lists on every
// list_changed; it records when each notification and each re-list
// arrived.
type relister struct {
	mu            sync.Mutex
	notified      []time.Time
	relisting     []time.Time // when each re-list was sent
	relistedNames [][]string
	session       *mcp.ClientSession
}

func connectClient(t *testing.T, transport mcp.Transport, version, name string, relist bool) *relister {
	t.Helper()
	return connectWith(t, transport, version, name, relist, true)
}

// connectWith connects a client; without handler it sets no
// ToolListChangedHandler (a 2026-07-28 client then never listens).
func connectWith(t *testing.T, transport mcp.Transport, version, name string, relist, handler bool) *relister {
	t.Helper()
	r := &relister{}
	opts := &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			r.mu.Lock()
			r.notified = append(r.notified, time.Now())
			r.mu.Unlock()
			if !relist {
				return
			}
			r.mu.Lock()
			r.relisting = append(r.relisting, time.Now())
			r.mu.Unlock()
			go func() {
				res, err := r.session.ListTools(context.Background(), nil)
				if err != nil {
					return
				}
				var names []string
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
				}
				r.mu.Lock()
				r.relistedNames = append(r.relistedNames, names)
				r.mu.Unlock()
			}()
		},
	}
	if !handler {
		opts.ToolListChangedHandler = nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	r.session = cs
	return r
}

// never is an adoption wait longer than any call's deadline (hang): a
// result that arrives at all was released by adoption, not at the bound,
// however slow the machine.
const (
	never = time.Hour
	hang  = 2 * time.Minute
)

func addSources(t *testing.T, cs *mcp.ClientSession) (*mcp.CallToolResult, time.Time, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolapi.AddSourcesTool, Arguments: map[string]any{"repository_ids": []string{"r"}}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	return res, time.Now(), time.Since(start)
}

// TestSelfTriggeredChangeIsAdoptedBeforeTheResult: a client that re-lists
// on list_changed (as Claude Code does) gets the notification, and sends
// its re-list, before the result of the call that caused the change
// arrives; the server answers that re-list (with the new tools) before it
// releases the result — on every transport and protocol version: the
// 2025 versions' sessions, and 2026-07-28's listen stream (on stdio one
// session; over HTTP a request of its own, with the re-list and the call
// each another). Whatever its name, the client is then known to re-list:
// the result has no call_tool hint, and its list no call_tool.
func TestSelfTriggeredChangeIsAdoptedBeforeTheResult(t *testing.T) {
	t.Parallel()
	for name := range transports {
		for _, version := range mcptest.ProtocolVersions {
			t.Run(name+"/"+mcptest.VersionName(version), func(t *testing.T) {
				t.Parallel()
				p := selfChanging(t, never)
				answered := answers(p)
				c := connectClient(t, transports[name](t, p), version, "codex-mcp-client", true)
				res, got, took := addSources(t, c.session)
				assert.Equal(t, []string{"tools/list", "tools/call"}, answered(), "the server answered the re-list before it released the result")
				c.mu.Lock()
				require.Len(t, c.notified, 1, "list_changed arrived before the result")
				assert.True(t, c.notified[0].Before(got))
				require.Len(t, c.relisting, 1, "the client re-listed before the result")
				assert.True(t, c.relisting[0].Before(got))
				c.mu.Unlock()
				require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.relistedNames) == 1 }, hang, time.Millisecond)
				assert.Subset(t, c.relistedNames[0], toolapi.GroupGitLab.Names(), "its re-list had the new tools")
				assert.NotContains(t, c.relistedNames[0], toolapi.CallTool, "and no call_tool: it re-lists")
				assert.NotContains(t, resultOf(t, res), "call_with", "no hint for a client that re-lists")
				t.Logf("result after %s (notification and re-list first)", took.Round(time.Millisecond))
			})
		}
	}
}

// answers records, in order, the tools/list and tools/call requests p's
// server answered (its outermost middleware: after a result was held).
func answers(p *mcpserver.Publisher) func() []string {
	var mu sync.Mutex
	var order []string
	p.Server().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/list" || method == "tools/call" {
				mu.Lock()
				order = append(order, method)
				mu.Unlock()
			}
			return res, err
		}
	})
	return func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(order) }
}

func resultOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	return string(b)
}

// TestAClientThatNeverRelistsIsRecognisedByWhatItDoes: a client that
// ignores list_changed, whatever it calls itself, is offered call_tool
// until it shows it re-lists (a 2025 client lists once at its start); its
// first self-triggered result waits for a re-list that never comes, at
// most AdoptWait, and then tells it how to call the new tools through
// call_tool, with their schemas; from then on it is known not to re-list,
// so a later change's result is not held for it. call_tool runs a tool the
// client never listed, and refuses one the session does not have.
func TestAClientThatNeverRelistsIsRecognisedByWhatItDoes(t *testing.T) {
	t.Parallel()
	for name := range transports {
		for _, version := range []string{"2025-06-18", "2025-11-25"} {
			t.Run(name+"/"+version, func(t *testing.T) {
				t.Parallel()
				const wait = 300 * time.Millisecond
				p := selfChanging(t, wait)
				c := connectClient(t, transports[name](t, p), version, "claude-code", false)
				assert.Contains(t, toolNames(t, c.session), toolapi.CallTool, "offered to a client not known to re-list")

				res, _, took := addSources(t, c.session)
				assert.GreaterOrEqual(t, took, wait, "held for the re-list, at most AdoptWait (and released at all: before hang)")
				var out toolapi.AddSourcesResult
				require.NoError(t, json.Unmarshal([]byte(resultOf(t, res)), &out))
				assert.Equal(t, toolapi.CallTool, out.CallWith)
				assert.Contains(t, out.InputSchemas, toolapi.GitLabMRStatus)
				assert.Contains(t, res.Content[len(res.Content)-1].(*mcp.TextContent).Text, "call these new tools through call_tool")

				call, err := c.session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.CallTool,
					Arguments: map[string]any{"name": toolapi.GitLabMRStatus, "arguments": map[string]any{}}})
				require.NoError(t, err)
				assert.False(t, call.IsError)
				assert.Equal(t, "called "+toolapi.GitLabMRStatus, call.Content[0].(*mcp.TextContent).Text)
				call, err = c.session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.CallTool,
					Arguments: map[string]any{"name": "deploy_prod"}})
				require.NoError(t, err)
				assert.True(t, call.IsError)
				assert.Contains(t, call.Content[0].(*mcp.TextContent).Text, `unknown_tool: "deploy_prod" is not a tool of this session`)

				// A second change: known not to re-list, it is not waited for
				// (a result held for it would now never come).
				mcpserver.ApplyNow(p, build("github"))
				mcpserver.SetAdoptWait(p, never)
				res, _, second := addSources(t, c.session)
				assert.Contains(t, resultOf(t, res), `"call_with":"call_tool"`)
				t.Logf("first result after %s (AdoptWait %s); the second, not held, after %s", took.Round(time.Millisecond), wait, second.Round(time.Millisecond))
			})
		}
	}
}

// TestAClientThatIsNeverNotifiedIsNotWaitedFor: a 2026-07-28 client
// without a list_changed handler never listens, so it is never notified:
// its self-triggered result is not held for it.
func TestAClientThatIsNeverNotifiedIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	for name := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := selfChanging(t, never)
			c := connectWith(t, transports[name](t, p), "", "some-client", false, false)
			_, _, took := addSources(t, c.session) // returns at all: released at once, not at the bound
			t.Logf("result after %s", took.Round(time.Millisecond))
		})
	}
}

// TestAdoptionIsBounded: a 2026-07-28 client that subscribes to
// list_changed but never re-lists holds a self-triggered result for
// AdoptWait, no longer; the result is then released with the call_tool
// hint, and the client is known not to re-list.
func TestAdoptionIsBounded(t *testing.T) {
	t.Parallel()
	for name := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const wait = 300 * time.Millisecond
			p := selfChanging(t, wait)
			c := connectClient(t, transports[name](t, p), "", "some-client", false)
			assert.NotContains(t, toolNames(t, c.session), toolapi.CallTool, "a client that subscribes is taken to re-list")
			res, _, took := addSources(t, c.session)
			assert.GreaterOrEqual(t, took, wait) // and released at all (before hang): at the bound
			t.Logf("result after %s (AdoptWait %s)", took.Round(time.Millisecond), wait)
			assert.Contains(t, resultOf(t, res), `"call_with":"call_tool"`)
			assert.NotContains(t, toolNames(t, c.session), toolapi.CallTool, "a list after the notification, even late, shows it re-lists")
			assert.Equal(t, mcpserver.DefaultAdoptWait, 2*time.Second, "the default")
		})
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestAdoptionEntriesOfClosedSessionsAreDropped: a stateless (2026-07-28)
// HTTP client makes a server session per request; the entries adoption
// keeps for them do not pile up.
func TestAdoptionEntriesOfClosedSessionsAreDropped(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, build("github"))
	url := serveEndpoint(t, p, mcpserver.Limits{})
	c := connectClient(t, mcptest.HTTP(url, testToken), "", "some-client", false)
	for range 300 {
		_, err := c.session.ListTools(context.Background(), nil)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, p.Tracked(), 200, "entries of closed sessions are dropped")
}
