package forge

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/tracing"
)

// traced returns a copy of hc whose requests made inside a trace (a
// tool call's) are client spans of it, "github GET" and so on, with
// OpenTelemetry's HTTP attributes (method, URL without credentials,
// status); never a header or a body. Requests outside a trace (the
// lifecycle poller's, a connection's validation) make none. The trace
// context is not sent to the provider: no propagation header leaves for
// GitHub or GitLab.
func traced(hc *http.Client, p providers.Provider) *http.Client {
	out := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = otelhttp.NewTransport(base,
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return string(p) + " " + r.Method }),
		otelhttp.WithSpanOptions(trace.WithAttributes(tracing.AttrProvider.String(string(p)))),
	)
	return &out
}
