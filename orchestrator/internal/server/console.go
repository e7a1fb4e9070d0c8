package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/console"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// ConsoleConfig bounds the web console's logins (see package console).
type ConsoleConfig struct {
	// SessionTTL ends a login idle this long; console.DefaultSessionTTL
	// if zero.
	SessionTTL time.Duration
	// MaxSessions bounds the logins held; console.DefaultMaxSessions if
	// zero.
	MaxSessions int
	// MaxSessionsPerCredential bounds the logins of one API token or
	// client certificate; console.DefaultMaxSessionsPerCredential if zero.
	MaxSessionsPerCredential int
	// MaxStreams bounds the event streams served at once;
	// console.DefaultMaxStreams if zero.
	MaxStreams int
}

// consoleReadHeaderTimeout bounds reading a console request's headers;
// there is no write timeout, as the pages' event streams last as long as
// the page is open.
const consoleReadHeaderTimeout = 10 * time.Second

// serveConsole serves the web console on cfg.Console until ctx ends: its
// own listener, over TLS when the server has TLS files (and then with the
// client CA, so a person may log in with a client certificate). It
// returns the console's URL and a channel with Serve's result.
func serveConsole(ctx context.Context, cfg Config, tlsConfig *tls.Config, svc *service.Service, auth *access.Authenticator, log *slog.Logger) (string, <-chan error, error) {
	c, err := console.New(console.Options{Service: svc, Auth: auth, Secure: tlsConfig != nil, Log: log,
		SessionTTL: cfg.ConsoleLogins.SessionTTL, MaxSessions: cfg.ConsoleLogins.MaxSessions, MaxStreams: cfg.ConsoleLogins.MaxStreams,
		MaxSessionsPerCredential: cfg.ConsoleLogins.MaxSessionsPerCredential})
	if err != nil {
		return "", nil, err
	}
	lis, err := net.Listen("tcp", cfg.Console)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s (set --console to another address): %w", cfg.Console, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		t := tlsConfig.Clone()
		t.NextProtos = []string{"h2", "http/1.1"}
		lis = tls.NewListener(lis, t)
		scheme = "https"
	}
	srv := &http.Server{Handler: c, ReadHeaderTimeout: consoleReadHeaderTimeout, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }, // ends the event streams on shutdown
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return scheme + "://" + lis.Addr().String(), serveHTTP(ctx, srv, lis), nil
}
