package daemon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestSessionLimitIsAClearError: a daemon hosts at most MaxSessions live
// sessions; one more is refused with RESOURCE_EXHAUSTED naming the limit
// and the flag that raises it; a stopped session frees its place.
func TestSessionLimitIsAClearError(t *testing.T) {
	t.Parallel()
	const limit = 3
	h := newHarnessWith(t, func(o *daemon.Options) { o.MaxSessions = limit })
	for _, id := range []string{"s1", "s2", "s3"} {
		h.create(t, spec(id, agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	}
	_, err := h.client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{
		Spec: spec("s4", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.ErrorIs(t, err, errdefs.ErrResourceExhausted, "the domain error survives the wire")
	assert.Contains(t, err.Error(), "3 sessions")
	assert.Contains(t, err.Error(), "--max-sessions")
	_, err = h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s4"})
	assert.Equal(t, codes.NotFound, status.Code(err), "the refused session left nothing behind")

	_, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	_, err = h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
	assert.Equal(t, codes.NotFound, status.Code(err), "a stopped session is forgotten, not kept forever")
	_, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	assert.NoError(t, err, "stopping it again succeeds")
	h.create(t, spec("s4", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	testutil.Figure(t, "limit: sessions per agentctl", "session %d of a limit of %d refused with RESOURCE_EXHAUSTED; a stopped session is forgotten and frees its place (default %d)",
		limit+1, limit, daemon.DefaultMaxSessions)
}

// TestArgumentLimitIsAClearError: arguments over toolapi.MaxArgumentBytes
// are refused by agentctl with a stable code before they reach the
// orchestrator; a request body beyond the HTTP bound is refused without
// being read; the session serves the next call normally.
func TestArgumentLimitIsAClearError(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	calls, _ := orchestrator(t, h, func(c *agentctlv1.ToolCall) *agentctlv1.ToolResult {
		return &agentctlv1.ToolResult{Text: "attached"}
	})
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	args := func(n int) map[string]any {
		// {"repository_ids":["xxx…"]} is n bytes long.
		return map[string]any{"repository_ids": []string{strings.Repeat("x", n-len(`{"repository_ids":[""]}`))}}
	}

	text, isErr := callText(t, c, "task_add_sources", args(toolapi.MaxArgumentBytes+1))
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, toolapi.CodeArgumentsTooLarge+": "), text)
	assert.Contains(t, text, "the limit is 1048576")

	text, isErr = callText(t, c, "task_add_sources", args(toolapi.MaxArgumentBytes))
	assert.False(t, isErr, "arguments at the limit are forwarded: %.100s", text)
	forwarded := <-calls
	assert.Len(t, forwarded.GetArgumentsJson(), toolapi.MaxArgumentBytes)

	_, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_add_sources", Arguments: args(2 * mcpserver.MaxRequestBytes)})
	require.Error(t, err, "a body over the HTTP bound is refused")
	t.Logf("oversized body: %v", err)

	c = mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	text, isErr = callText(t, c, "task_info", nil)
	assert.False(t, isErr, text)
	select {
	case extra := <-calls:
		if extra.GetToolName() != "task_info" {
			t.Fatalf("a refused call reached the orchestrator: %s", extra.GetToolName())
		}
	default:
	}
	assert.NotContains(t, h.logs.String(), "panic")
	testutil.Figure(t, "limit: argument size", "arguments of %d bytes forwarded, %d refused with %s by agentctl (and again by the orchestrator); HTTP bodies over %d bytes refused unread",
		toolapi.MaxArgumentBytes, toolapi.MaxArgumentBytes+1, toolapi.CodeArgumentsTooLarge, mcpserver.MaxRequestBytes)
}
