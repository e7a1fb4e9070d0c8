package toolcalls

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/internal/tracing"
)

// startSpan opens the span of the dispatcher's answer to c: its checks
// (an event per stage passed, tracing.Stage), the connection it opens
// and the provider request it makes are inside it. It names the tool as
// the audit record does (a malformed claim is "(malformed)"), never the
// arguments. Off, it records nothing.
func startSpan(ctx context.Context, c Call) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "toolcalls.Handle", trace.WithAttributes(tracing.AttrToolName.String(shown(c.Tool))))
}

// endSpan ends the answer's span with the session's records (from a, as
// the audit record has them) and the outcome.
func endSpan(span trace.Span, a *auditRecord, res Result) {
	if span.IsRecording() && a.sessionID != "" {
		span.SetAttributes(tracing.AttrSessionID.String(a.sessionID), tracing.AttrTaskID.String(a.taskID))
	}
	tracing.EndCall(span, res.IsError, res.Code)
}
