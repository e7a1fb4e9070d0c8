package mcpserver_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
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

// BenchmarkInitializeUnderSlowloris: a new client's initialize and
// tools/list (2025-11-25, on connections of its own) from an endpoint with
// the default Limits while a slowloris attacker holds 600 connections
// whose headers never end (over the default bound of 512), reopening each
// one the server closes at once, interleaved with the same from an
// endpoint under no attack (the floor). reopened/op is how many
// connections the attacker reopened per client connected.
func BenchmarkInitializeUnderSlowloris(b *testing.B) {
	reg := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	attacked := serveEndpoint(b, newPublisher(b, reg), mcpserver.Limits{})
	quiet := serveEndpoint(b, newPublisher(b, reg), mcpserver.Limits{})
	reopened := slowlorisAttack(b, strings.TrimPrefix(strings.TrimSuffix(attacked, mcpserver.Path), "http://"), slowloris)

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	connect := func(url string) {
		tr := mcptest.HTTP(url, testToken)
		defer tr.HTTPClient.CloseIdleConnections()
		cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		if _, err := cs.ListTools(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	before := reopened.Load()
	var figure, base benchstats.Samples
	for b.Loop() {
		figure.Time(func() { connect(attacked) })
		base.Time(func() { connect(quiet) })
	}
	benchstats.Report(b, figure, base)
	b.ReportMetric(float64(reopened.Load()-before)/float64(len(figure)), "reopened/op")
}

// slowlorisAttack holds n connections to addr that send the start of a
// request and never end its headers, reopening each as soon as the server
// closes it, until the benchmark ends. It returns once all n are open,
// with the count of those reopened.
func slowlorisAttack(b *testing.B, addr string, n int) *atomic.Int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		opened   sync.WaitGroup
		reopened atomic.Int64
	)
	opened.Add(n)
	for range n {
		wg.Go(func() {
			first := true
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				stop := context.AfterFunc(ctx, func() { _ = c.Close() })
				_, _ = c.Write([]byte("POST " + mcpserver.Path + " HTTP/1.1\r\nHost: x\r\nX-Slow: "))
				if first {
					opened.Done()
					first = false
				} else {
					reopened.Add(1)
				}
				_, _ = c.Read(make([]byte, 1)) // until the server closes it
				stop()
				_ = c.Close()
			}
			if first {
				opened.Done()
			}
		})
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
	opened.Wait()
	return &reopened
}
