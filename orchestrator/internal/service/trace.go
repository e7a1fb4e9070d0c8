package service

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// A push is a trace of its own: the reconciler is level-triggered, so one
// push may answer several wakes (a batch, a catalog change, a resume), and
// a wake may lead to no push at all. Its span links to the traces of the
// wakes it answers, at most maxPushLinks of them; its child is the
// ApplySurface RPC, which agentctl's span continues.
const maxPushLinks = 8

// Attributes of a push's span.
const (
	attrGeneration         = attribute.Key("toolscope.generation")
	attrExternalGeneration = attribute.Key("toolscope.external_generation")
)

// startPush opens the span of one push of surface to sess.
func startPush(ctx context.Context, sess model.Session, surface executors.Surface, links []trace.Link) (context.Context, trace.Span) {
	return tracing.Tracer().Start(ctx, "reconcile.Push", trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...),
		trace.WithAttributes(tracing.AttrSessionID.String(sess.ID), tracing.AttrTaskID.String(sess.TaskID),
			attrGeneration.Int64(int64(surface.Generation)), attrExternalGeneration.Int64(int64(surface.ExternalGeneration))))
}

// endPush ends a push's span with its outcome (pushOutcome), an error
// unless "ok".
func endPush(span trace.Span, outcome string) {
	span.SetAttributes(tracing.AttrOutcome.String(outcome))
	if outcome != "ok" {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}
