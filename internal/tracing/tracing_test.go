package tracing_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
	"github.com/toolscope/toolscope/internal/tracing/tracingtest"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b", "OTEL_EXPORTER_OTLP_HEADERS": "k=v"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	} {
		assert.Equal(t, c.want, tracesetup.Enabled(func(k string) string { return c.env[k] }), "%v", c.env)
	}
}

// clearEnv unsets every tracing variable for the test (and
// OTEL_SERVICE_NAME), whatever the machine's environment holds.
func clearEnv(t *testing.T) {
	for _, k := range append(profiles.TracingEnv, "OTEL_SERVICE_NAME") {
		t.Setenv(k, "")
	}
}

// restoreGlobal puts OpenTelemetry's global tracer provider back as the
// test found it.
func restoreGlobal(t *testing.T) {
	was := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(was) })
}

// TestOffByDefault: with no OTEL_* environment, Setup installs nothing:
// the global provider is OpenTelemetry's no-op one, spans record
// nothing, no trace context is carried, and no goroutine is started.
func TestOffByDefault(t *testing.T) {
	clearEnv(t)
	restoreGlobal(t)
	before := runtime.NumGoroutine()
	shutdown, err := tracesetup.Setup(context.Background(), "toolscope")
	require.NoError(t, err)
	defer shutdown()
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	assert.False(t, isSDK, "no SDK tracer provider is installed")
	ctx, span := tracing.Tracer().Start(context.Background(), "tools/call x")
	assert.False(t, span.IsRecording(), "the no-op tracer is used")
	parent, state := tracing.CallContext(ctx)
	assert.Empty(t, parent+state, "no trace context rides in a call message")
	span.End()
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine (no batch processor, no exporter)")
}

// TestSetupExports: with an endpoint set, Setup exports over OTLP, names
// the service as asked, and lets OTEL_SERVICE_NAME override it.
func TestSetupExports(t *testing.T) {
	for _, c := range []struct{ override, want string }{{"", "agentctl"}, {"agentctl-eu", "agentctl-eu"}} {
		clearEnv(t)
		restoreGlobal(t)
		recv := tracingtest.Start(t)
		for _, kv := range recv.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		t.Setenv("OTEL_SERVICE_NAME", c.override)
		shutdown, err := tracesetup.Setup(context.Background(), "agentctl")
		require.NoError(t, err)
		_, span := tracing.Tracer().Start(context.Background(), "tools/call x")
		assert.True(t, span.IsRecording())
		span.End()
		shutdown() // flushes
		spans := recv.Wait(t, 10*time.Second, "the span", func(s []tracingtest.Span) bool { return len(s) == 1 })
		assert.Equal(t, c.want, spans[0].Service)
		assert.Equal(t, "tools/call x", spans[0].Name)
	}
}

// TestSetupRefusesUnknownExporter: the SDK's refusal of a value is an
// error (the callers warn and run without traces).
func TestSetupRefusesUnknownExporter(t *testing.T) {
	clearEnv(t)
	restoreGlobal(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin-typo")
	_, err := tracesetup.Setup(context.Background(), "toolscope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_")
}

// TestCallContext: a span context survives the trip through a call
// message's two strings, and values that do not parse start a new trace.
func TestCallContext(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("t").Start(context.Background(), "root")
	defer span.End()
	parent, state := tracing.CallContext(ctx)
	require.NotEmpty(t, parent)
	got := trace.SpanContextFromContext(tracing.ContextOf(context.Background(), parent, state))
	assert.True(t, got.IsRemote())
	assert.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	assert.Equal(t, span.SpanContext().SpanID(), got.SpanID())

	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "ff-" + parent[3:]} {
		ctx := tracing.ContextOf(context.Background(), bad, "k=v")
		assert.False(t, trace.SpanContextFromContext(ctx).IsValid(), "%q", bad)
	}
}

// BenchmarkCallOff is what a tool call pays for tracing when it is off:
// agentctl's root span and Attach hop, the trace context it would carry,
// the orchestrator's span with its stage events. Run it alone (-run '^$'):
// it measures the global provider as a process that never called Setup
// has it.
func BenchmarkCallOff(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ctx, root := tracing.Tracer().Start(context.Background(), "tools/call x",
			trace.WithAttributes(tracing.AttrToolName.String("x"), tracing.AttrSessionID.String("s")))
		ctx, hop := tracing.Tracer().Start(ctx, "Attach ToolCall")
		parent, state := tracing.CallContext(ctx)
		ctx = tracing.ContextOf(context.Background(), parent, state)
		ctx, handle := tracing.Tracer().Start(ctx, "toolcalls.Handle")
		tracing.Stage(ctx, "session")
		tracing.Stage(ctx, "connection")
		tracing.EndCall(handle, true, "no_change_request")
		tracing.EndCall(hop, true, "no_change_request")
		tracing.EndCall(root, true, "no_change_request")
	}
}
