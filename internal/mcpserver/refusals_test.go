package mcpserver_test

import (
	"context"
	"strings"
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

// reports collects a publisher's refusal reports; deliver says whether
// the next ones are delivered.
type reports struct {
	mu      sync.Mutex
	got     []mcpserver.Refusal
	deliver bool
}

func (r *reports) report(_ context.Context, x mcpserver.Refusal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deliver {
		r.got = append(r.got, x)
	}
	return r.deliver
}

func (r *reports) take() []mcpserver.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func (r *reports) setDeliver(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliver = v
}

// refusingPublisher serves a GitHub task's surface with handlers that
// check arguments as agentctl's and the hosted endpoint's do, and answer
// one tool with the orchestrator's refusal.
func refusingPublisher(t *testing.T, perSecond int) (*mcpserver.Publisher, *reports) {
	t.Helper()
	var schemas mcpserver.Schemas
	got := &reports{deliver: true}
	p := mcpserver.New(build("github"), mcpserver.Options{Name: "test", Version: "1",
		Handler: func(tool registry.Tool) mcp.ToolHandler {
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if _, refused := schemas.CheckArguments(ctx, tool, req.Params.Arguments); refused != nil {
					return refused, nil
				}
				if tool.Name == toolapi.GitHubPRStatus {
					// The orchestrator's refusal: audited there, not reported.
					return mcpserver.ToolError(toolapi.CodeRepositoryNotAttached, "no such repository"), nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			}
		},
		OnRefused: got.report, RefusalReports: perSecond,
	})
	t.Cleanup(p.Close)
	return p, got
}

// TestCallsRefusedHereAreReported: every way the endpoint refuses a call
// itself is reported with the name the client called and the code it was
// answered; a call the handler answered, refused or not, is not.
func TestCallsRefusedHereAreReported(t *testing.T) {
	t.Parallel()
	for name, transport := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, got := refusingPublisher(t, 1000)
			c := mcptest.Connect(t, transport(t, p), "")
			call := func(tool string, args any) *mcp.CallToolResult {
				ctx, cancel := context.WithTimeout(context.Background(), hang)
				defer cancel()
				res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					return nil // the SDK's JSON-RPC error (an unknown tool)
				}
				return res
			}

			assert.Nil(t, call(toolapi.GitLabMRStatus, map[string]any{}), "not listed: the SDK refuses it")
			assert.True(t, call(toolapi.GitHubPRStatus, map[string]any{"repository_id": 42}).IsError, "the schema refuses a number")
			assert.True(t, call(toolapi.GitHubPRStatus, map[string]any{"repository_id": strings.Repeat("r", toolapi.MaxArgumentBytes)}).IsError)
			assert.False(t, call(toolapi.TaskInfoTool, nil).IsError)
			assert.True(t, call(toolapi.GitHubPRStatus, map[string]any{"repository_id": "repo_1"}).IsError, "the orchestrator's refusal")

			assert.Equal(t, []mcpserver.Refusal{
				{Tool: toolapi.GitLabMRStatus, Code: toolapi.CodeUnknownTool},
				{Tool: toolapi.GitHubPRStatus, Code: toolapi.CodeInvalidArguments},
				{Tool: toolapi.GitHubPRStatus, Code: toolapi.CodeArgumentsTooLarge},
			}, got.take())
		})
	}
}

// TestCallToolRefusalsNameTheirTarget: through call_tool (offered to a
// client that never re-lists), a refusal names the tool the client asked
// for, or call_tool itself when the request names none.
func TestCallToolRefusalsNameTheirTarget(t *testing.T) {
	t.Parallel()
	p, got := refusingPublisher(t, 1000)
	codex := connectClient(t, transports["stdio"](t, p), "", "some-client", false)
	for _, args := range []map[string]any{
		{"name": "deploy_prod"},
		{"arguments": map[string]any{}},
		{"name": toolapi.GitHubPRStatus, "arguments": map[string]any{"repository_id": 42}},
	} {
		res, err := codex.session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.CallTool, Arguments: args})
		require.NoError(t, err)
		assert.True(t, res.IsError)
	}
	assert.Equal(t, []mcpserver.Refusal{
		{Tool: "deploy_prod", Code: toolapi.CodeUnknownTool},
		{Tool: toolapi.CallTool, Code: toolapi.CodeInvalidArguments},
		{Tool: toolapi.GitHubPRStatus, Code: toolapi.CodeInvalidArguments},
	}, got.take())

	// A name of any length is reported cut to the longest a tool may
	// have and marked, never a name of its own; a cut rune is dropped (a
	// protobuf string is UTF-8).
	long := strings.Repeat("a", 63) + "é" + strings.Repeat("z", 1<<16)
	res, err := codex.session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.CallTool, Arguments: map[string]any{"name": long}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	reported := got.take()
	require.Len(t, reported, 1)
	assert.Equal(t, strings.Repeat("a", 63)+"…", reported[0].Tool, "cut inside é, which is dropped")
	assert.Error(t, toolapi.CheckExternalName(reported[0].Tool), "recorded as malformed")
}

// TestRefusalReportsAreBoundedAndCounted: a client refused in a tight
// loop gets at most the bound's burst reported; every other refusal, and
// every report that could not be delivered, is counted in the next report
// that goes, so none is lost.
func TestRefusalReportsAreBoundedAndCounted(t *testing.T) {
	t.Parallel()
	const perSecond = 3 // bursts of 6
	p, got := refusingPublisher(t, perSecond)
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	mcpserver.SetRefusalClock(p, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c := mcptest.Connect(t, transports["http"](t, p), "")
	refuse := func(n int) {
		for range n {
			_, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe_secrets", Arguments: map[string]any{}})
			require.Error(t, err)
		}
	}
	total := func(rs []mcpserver.Refusal) int {
		n := 0
		for _, r := range rs {
			n += 1 + r.Suppressed
		}
		return n
	}

	refuse(50)
	first := got.take()
	assert.Len(t, first, 2*perSecond, "the burst")
	assert.Equal(t, 2*perSecond, total(first), "none of the burst counts others")

	got.setDeliver(false)
	advance(time.Second) // room for 3 more, which are not delivered
	refuse(3)
	assert.Empty(t, got.take())

	got.setDeliver(true)
	advance(time.Second)
	refuse(1)
	last := got.take()
	require.Len(t, last, 1)
	assert.Equal(t, 50-2*perSecond+3, last[0].Suppressed, "the refusals over the bound and the undelivered reports, in the next report")
	assert.Equal(t, 50+3+1, total(first)+total(last), "every refusal is accounted for")
}
