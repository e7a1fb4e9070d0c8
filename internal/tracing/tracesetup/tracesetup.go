// Package tracesetup installs tracing (package tracing) in a process:
// the tracer provider the OTEL_* environment asks for, if it asks
// (Setup), and the gRPC stats handlers that carry a trace across unary
// RPCs in their metadata (ServerOption, DialOption). The exporter is
// autoexport's, from the environment; the OTLP exporters, the batch
// processor and the sampler read their own variables. Off, nothing is
// installed and no goroutine runs.
package tracesetup

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
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"google.golang.org/grpc"
)

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
