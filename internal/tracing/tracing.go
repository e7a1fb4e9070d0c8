// Package tracing is toolscope's OpenTelemetry tracing: off by default,
// turned on by the standard OTEL_* environment variables, with the SDK's
// own reading of them (package tracesetup installs it in a process).
// This package holds the hooks the code paths call, and depends on no
// gRPC, so that the orchestrator's domain packages may call them.
//
// A tool call is one trace across processes: agentctl's MCP handler
// starts it, the Attach stream carries it in the call message
// (CallContext, ContextOf), and the orchestrator's checks, connections and
// provider requests continue it. Unary RPCs carry it in gRPC metadata
// (tracesetup.ServerOption, tracesetup.DialOption). What spans exist, and what they never hold,
// is in docs/operations.md; why, in ADR 0029.
//
// Off, nothing is exported and no goroutine runs: the global tracer
// provider stays OpenTelemetry's no-op one, whose spans record nothing.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName names toolscope's instrumentation scope.
const ScopeName = "github.com/toolscope/toolscope"

// Tracer is toolscope's tracer, from the global provider: OpenTelemetry's
// no-op one unless Setup installed another.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// w3c is the one propagation format of a call message's trace context,
// whatever the process's propagators.
var w3c = propagation.TraceContext{}

// CallContext returns ctx's span context in W3C form (traceparent,
// tracestate), empty when ctx carries none (tracing off).
func CallContext(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// ContextOf returns ctx continuing the remote span context traceparent
// and tracestate name. Values that do not parse leave ctx as it was: the
// next span starts a trace of its own.
func ContextOf(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// Attributes of toolscope's spans, besides OpenTelemetry's semantic
// conventions. Never an argument value, a credential or a result.
const (
	AttrSessionID = attribute.Key("toolscope.session_id")
	AttrTaskID    = attribute.Key("toolscope.task_id")
	// AttrOutcome is a tool call's outcome: "ok" or its refusal code.
	AttrOutcome = attribute.Key("toolscope.outcome")
	// AttrProvider is the review provider a span acts on (github, gitlab).
	AttrProvider = attribute.Key("toolscope.provider")
	// AttrToolName is the called tool's name (semconv gen_ai.tool.name).
	AttrToolName = attribute.Key("gen_ai.tool.name")
)

// EndCall ends a tool call's span with its outcome: "ok", or the refusal
// code, which also marks the span an error (error.type is the code).
func EndCall(span trace.Span, isError bool, code string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if isError {
		if code == "" {
			code = "internal"
		}
		span.SetAttributes(AttrOutcome.String(code), semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, code)
	} else {
		span.SetAttributes(AttrOutcome.String("ok"))
	}
	span.End()
}

// Stage records that a tool call passed a stage of its checks, as an
// event on the call's span (nothing when tracing is off).
func Stage(ctx context.Context, name string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name)
	}
}
