package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
)

// MetricsPath is where the metrics are served on Config.Metrics.
const MetricsPath = "/metrics"

// listenMetrics binds the metrics address: loopback only (ADR 0028), so
// the metrics need no credential of their own; a scraper on another host
// reaches them through the host's own means (an SSH tunnel, a node agent,
// a TLS proxy).
func listenMetrics(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errdefs.InvalidField("metrics_addr", "%q is not host:port: %v", addr, err)
	}
	if !loopback(host) {
		return nil, errdefs.InvalidField("metrics_addr", "%q is not a loopback address: the metrics are served without authentication on loopback only; use --metrics-addr 127.0.0.1:PORT", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errdefs.InvalidField("metrics_addr", "listen on %s (set --metrics-addr to another address): %v", addr, err)
	}
	return lis, nil
}

// newMetrics returns the orchestrator's metrics on a registry of their
// own; nil without a metrics address (nothing is observed).
func newMetrics(lis net.Listener) *metrics.Metrics {
	if lis == nil {
		return nil
	}
	return metrics.New(prometheus.NewRegistry())
}

// serveMetrics serves m on lis until ctx ends; the returned channel
// receives Serve's result.
func serveMetrics(ctx context.Context, lis net.Listener, m *metrics.Metrics, log *slog.Logger) <-chan error {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return serveHTTP(ctx, srv, lis)
}

// serveHTTP runs srv on lis until ctx ends, then shuts it down (closing
// it if the shutdown outlasts 5 s); the returned channel receives Serve's
// result, nil after a shutdown.
func serveHTTP(ctx context.Context, srv *http.Server, lis net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(lis)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shut) != nil {
			_ = srv.Close()
		}
	}()
	return done
}
