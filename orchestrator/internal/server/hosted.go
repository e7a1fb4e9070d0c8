package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/toolscope/toolscope/orchestrator/internal/hosted"
	"github.com/toolscope/toolscope/orchestrator/internal/toolcalls"
)

// serveHosted serves the hosted sessions' endpoint on cfg.Hosted: its own
// listener, over TLS when the server has TLS files (checkListen requires
// them for a non-loopback address). Its sessions' calls go to the
// dispatcher in-process.
func serveHosted(cfg Config, tlsConfig *tls.Config, d *toolcalls.Dispatcher, log *slog.Logger) (*hosted.Executor, error) {
	lis, err := net.Listen("tcp", cfg.Hosted)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (set --hosted to another address): %w", cfg.Hosted, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		t := tlsConfig.Clone()
		t.NextProtos = []string{"h2", "http/1.1"}
		// The bearer token authenticates; a client certificate is not asked for.
		t.ClientAuth = tls.NoClientCert
		lis = tls.NewListener(lis, t)
		scheme = "https"
	}
	x := hosted.New(hosted.Options{Calls: d.CallHandler, Limits: cfg.HostedLimits, Logger: log})
	x.Serve(lis, scheme+"://"+lis.Addr().String())
	return x, nil
}
