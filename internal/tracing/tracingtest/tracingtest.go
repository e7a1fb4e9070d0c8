// Package tracingtest is an in-process OTLP receiver for tests: a gRPC
// server implementing the OpenTelemetry collector's trace service on
// loopback, which real processes export to through the standard OTEL_*
// environment (Env), and which keeps every span it receives.
package tracingtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
)

// Span is one received span, flattened.
type Span struct {
	Service            string // the resource's service.name
	TraceID, SpanID    string // hex
	ParentID           string // hex; empty for a root
	Name               string
	Kind               tracepb.Span_SpanKind
	Attributes         map[string]string // values as text
	Events             []string
	Links              []string // the trace ids (hex) the span links to
	Error              bool     // status ERROR
	Start, End         time.Time
	raw                *tracepb.Span
	resourceAttributes map[string]string
}

// String is the span as JSON, for failure messages and secret scans.
func (s Span) String() string {
	b, _ := protojson.Marshal(s.raw)
	return fmt.Sprintf("%s %s: %s resource=%v", s.Service, s.Name, b, s.resourceAttributes)
}

// Receiver collects the spans exported to it.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	Addr string

	mu      sync.Mutex
	spans   []Span
	arrived chan struct{} // closed and replaced on each export
}

// Start serves a receiver on 127.0.0.1 until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Addr: lis.Addr().String(), arrived: make(chan struct{})}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return r
}

// Env is the environment that makes a process export its traces here,
// over OTLP/gRPC, in batches at most 100 ms apart.
func (r *Receiver) Env() []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.Addr,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// Export implements the collector's trace service.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{Service: res["service.name"], TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Name: sp.GetName(), Kind: sp.GetKind(), Attributes: attrs(sp.GetAttributes()),
					Error: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())),
					raw: sp, resourceAttributes: res}
				if len(sp.GetParentSpanId()) > 0 {
					s.ParentID = hex.EncodeToString(sp.GetParentSpanId())
				}
				for _, e := range sp.GetEvents() {
					s.Events = append(s.Events, e.GetName())
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, hex.EncodeToString(l.GetTraceId()))
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(x.BoolValue)
		default:
			b, _ := protojson.Marshal(v)
			out[kv.GetKey()] = strings.Trim(string(b), "{}")
		}
	}
	return out
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait waits, at most timeout, until done holds for the spans received,
// and returns them; it fails the test if done never holds.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, arrived := append([]Span(nil), r.spans...), r.arrived
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-arrived:
		case <-deadline.C:
			var names []string
			for _, s := range spans {
				names = append(names, s.Service+":"+s.Name)
			}
			t.Fatalf("no %s within %s; received %d spans: %v", what, timeout, len(spans), names)
			return nil
		}
	}
}

// Trace returns the spans of trace id.
func Trace(spans []Span, id string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// Find returns the first span of service named name, if any.
func Find(spans []Span, service, name string) (Span, bool) {
	for _, s := range spans {
		if s.Service == service && s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}
