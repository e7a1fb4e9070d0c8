package daemon

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/tracing"
)

// traced starts each tool call's trace: the root span, "tools/call TOOL",
// named and attributed by OpenTelemetry's MCP conventions, with the
// session and task and the outcome code, never the arguments or the
// result. Off (no OTEL_* environment), its spans record nothing.
func traced(s *session, h mcpserver.HandlerFunc) mcpserver.HandlerFunc {
	return func(tool registry.Tool) mcp.ToolHandler {
		handle := h(tool)
		name := tool.Name // only: a handler is kept per tool and session, the whole Tool is ≈150 bytes
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx, span := tracing.Tracer().Start(ctx, "tools/call "+name, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.McpMethodNameToolsCall, semconv.GenAIOperationNameExecuteTool,
					tracing.AttrToolName.String(name), tracing.AttrSessionID.String(s.id), tracing.AttrTaskID.String(s.taskID)))
			res, err := handle(ctx, req)
			tracing.EndCall(span, err != nil || res == nil || res.IsError, resultCode(res))
			return res, err
		}
	}
}

// resultCode is the code a refused call's text starts with ("code: ..."),
// as mcpserver.ToolError and fromToolResult write it.
func resultCode(res *mcp.CallToolResult) string {
	if res == nil || !res.IsError || len(res.Content) == 0 {
		return ""
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return ""
	}
	code, _, found := strings.Cut(text.Text, ": ")
	if !found || strings.ContainsAny(code, " \n") || len(code) > 64 {
		return ""
	}
	return code
}

// traceAttach is the hop over the Attach stream: a client span, child of
// the call's root, whose context the call message carries (the stream's
// gRPC metadata was sent once, when it opened).
func traceAttach(ctx context.Context, c *agentctlv1.ToolCall) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, "Attach ToolCall", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.AttrToolName.String(c.GetToolName())))
	if parent, state := tracing.CallContext(ctx); parent != "" {
		c.TraceContext = &agentctlv1.TraceContext{Traceparent: parent, Tracestate: state}
	}
	return ctx, span
}

// endAttach ends the Attach hop's span with the orchestrator's answer.
func endAttach(span trace.Span, r *agentctlv1.ToolResult, err error) {
	if err != nil {
		tracing.EndCall(span, true, "orchestrator_unreachable")
		return
	}
	tracing.EndCall(span, r.GetIsError(), r.GetErrorCode())
}
