package agentlink

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/tracing"
)

// traceCall continues a tool call's trace on the orchestrator's side of
// the Attach stream: a server span, child of agentctl's, whose context
// the call message carries (ToolCall.trace_context; the stream's gRPC
// metadata was sent once, when it opened). A call without one, or with
// one that does not parse, starts a trace here. It has no attributes:
// the message's names are claims, and the dispatcher's span below it
// names the call as its records and checks know it.
func traceCall(ctx context.Context, c *agentctlv1.ToolCall) (context.Context, trace.Span) {
	tc := c.GetTraceContext()
	ctx = tracing.ContextOf(ctx, tc.GetTraceparent(), tc.GetTracestate())
	return tracing.Tracer().Start(ctx, "Attach ToolCall", trace.WithSpanKind(trace.SpanKindServer))
}
