package connections

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// startOpen opens the span of one Open: its gates are events on it
// (tracing.Stage), and the wait for a place among the connection's calls
// in flight is its length. It names the provider, never the credential
// or its reference.
func startOpen(ctx context.Context, conn model.Connection) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "connections.Open", trace.WithAttributes(tracing.AttrProvider.String(string(conn.Provider))))
}

// endOpen ends Open's span with the class of its failure, if any (the
// refusal code a tool call would answer; never the error's text).
func endOpen(span trace.Span, err error) {
	var ce *CredentialError
	var fe *forge.Error
	switch {
	case err == nil:
		span.End()
	case errors.As(err, &ce):
		tracing.EndCall(span, true, toolapi.CodeCredentialUnavailable)
	case errors.As(err, &fe):
		tracing.EndCall(span, true, fe.Code)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		tracing.EndCall(span, true, "canceled")
	default:
		tracing.EndCall(span, true, "internal")
	}
}
