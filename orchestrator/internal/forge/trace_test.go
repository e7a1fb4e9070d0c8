package forge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
)

// TestProviderRequestSpans: a provider request made inside a trace (a
// tool call's) is a client span of it, named by provider and method, with
// no header; the trace context is not sent to the provider, even with a
// W3C propagator installed; and a request outside any trace (the poller's)
// makes no span.
func TestProviderRequestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	wasTP, wasProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(wasTP)
		otel.SetTextMapPropagator(wasProp)
		_ = tp.Shutdown(context.Background())
	})

	const token = "ghp_TRACESECRETTOKEN0000111122223333"
	var mu sync.Mutex
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"login":"octo-bot"}`))
	}))
	defer srv.Close()
	c, err := forge.New(providers.GitHub, srv.URL, token, nil)
	require.NoError(t, err)

	ctx, call := tp.Tracer("test").Start(context.Background(), "toolcalls.Handle")
	_, err = c.CurrentUser(ctx)
	require.NoError(t, err)
	call.End()
	_, err = c.CurrentUser(context.Background()) // outside a trace
	require.NoError(t, err)

	var requests []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "toolcalls.Handle" {
			requests = append(requests, s)
		}
	}
	require.Len(t, requests, 1, "one span: the request inside the trace")
	s := requests[0]
	assert.Equal(t, "github GET", s.Name())
	assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID())
	for _, a := range s.Attributes() {
		assert.NotContains(t, a.Value.Emit(), token, "%s", a.Key)
		assert.NotContains(t, string(a.Key), "header", "no header is recorded")
	}
	assert.Equal(t, []string{"", ""}, traceparents, "no trace context leaves for the provider")
}
