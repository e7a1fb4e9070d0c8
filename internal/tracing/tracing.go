// Package tracing is toolscope's OpenTelemetry tracing: off by default,
// turned on by the standard OTEL_* environment variables, with the SDK's
// own reading of them (autoexport picks the exporter; the OTLP exporters,
// the batch processor and the sampler read their own variables).
//
// A tool call is one trace across processes: agentctl's MCP handler
// starts it, the Attach stream carries it in the call message
// (CallContext, ContextOf), and the orchestrator's checks, connections and
// provider requests continue it. Unary RPCs carry it in gRPC metadata
// (ServerOption, DialOption). What spans exist, and what they never hold,
// is in docs/operations.md; why, in ADR 0029.
//
// Off, nothing is exported and no goroutine runs: the global tracer
// provider stays OpenTelemetry's no-op one, whose spans record nothing.
package tracing

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// ScopeName names toolscope's instrumentation scope.
const ScopeName = "github.com/toolscope/toolscope"

// FlushTimeout bounds how long a stopping process waits for its last
// spans to leave (Setup's shutdown); the exporter's own timeout
// (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default) bounds each export.
const FlushTimeout = 5 * time.Second

// Enabled reports whether getenv's environment asks for traces: an OTLP
// endpoint is set, or OTEL_TRACES_EXPORTER names an exporter other than
// "none", and OTEL_SDK_DISABLED is not "true". Anything else is off, the
// default: unlike the SDK's own default ("otlp" to localhost), an
// operator who set nothing gets no exporter.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Setup installs the process's tracer provider when the environment asks
// for traces (Enabled), naming the process service unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names it otherwise. It
// returns a shutdown that flushes what is left, within FlushTimeout; off,
// it installs nothing and its shutdown does nothing. An environment the
// SDK refuses (an unknown exporter or protocol) is an error.
func Setup(ctx context.Context, service string) (shutdown func(), err error) {
	if !Enabled(os.Getenv) {
		return func() {}, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, errors.Join(errors.New("tracing: the OTEL_* environment names no usable exporter"), err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME: the operator's word wins
	)
	if err != nil && res == nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		_ = tp.Shutdown(ctx)
	}, nil
}

// Tracer is toolscope's tracer, from the global provider: OpenTelemetry's
// no-op one unless Setup installed another.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// untraced leaves out the RPCs that are not operations: the Attach stream
// (open for as long as agentctl is attached; its calls carry their own
// trace context) and health checks.
var untraced = filters.Not(filters.Any(filters.MethodName("Attach"), filters.HealthCheck()))

// ServerOption is the gRPC server's tracing: a span per unary RPC (and
// per stream other than Attach), continuing the caller's trace from the
// request's metadata.
func ServerOption() grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithFilter(untraced)))
}

// DialOption is a gRPC client's tracing: a span per RPC, its context
// sent in the request's metadata.
func DialOption() grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithFilter(untraced)))
}

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
