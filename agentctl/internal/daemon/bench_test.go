package daemon_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/mcptest"
)

// BenchmarkSetProvidersToListChanged: from the orchestrator's SetProviders
// gRPC call to the MCP client's notification handler, interleaved with the
// floor — go-sdk's own tool change to notification, in one process, over
// the same streamable HTTP transport. Both include the SDK's 10 ms
// debounce. Changes are spaced beyond the publisher's 25 ms throttle, so
// each is a lone change, not a burst.
func BenchmarkSetProvidersToListChanged(b *testing.B) {
	h := newHarness(b)
	st := h.create(b, spec("bench", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	ours := mcptest.Connect(b, mcptest.HTTP(st.GetMcpUrl(), h.token(b, "bench")), "")

	floor := mcp.NewServer(&mcp.Implementation{Name: "floor"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	tool := &mcp.Tool{Name: "toggle", InputSchema: map[string]any{"type": "object"}}
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	floor.AddTool(&mcp.Tool{Name: "keep", InputSchema: map[string]any{"type": "object"}}, handler)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return floor }, nil))
	b.Cleanup(srv.Close)
	bare := mcptest.Connect(b, mcptest.HTTP(srv.URL, ""), "")

	gen := uint64(1)
	sets := [][]string{{"gitlab"}, {"github"}}
	push := func() {
		gen++
		h.push(b, "bench", gen, sets[gen%2]...)
	}
	present := false
	toggle := func() {
		if present {
			floor.RemoveTools("toggle")
		} else {
			floor.AddTool(tool, handler)
		}
		present = !present
	}
	ours.Subscribe(b, push)
	bare.Subscribe(b, toggle)
	var figure, base benchstats.Samples
	for b.Loop() {
		figure.Time(func() { push(); ours.WaitChanged(b) })
		base.Time(func() { toggle(); bare.WaitChanged(b) })
		time.Sleep(30 * time.Millisecond) // let the throttle window pass: lone changes
	}
	benchstats.Report(b, figure, base)
}
