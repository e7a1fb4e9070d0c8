package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
)

// floorServer is a bare go-sdk server with the same tool definitions: what
// toolscope's tools/list is measured against.
func floorServer(r *registry.Registry) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "floor"}, nil)
	for _, t := range r.Tools() {
		s.AddTool(&mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: json.RawMessage(t.OutputSchema)}, echo(t))
	}
	return s
}

func listClient(b *testing.B, transport mcp.Transport, version string) *mcp.ClientSession {
	b.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), transport,
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	if r := cs.InitializeResult(); version != "" && (r == nil || r.ProtocolVersion != version) {
		b.Fatalf("negotiated %+v, want %s", r, version)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

func pipes(b *testing.B, s *mcp.Server) mcp.Transport {
	b.Helper()
	toServer, fromClient, _ := os.Pipe()
	toClient, fromServer, _ := os.Pipe()
	ss, err := s.Connect(context.Background(), &mcp.IOTransport{Reader: toServer, Writer: fromServer}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ss.Close() })
	return &mcp.IOTransport{Reader: toClient, Writer: fromClient}
}

// BenchmarkToolsList: tools/list of a task with both providers through a
// toolscope publisher, interleaved with the same list from a bare go-sdk
// server (the floor), over streamable HTTP and over stdio framing, at each
// protocol version: the floor always speaks the subject's version (over
// HTTP, 2026-07-28 is served statelessly and 2025-11-25 statefully, by
// toolscope as by the floor).
func BenchmarkToolsList(b *testing.B) {
	reg := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	pub := mcpserver.New(reg, mcpserver.Options{Name: "toolscope", Handler: echo})
	defer pub.Close()
	floor := floorServer(reg)
	for _, tr := range []struct {
		name      string
		transport func(s *mcp.Server, h http.Handler) mcp.Transport
	}{
		{"http", func(_ *mcp.Server, h http.Handler) mcp.Transport {
			srv := httptest.NewServer(h)
			b.Cleanup(srv.Close)
			return &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}
		}},
		{"stdio", func(s *mcp.Server, _ http.Handler) mcp.Transport { return pipes(b, s) }},
	} {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			b.Run(tr.name+"/"+version, func(b *testing.B) {
				floorHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return floor },
					&mcp.StreamableHTTPOptions{Stateless: version >= "2026-07-28"})
				ours := listClient(b, tr.transport(pub.Server(), pub.HTTPHandler()), version)
				bare := listClient(b, tr.transport(floor, floorHandler), version)
				ctx := context.Background()
				var figure, base benchstats.Samples
				for b.Loop() {
					figure.Time(func() {
						if _, err := ours.ListTools(ctx, nil); err != nil {
							b.Fatal(err)
						}
					})
					base.Time(func() {
						if _, err := bare.ListTools(ctx, nil); err != nil {
							b.Fatal(err)
						}
					})
				}
				benchstats.Report(b, figure, base)
				b.ReportMetric(float64(reg.Len()), "tools")
			})
		}
	}
}

// BenchmarkContextCost: the bytes of the tools/list result an agent keeps
// in its context, per surface (tokens ≈ bytes / 4).
func BenchmarkContextCost(b *testing.B) {
	for _, c := range []struct {
		name string
		set  []string
	}{{"none", nil}, {"github", []string{"github"}}, {"gitlab", []string{"gitlab"}}, {"both", []string{"github", "gitlab"}}} {
		b.Run(c.name, func(b *testing.B) {
			reg := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of(c.set...)})
			pub := mcpserver.New(reg, mcpserver.Options{Name: "toolscope", Handler: echo})
			defer pub.Close()
			cs := listClient(b, pipes(b, pub.Server()), "")
			var size int
			for b.Loop() {
				res, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := json.Marshal(res)
				size = len(raw)
			}
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(float64(size)/4, "tokens~")
			b.ReportMetric(float64(reg.Len()), "tools")
			b.ReportMetric(0, "ns/op")
		})
	}
}
