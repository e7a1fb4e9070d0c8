package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/testutil"
)

// TestAPanickingCallIsContained: the go-sdk does not recover a tool
// handler's panic, and external tools bring schemas agentctl did not
// write; a panic anywhere in a call becomes that call's internal error,
// logged, and the daemon goes on.
func TestAPanickingCallIsContained(t *testing.T) {
	t.Parallel()
	logs := &testutil.SyncBuffer{}
	d, err := New(Options{Secret: "s", StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	d.hub.attach(func(m *agentctlv1.AttachResponse) error {
		if m.GetToolCall() != nil {
			panic("the stream broke in an unexpected way")
		}
		return nil
	})
	tool := registry.Tool{Name: "docs__search", InputSchema: json.RawMessage(`{"type":"object"}`)}
	res, err := d.toolHandler(&session{id: "s1", taskID: "t1"})(tool)(context.Background(),
		&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool.Name, Arguments: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "internal: "), res.Content[0].(*mcp.TextContent).Text)
	assert.Contains(t, logs.String(), "panic in a tool call")
	assert.Contains(t, logs.String(), "docs__search")
}
