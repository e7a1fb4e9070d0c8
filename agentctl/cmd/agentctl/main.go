// Command agentctl is the sidecar that stands next to an agent: it serves
// MCP to the agent and speaks the toolscope.agentctl.v1 gRPC contract to
// the orchestrator. It builds as a static binary (CGO_ENABLED=0) so the
// same file runs on the host, bind-mounted into any container image, or on
// a remote build host.
//
//	agentctl serve    the daemon the orchestrator drives (see package daemon)
//	agentctl mcp      a stdio MCP server mirroring one session (see package mcpbridge)
//	agentctl version  the build and the contract it speaks
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	"github.com/toolscope/toolscope/agentctl/internal/mcpbridge"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
	"github.com/toolscope/toolscope/internal/version"
)

// Contract is the gRPC service agentctl speaks, announced in the readiness
// line.
var Contract = agentctlv1.AgentctlService_ServiceDesc.ServiceName

// Ready is the one JSON line `agentctl serve` prints on stdout once it
// accepts connections; executors wait for it instead of polling.
type Ready struct {
	Protocol string `json:"protocol"`
	Addr     string `json:"addr"`
	PID      int    `json:"pid"`
	Version  string `json:"version"`
	// Metrics is the metrics' URL, with --metrics-addr.
	Metrics string `json:"metrics,omitempty"`
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "agentctl",
		Short:         "The toolscope sidecar: serves MCP to an agent, driven by the orchestrator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serveCmd(stdout, stderr), mcpCmd(stdin, stdout, stderr), installCmd(), &cobra.Command{
		Use:   "version",
		Short: "Print the build and the orchestrator contract this agentctl speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(stdout, "agentctl %s\ncontract %s\n", version.String(), Contract)
			return err
		},
	})
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "agentctl: %v\n", err)
		var usage usageError
		if errors.As(err, &usage) {
			return 2
		}
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// DefaultGCPercent is agentctl's GOGC once it serves (--gc-percent): half
// the runtime's 100. An agentctl is mostly idle between bursts of lists
// and pushes, and an idle Go process collects only every 2 minutes, so the
// garbage of a burst stays in its RSS, up to twice its live heap; at 50,
// 1.5 times (ADR 0034).
const DefaultGCPercent = 50

func serveCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		listen, secretFile, stateDir, mcpHost, logLevel string
		metricsAddr                                     string
		tlsCert, tlsKey, clientCA                       string
		sessionsDir, logsDir, agentUIDs, logFile        string
		workspacesDir, mirrorsDir                       string
		logFileMax                                      int64
		allowSharedUID                                  bool
		mcpPort, maxSessions, gcPercent                 int
		callTimeout, adoptWait, idleReclaim             time.Duration
		mcpLimits                                       mcpserver.Limits
		exitTailLines, exitTailBytes                    int
		logBacklog, agentLogMax, workspacesMax          int64
		keptLogs                                        logdir.Bound
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon the orchestrator drives (gRPC on loopback by default)",
		Long: `Run the agentctl daemon. The orchestrator authenticates with a per-launch
secret, read from --secret-file or from $` + daemon.EnvSecret + ` (which is then removed
from the environment, so agents never inherit it), or, on remote hosts, with a
client certificate under mutual TLS (--tls-cert, --tls-key, --client-ca).
Run as root with --agent-uids, each session's agent runs under a uid of its
own, so it can read neither agentctl's secret and /proc entries nor another
session's files. Without a range, agentctl refuses sessions of a second
workspace unless --allow-shared-uid says the operator accepts the risk.
Once the daemon accepts connections it prints one JSON line on stdout:
{"protocol","addr","pid","version"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logTo := stderr
			if logFile != "" {
				if logFileMax <= 0 {
					return usageError{fmt.Errorf("--log-file-max-bytes %d: must be positive", logFileMax)}
				}
				f, err := daemon.OpenLogFile(logFile, logFileMax)
				if err != nil {
					return fmt.Errorf("--log-file: %w", err)
				}
				defer f.Close()
				logTo = io.MultiWriter(stderr, f)
			}
			log, err := newLogger(logTo, logLevel)
			if err != nil {
				return err
			}
			// Off unless the OTEL_* environment asks (tracesetup.Enabled);
			// the last spans leave after the daemon stopped.
			if endTracing, err := tracesetup.Setup(cmd.Context(), "agentctl"); err != nil {
				log.Warn("running without traces", "error", err.Error())
			} else {
				defer endTracing()
			}
			var serverOpts []grpc.ServerOption
			tlsOn := tlsCert != "" || tlsKey != "" || clientCA != ""
			if tlsOn {
				creds, err := loadServerTLS(tlsCert, tlsKey, clientCA)
				if err != nil {
					return err
				}
				serverOpts = append(serverOpts, grpc.Creds(creds))
			}
			if err := checkBounds(cmd, mcpLimits, adoptWait); err != nil {
				return err
			}
			if idleReclaim < 0 {
				return usageError{fmt.Errorf("--idle-reclaim %s: must not be negative (0 turns it off; default %s)", idleReclaim, DefaultIdleReclaim)}
			}
			if gcPercent <= 0 {
				return usageError{fmt.Errorf("--gc-percent %d: must be positive (default %d)", gcPercent, DefaultGCPercent)}
			}
			if err := checkDiskBounds(cmd, exitTailLines, exitTailBytes, logBacklog, agentLogMax, workspacesMax, keptLogs); err != nil {
				return err
			}
			uids, err := agentuid.Parse(agentUIDs)
			if err != nil {
				return usageError{err}
			}
			secret, err := readSecret(secretFile)
			if err != nil && !(tlsOn && secretFile == "") {
				return err
			}
			if stateDir == "" {
				if stateDir, err = os.MkdirTemp("", "agentctl-"); err != nil {
					return err
				}
				defer os.RemoveAll(stateDir)
				if uids.Set() {
					// Agents under their own uids enter it, to their session
					// directories; they list nothing.
					if err := os.Chmod(stateDir, 0o711); err != nil {
						return err
					}
				}
			}
			var reg *prometheus.Registry
			var metricsLis net.Listener
			if metricsAddr != "" {
				if metricsLis, err = listenMetrics(metricsAddr); err != nil {
					return err
				}
				defer metricsLis.Close()
				reg = prometheus.NewRegistry()
			}
			self, _ := os.Executable()
			d, err := daemon.New(daemon.Options{
				Secret: secret, TLSClientAuth: tlsOn, StateDir: stateDir, SessionsDir: sessionsDir, LogsDir: logsDir, WorkspacesDir: workspacesDir, MirrorsDir: mirrorsDir, AgentUIDs: uids, AllowSharedUID: allowSharedUID,
				MCPHost: mcpHost, MCPPort: mcpPort, AgentctlPath: self,
				CallTimeout: callTimeout, AdoptWait: adoptWait, MaxSessions: maxSessions, WorkspacesMaxBytes: workspacesMax, MCPLimits: mcpLimits, Logger: log,
				LogFile: logFile, ExitTailLines: exitTailLines, ExitTailBytes: exitTailBytes, LogBacklog: logBacklog, AgentLogMax: agentLogMax, KeptLogs: keptLogs,
				Metrics: reg,
			})
			if err != nil {
				return err
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			srv := d.NewGRPCServer(serverOpts...)
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(lis) }()
			r := Ready{Protocol: Contract, Addr: lis.Addr().String(), PID: os.Getpid(), Version: version.String()}
			if reg != nil {
				stopMetrics := serveMetrics(metricsLis, reg, log)
				defer stopMetrics()
				r.Metrics = "http://" + metricsLis.Addr().String() + metricsPath
			}
			// Once started, which the runtime's default serves faster
			// (fewer collections of a heap that only grows); GOGC in the
			// environment wins over the default, not over the flag.
			if _, set := os.LookupEnv("GOGC"); !set || cmd.Flags().Changed("gc-percent") {
				debug.SetGCPercent(gcPercent)
			}
			if idleReclaim > 0 {
				reclaimCtx, stopReclaim := context.WithCancel(cmd.Context())
				defer stopReclaim()
				go reclaimWhenIdle(reclaimCtx, idleReclaim)
			}
			ready, _ := json.Marshal(r)
			if _, err := fmt.Fprintf(stdout, "%s\n", ready); err != nil {
				srv.Stop()
				return err
			}
			log.Info("agentctl serving", "addr", lis.Addr().String(), "state_dir", stateDir)

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			select {
			case err := <-serveErr:
				d.Close()
				return err
			case <-ctx.Done():
			}
			log.Info("agentctl stopping")
			d.Close()
			done := make(chan struct{})
			go func() { srv.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				srv.Stop()
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:0", "gRPC address (port 0 picks a free port, announced in the readiness line)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the per-launch orchestrator secret (default: $"+daemon.EnvSecret+")")
	f.StringVar(&stateDir, "state-dir", "", "directory for session configs and agent logs (default: a temporary directory removed on exit)")
	f.StringVar(&logsDir, "logs-dir", "", "directory keeping stopped sessions' agent logs, LOGS_DIR/<session>/agent.log (default: STATE_DIR/logs); a stopped session's own directory is removed")
	f.StringVar(&sessionsDir, "sessions-dir", "", "directory for the sessions' directories, each owned by its agent's uid (default: STATE_DIR/sessions)")
	f.StringVar(&workspacesDir, "workspaces-dir", "", "directory of the sessions' workspaces (their checkouts), kept after a session stops; agents under uids of their own must be able to traverse its parents (default: STATE_DIR/workspaces)")
	f.StringVar(&mirrorsDir, "mirrors-dir", "", "directory of the repositories' mirrors the checkouts are made from, shared by every session on this host and closed to agents (default: STATE_DIR/mirrors)")
	f.StringVar(&agentUIDs, "agent-uids", "", "run each session's agent under a uid of its own from FIRST-LAST (e.g. 100000-100999); needs root")
	f.BoolVar(&allowSharedUID, "allow-shared-uid", false, "without --agent-uids, host sessions of several workspaces anyway (their agents can read each other's MCP tokens)")
	f.StringVar(&mcpHost, "mcp-host", "127.0.0.1", "address sessions' MCP endpoints bind")
	f.IntVar(&mcpPort, "mcp-port", 0, "fixed MCP port (one session only, for containers that publish it); 0 picks one per session")
	f.IntVar(&gcPercent, "gc-percent", DefaultGCPercent, "once serving, collect garbage when the heap grew by this percentage of the live heap (the runtime's GOGC; GOGC in the environment wins over the default)")
	f.DurationVar(&idleReclaim, "idle-reclaim", DefaultIdleReclaim, "check this often whether a burst of work ended, then return its memory to the system (0: leave it to the runtime)")
	f.IntVar(&maxSessions, "max-sessions", daemon.DefaultMaxSessions, "most sessions hosted at once; more are refused with RESOURCE_EXHAUSTED")
	f.Int64Var(&workspacesMax, "workspaces-max-bytes", daemon.DefaultWorkspacesMaxBytes, "bound on the disk --workspaces-dir and --mirrors-dir use together: no checkout is made once they use it (0: no bound)")
	f.DurationVar(&mcpLimits.HeaderTimeout, "mcp-header-timeout", mcpserver.DefaultHeaderTimeout, "MCP endpoints: time for a request's headers to arrive")
	f.DurationVar(&mcpLimits.BodyTimeout, "mcp-body-timeout", mcpserver.DefaultBodyTimeout, "MCP endpoints: time for a request's body to arrive once its headers are in")
	f.DurationVar(&mcpLimits.IdleTimeout, "mcp-idle-timeout", mcpserver.DefaultIdleTimeout, "MCP endpoints: a kept-alive connection with no request in progress is closed after this")
	f.IntVar(&mcpLimits.MaxConns, "mcp-max-conns", mcpserver.DefaultMaxConns, "MCP endpoints: most connections open at once, each; at the bound, a new connection closes one no request has authenticated yet, else waits to be accepted")
	f.IntVar(&mcpLimits.MaxSessions, "mcp-max-sessions", mcpserver.DefaultMaxSessions, "MCP endpoints: most MCP sessions (clients before 2026-07-28) at once, each; more are refused")
	f.DurationVar(&mcpLimits.SessionIdle, "mcp-session-idle", mcpserver.DefaultSessionIdle, "MCP endpoints: an MCP session with no request (a notification stream counts as one) for this long is closed")
	f.IntVar(&mcpLimits.EventBytes, "mcp-event-bytes", mcpserver.DefaultEventBytes, "MCP endpoints: bytes of sent messages kept per MCP session (clients before 2026-07-28) to resume a broken stream; the oldest streams go first")
	f.IntVar(&mcpLimits.RefusalReports, "mcp-refusal-reports", mcpserver.DefaultRefusalReports, "MCP endpoints: most reports a second, per session, of the tool calls refused here (a tool not listed, arguments its schema refuses) that go to the orchestrator's audit; the rest are counted in the next report")
	f.DurationVar(&mcpLimits.EventAge, "mcp-event-age", mcpserver.DefaultEventAge, "MCP endpoints: a request's stream is kept for resuming this long after it opened, then dropped")
	f.IntVar(&exitTailLines, "exit-tail-lines", daemon.DefaultExitTailLines, "most lines of the agent's output an agent_exited event carries")
	f.IntVar(&exitTailBytes, "exit-tail-bytes", daemon.DefaultExitTailBytes, "most bytes of the agent's output an agent_exited event carries")
	f.Int64Var(&logBacklog, "log-backlog", daemon.DefaultLogBacklog, "bytes of an agent's log sent before following it (ReadAgentLog)")
	f.Int64Var(&agentLogMax, "agent-log-max-bytes", daemon.DefaultAgentLogMax, "bound on a running agent's log: agent.log is rotated to agent.log.1 at half of it, keeping the latest output")
	f.Int64Var(&keptLogs.MaxBytes, "logs-max-bytes", logdir.DefaultMaxBytes, "bound on the stopped sessions' logs in --logs-dir: the oldest are removed first (0: no bound; a live session's never are)")
	f.DurationVar(&keptLogs.MaxAge, "logs-max-age", logdir.DefaultMaxAge, "stopped sessions' logs unchanged for this long are removed (0: kept whatever their age)")
	f.DurationVar(&callTimeout, "call-timeout", 2*time.Minute, "how long a tool call may wait for the orchestrator")
	f.DurationVar(&adoptWait, "adopt-wait", mcpserver.DefaultAdoptWait, "how long the result of a call that changed the caller's own tools (task_add_sources) waits for the session's clients to be told and re-list")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at /metrics on this loopback address (port 0 picks a free port, announced in the readiness line); off by default")
	f.StringVar(&logFile, "log-file", "", "also write agentctl's log to this file, from which the orchestrator reads a session's lines (session logs --agentctl on remote hosts)")
	f.Int64Var(&logFileMax, "log-file-max-bytes", daemon.DefaultAgentLogMax, "bound on --log-file: rotated to FILE.1 at half of it")
	f.StringVar(&tlsCert, "tls-cert", "", "server certificate (PEM) for mutual TLS")
	f.StringVar(&tlsKey, "tls-key", "", "server private key (PEM) for mutual TLS")
	f.StringVar(&clientCA, "client-ca", "", "CA certificate (PEM) that signs orchestrator client certificates")
	return cmd
}

// checkBounds refuses a bound of the MCP endpoints (or of a self-triggered
// change's wait) that is not positive, naming the flag and the value given.
func checkBounds(cmd *cobra.Command, l mcpserver.Limits, adoptWait time.Duration) error {
	for _, c := range []struct {
		flag string
		ok   bool
	}{
		{"mcp-header-timeout", l.HeaderTimeout > 0}, {"mcp-body-timeout", l.BodyTimeout > 0},
		{"mcp-idle-timeout", l.IdleTimeout > 0}, {"mcp-max-conns", l.MaxConns > 0},
		{"mcp-max-sessions", l.MaxSessions > 0}, {"mcp-session-idle", l.SessionIdle > 0},
		{"mcp-event-bytes", l.EventBytes > 0}, {"mcp-event-age", l.EventAge > 0},
		{"mcp-refusal-reports", l.RefusalReports > 0}, {"adopt-wait", adoptWait > 0},
	} {
		if !c.ok {
			return usageError{fmt.Errorf("--%s %s: must be positive (default %s)", c.flag, cmd.Flag(c.flag).Value, cmd.Flag(c.flag).DefValue)}
		}
	}
	return nil
}

// checkDiskBounds refuses a bound on agents' logs that is not positive
// (the kept logs' and the workspaces' bounds may be 0: none), naming the
// flag.
func checkDiskBounds(cmd *cobra.Command, lines, bytes int, backlog, agentLog, workspaces int64, kept logdir.Bound) error {
	for _, c := range []struct {
		flag string
		ok   bool
	}{
		{"exit-tail-lines", lines > 0}, {"exit-tail-bytes", bytes > 0}, {"log-backlog", backlog > 0},
		{"agent-log-max-bytes", agentLog > 0}, {"logs-max-bytes", kept.MaxBytes >= 0}, {"logs-max-age", kept.MaxAge >= 0},
		{"workspaces-max-bytes", workspaces >= 0},
	} {
		if !c.ok {
			return usageError{fmt.Errorf("--%s %s: out of range (default %s)", c.flag, cmd.Flag(c.flag).Value, cmd.Flag(c.flag).DefValue)}
		}
	}
	return nil
}

func loadServerTLS(certFile, keyFile, caFile string) (credentials.TransportCredentials, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, usageError{errors.New("mutual TLS needs all of --tls-cert, --tls-key and --client-ca")}
	}
	var files [3][]byte
	for i, f := range []string{certFile, keyFile, caFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		files[i] = b
	}
	cfg, err := pki.ServerConfig(pki.Pair{CertPEM: files[0], KeyPEM: files[1]}, files[2])
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// readSecret reads the secret from file, or takes it from the environment
// and removes it there.
func readSecret(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read --secret-file: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", usageError{fmt.Errorf("--secret-file %s is empty", file)}
	}
	s := os.Getenv(daemon.EnvSecret)
	_ = os.Unsetenv(daemon.EnvSecret)
	if s == "" {
		return "", usageError{fmt.Errorf("no orchestrator secret: pass --secret-file or set %s", daemon.EnvSecret)}
	}
	return s, nil
}

func mcpCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var configPath, logLevel string
	cmd := &cobra.Command{
		Use:   "mcp --config BRIDGE_JSON",
		Short: "Serve one session's tools over stdio, for agents that only spawn stdio MCP servers",
		Long: `Serve one agentctl session over stdio: the same tools as its streamable HTTP
endpoint, and the same tools/list_changed notifications. agentctl writes the
bridge config (bridge.json) and an mcp.json entry that runs this command next to
each session's config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(stderr, logLevel)
			if err != nil {
				return err
			}
			if configPath == "" {
				return usageError{errors.New("--config is required: the bridge.json of the session to serve")}
			}
			cfg, err := mcpbridge.LoadConfig(configPath)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			transport := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
			return mcpbridge.Run(ctx, cfg, transport, version.String(), log)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "bridge config written by agentctl serve (bridge.json)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
