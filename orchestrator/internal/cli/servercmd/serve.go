// Package servercmd holds the commands that run the orchestrator in their
// own process: serve and demo. They are the toolscope-server binary's
// additions to the command line of package cli; the toolscope binary links
// none of this and hands these two commands to toolscope-server (ADR 0035).
package servercmd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolscope/toolscope/executors/docker"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/console"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Commands returns serve and demo, new for each command line.
func Commands() []*cobra.Command {
	cmds := []*cobra.Command{serveCmd(), demoCmd()}
	for _, c := range cmds {
		// Run by the toolscope binary: the same build only.
		c.PreRunE = func(*cobra.Command, []string) error { return cli.CheckCallerBuild() }
	}
	return cmds
}

// jsonOut is the command line's --json.
func jsonOut(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

func serveCmd() *cobra.Command {
	var cfg server.Config
	var logLevel, dbPasswordEnv, dbPasswordFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: cli.ServeShort,
		Long: `Run the orchestrator until interrupted. It serves the public gRPC API, with
gRPC health checking and server reflection, on the Unix socket
<data-dir>/toolscope.sock (mode 0600, in a 0700 directory): the account the
orchestrator runs as (and root) connects there with no setup and has the admin
role. Records live in an SQLite database under --data-dir, or in the PostgreSQL
database --database names (its password from --database-password-env or
--database-password-file, never in the URL).

--listen ADDR also serves TCP. Every caller there authenticates, with an API
token ('toolscope token create') or a client certificate (--client-ca; see
'toolscope certs client'). A non-loopback address needs TLS (--tls-cert and
--tls-key).

--console ADDR serves the web console there (e.g. 127.0.0.1:7780): people log in
with an API token or a client certificate and see and do what their role allows.
It shares --tls-cert, --tls-key and --client-ca; a non-loopback address needs
them.

--hosted ADDR serves hosted sessions there ('toolscope session attach TASK'): the
orchestrator serves a task's tools over MCP to an agent that runs elsewhere, behind a
bearer token per session. A non-loopback address needs --tls-cert and --tls-key.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return cli.Usagef("invalid --log-level %q: use debug, info, warn or error", logLevel)
			}
			switch {
			case dbPasswordEnv != "":
				cfg.DatabasePassword = model.CredentialRef{Kind: model.CredentialEnv, Ref: dbPasswordEnv}
			case dbPasswordFile != "":
				cfg.DatabasePassword = model.CredentialRef{Kind: model.CredentialFile, Ref: dbPasswordFile}
			}
			if cfg.DBMaxReaders < 1 {
				return cli.Usagef("invalid --db-max-readers %d: give at least 1", cfg.DBMaxReaders)
			}
			if cfg.ProviderCalls.MaxConcurrent < 1 {
				return cli.Usagef("invalid --provider-concurrency %d: give at least 1", cfg.ProviderCalls.MaxConcurrent)
			}
			if err := checkServeBounds(cmd); err != nil {
				return err
			}
			if cfg.ConsoleLogins.SessionTTL <= 0 || cfg.ConsoleLogins.MaxSessions < 1 || cfg.ConsoleLogins.MaxStreams < 1 {
				return cli.Usagef("invalid --console-login-ttl, --console-max-logins or --console-max-streams: give a positive duration and at least 1")
			}
			if cfg.ConsoleLogins.MaxSessionsPerCredential < 1 {
				return cli.Usagef("invalid --console-max-logins-per-credential %d: give at least 1", cfg.ConsoleLogins.MaxSessionsPerCredential)
			}
			if cfg.LeaseTTL <= 0 || cfg.LeaseRenew < 0 || cfg.LeaseRenew >= cfg.LeaseTTL {
				return cli.Usagef("invalid --lease-ttl %s or --lease-renew %s: give a positive lease and a renewal shorter than it (0: a third of the lease; defaults %s and %s)",
					cfg.LeaseTTL, cfg.LeaseRenew, service.DefaultLeaseTTL, service.DefaultLeaseRenew)
			}
			if cfg.ProviderCalls.MaxQueued < 0 {
				return cli.Usagef("invalid --provider-queue %d: give 0 or more", cfg.ProviderCalls.MaxQueued)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, cfg, func(r server.Ready) {
				if jsonOut(cmd) {
					_ = json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
						Socket   string `json:"socket"`
						Addr     string `json:"addr,omitempty"`
						Database string `json:"database"`
						Console  string `json:"console,omitempty"`
						Metrics  string `json:"metrics,omitempty"`
						Hosted   string `json:"hosted,omitempty"`
					}{r.Socket, r.Addr, r.DBPath, r.Console, r.Metrics, r.Hosted})
					return
				}
				fmt.Fprintf(cmd.OutOrStdout(), "toolscope serving on unix://%s (database %s)\n", r.Socket, r.DBPath)
				if r.Addr != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "and on %s (TCP: API token or client certificate required)\n", r.Addr)
				}
				if r.Console != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "web console: %s (log in with an API token: toolscope token create NAME --role member)\n", r.Console)
				}
				if r.Metrics != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "metrics: %s (Prometheus; loopback only, no credential)\n", r.Metrics)
				}
				if r.Hosted != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "hosted MCP endpoint: %s (open a session with: toolscope session attach TASK)\n", r.Hosted)
				}
				hint := "workspace create demo"
				if r.Workspaces > 0 {
					hint = "task list"
				}
				if def, err := paths.DefaultDataDir(); err == nil && paths.Socket(def) == r.Socket {
					fmt.Fprintf(cmd.OutOrStdout(), "try: toolscope %s\n", hint)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "try: toolscope --server unix://%s %s\n", r.Socket, hint)
				}
			})
		},
	}
	cmd.Flags().StringVar(&cfg.Listen, "listen", "", "also serve TCP on this address, authenticated (port 0 picks a free port); a non-loopback address needs --tls-cert")
	cmd.Flags().StringVar(&cfg.TLS.CertFile, "tls-cert", "", "server certificate for --listen and --console (e.g. from 'toolscope certs server')")
	cmd.Flags().StringVar(&cfg.TLS.KeyFile, "tls-key", "", "its private key")
	cmd.Flags().StringVar(&cfg.TLS.ClientCA, "client-ca", "", "CA whose client certificates authenticate callers on --listen and --console (role in the Subject's OU)")
	cmd.Flags().StringVar(&cfg.Console, "console", "", "serve the web console on this TCP address (e.g. 127.0.0.1:7780; port 0 picks a free port); a non-loopback address needs --tls-cert")
	cmd.Flags().StringVar(&cfg.Metrics, "metrics-addr", "", "serve Prometheus metrics at /metrics on this loopback address (e.g. 127.0.0.1:9464; port 0 picks a free port)")
	cmd.Flags().DurationVar(&cfg.ConsoleLogins.SessionTTL, "console-login-ttl", console.DefaultSessionTTL, "a console login idle this long ends")
	cmd.Flags().IntVar(&cfg.ConsoleLogins.MaxSessions, "console-max-logins", console.DefaultMaxSessions, "console logins held at once; beyond, a new login of a credential holding none is refused (429) until one ends")
	cmd.Flags().IntVar(&cfg.ConsoleLogins.MaxSessionsPerCredential, "console-max-logins-per-credential", console.DefaultMaxSessionsPerCredential, "console logins of one API token or client certificate at once; its new login beyond ends its own least recently used one")
	cmd.Flags().IntVar(&cfg.ConsoleLogins.MaxStreams, "console-max-streams", console.DefaultMaxStreams, "console event streams (open session and events pages) served at once; beyond, a page's stream is answered 503 and retried")
	cmd.Flags().StringVar(&cfg.WorkspacesDir, "workspaces-dir", "", "directory of the local executor's session workspaces (checkouts of the tasks' repositories), kept after a session stops; agents under uids of their own (as root) must be able to traverse its parents (default: DATA_DIR/workspaces)")
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "", "directory of the SQLite database and the socket, created 0700 (default $TOOLSCOPE_DATA_DIR, $XDG_DATA_HOME/toolscope or ~/.local/share/toolscope)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&cfg.Agentctl, "agentctl", "", "static agentctl binary for the local and docker executors (default: next to toolscope, then PATH)")
	cmd.Flags().DurationVar(&cfg.PollInterval, "poll-interval", time.Minute, "how often to poll the tasks' pull and merge requests (0: never)")
	cmd.Flags().DurationVar(&cfg.PushTimeout, "push-timeout", service.DefaultPushTimeout, "bound on one push of a session's tool surface to its agentctl")
	cmd.Flags().IntVar(&cfg.AuditKeep, "audit-keep", store.DefaultAuditKeep, "tool.called events each task keeps, the newest; older ones are removed (every 10 minutes) and their number recorded. Each session records at most 20 calls a second (bursts of 100) one by one, and counts the rest")
	cmd.Flags().StringSliceVar(&cfg.AgentEnv, "agent-env", service.DefaultAgentEnv, "variables of the executors' environment a launch may pass to its agent by name (session launch --env, --credential-env); patterns like CLAUDE_CODE_*; repeat or separate with commas. Never a connection's or MCP server's credential variable, nor the orchestrator's own, whatever this says")
	cmd.Flags().IntVar(&cfg.MaxInspects, "max-inspects", service.DefaultMaxInspects, "running sessions one listing (session list, the console) asks for their state at once; an agentctl that does not answer holds a listing up to its probe timeout")
	cmd.Flags().DurationVar(&cfg.RepairBackoff, "repair-backoff", service.DefaultRepairBackoff, "longest wait between two failed attempts to bring a session to its tool surface")
	cmd.Flags().StringVar(&cfg.Database, "database", "", "PostgreSQL connection URL without a password (postgres://user@host:port/db?sslmode=verify-full) used instead of the SQLite database in --data-dir (default $"+server.EnvDatabase+")")
	cmd.Flags().StringVar(&dbPasswordEnv, "database-password-env", "", "environment variable holding the PostgreSQL password")
	cmd.Flags().StringVar(&dbPasswordFile, "database-password-file", "", "file holding the PostgreSQL password")
	cmd.MarkFlagsMutuallyExclusive("database-password-env", "database-password-file")
	cmd.Flags().DurationVar(&cfg.LeaseTTL, "lease-ttl", service.DefaultLeaseTTL, "replicas on one PostgreSQL database: a replica that has not renewed its lease for this long (by the database's clock) loses its sessions to another replica")
	cmd.Flags().DurationVar(&cfg.LeaseRenew, "lease-renew", 0, "how often a replica renews its lease and looks for sessions to take over, less than --lease-ttl (0: a third of it, at most "+service.DefaultLeaseRenew.String()+")")
	cmd.Flags().IntVar(&cfg.DBMaxReaders, "db-max-readers", store.DefaultMaxReaders, "bound on the database's reader connections (each holds up to 3 file descriptors)")
	cmd.Flags().IntVar(&cfg.ProviderCalls.MaxConcurrent, "provider-concurrency", forge.DefaultLimiterOptions.MaxConcurrent, "provider API calls in flight at once on one workspace connection")
	cmd.Flags().IntVar(&cfg.ProviderCalls.MaxQueued, "provider-queue", forge.DefaultLimiterOptions.MaxQueued, "more calls that wait for a place; beyond, calls are refused rate_limited with a retry hint")
	f := cmd.Flags()
	f.Int64Var(&cfg.Logs.MaxBytes, "logs-max-bytes", logdir.DefaultMaxBytes, "bound on the stopped sessions' logs in <data-dir>/logs: the oldest are removed first (0: no bound; a session not stopped keeps its logs)")
	f.DurationVar(&cfg.Logs.MaxAge, "logs-max-age", logdir.DefaultMaxAge, "stopped sessions' logs unchanged for this long are removed (0: kept whatever their age)")
	f.IntVar(&cfg.DockerLogTailLines, "docker-log-tail", docker.DefaultLogTailLines, "lines of a container's output (its agentctl's log) sent before following it")
	// Passed to each agentctl the local and docker executors start; a
	// remote host's daemon takes the same flags from its operator. 0:
	// agentctl's default.
	f.IntVar(&cfg.AgentctlFlags.ExitTailLines, "exit-tail-lines", 0, "most lines of an agent's output its agent.exited event carries (0: agentctl's default, 20)")
	f.IntVar(&cfg.AgentctlFlags.ExitTailBytes, "exit-tail-bytes", 0, "most bytes of an agent's output its agent.exited event carries (0: agentctl's default, 4096)")
	f.Int64Var(&cfg.AgentctlFlags.LogBacklog, "log-backlog", 0, "bytes of a log 'session logs' sends before following it (0: the default, 1 MiB)")
	f.Int64Var(&cfg.AgentctlFlags.AgentLogMax, "agent-log-max-bytes", 0, "bound on a running agent's log, rotated at half of it (0: agentctl's default, 64 MiB)")
	f.Int64Var(&cfg.AgentctlFlags.WorkspacesMax, "workspaces-max-bytes", 0, "bound on the disk an executor host's workspaces and mirrors use together; no checkout is made past it (0: agentctl's default, 50 GiB)")
	f.DurationVar(&cfg.AgentctlFlags.MCPHeaderTimeout, "mcp-header-timeout", 0, "sessions' MCP endpoints: time for a request's headers (0: agentctl's default, "+mcpserver.DefaultHeaderTimeout.String()+")")
	f.DurationVar(&cfg.AgentctlFlags.MCPBodyTimeout, "mcp-body-timeout", 0, "sessions' MCP endpoints: time for a request's body (0: agentctl's default, "+mcpserver.DefaultBodyTimeout.String()+")")
	f.DurationVar(&cfg.AgentctlFlags.MCPIdleTimeout, "mcp-idle-timeout", 0, "sessions' MCP endpoints: idle kept-alive connections are closed after this (0: agentctl's default, "+mcpserver.DefaultIdleTimeout.String()+")")
	f.IntVar(&cfg.AgentctlFlags.MCPMaxConns, "mcp-max-conns", 0, "sessions' MCP endpoints: most connections open at once, each (0: agentctl's default, "+strconv.Itoa(mcpserver.DefaultMaxConns)+")")
	f.IntVar(&cfg.AgentctlFlags.MCPMaxSessions, "mcp-max-sessions", 0, "sessions' MCP endpoints: most MCP sessions at once, each (0: agentctl's default, "+strconv.Itoa(mcpserver.DefaultMaxSessions)+")")
	f.DurationVar(&cfg.AgentctlFlags.MCPSessionIdle, "mcp-session-idle", 0, "sessions' MCP endpoints: an MCP session idle this long is closed (0: agentctl's default, "+mcpserver.DefaultSessionIdle.String()+")")
	// The hosted endpoint (ADR 0026): hosted sessions' MCP, served by the
	// orchestrator; its bounds are agentctl's --mcp-* ones, for it.
	f.StringVar(&cfg.Hosted, "hosted", "", "serve hosted sessions' MCP endpoints ('session attach') on this TCP address (e.g. 127.0.0.1:7781; port 0 picks a free port); a non-loopback address needs --tls-cert")
	f.IntVar(&cfg.HostedSessions.Total, "max-hosted", service.DefaultMaxHosted, "hosted sessions running at once; more attaches are refused")
	f.IntVar(&cfg.HostedSessions.PerTask, "max-hosted-per-task", service.DefaultMaxHostedPerTask, "hosted sessions of one task running at once; more attaches are refused")
	f.DurationVar(&cfg.HostedLimits.HeaderTimeout, "hosted-header-timeout", mcpserver.DefaultHeaderTimeout, "hosted endpoint: time for a request's headers")
	f.DurationVar(&cfg.HostedLimits.BodyTimeout, "hosted-body-timeout", mcpserver.DefaultBodyTimeout, "hosted endpoint: time for a request's body once its headers are in")
	f.DurationVar(&cfg.HostedLimits.IdleTimeout, "hosted-idle-timeout", mcpserver.DefaultIdleTimeout, "hosted endpoint: idle kept-alive connections are closed after this")
	f.Int64Var(&cfg.HostedLimits.MaxBodyBytes, "hosted-body-max-bytes", mcpserver.MaxRequestBytes, "hosted endpoint: most bytes of a request's body (at most the default); larger is answered 413")
	f.IntVar(&cfg.HostedLimits.MaxConns, "hosted-max-conns", mcpserver.DefaultMaxConns, "hosted endpoint: most connections open at once, all sessions together; at the bound, a new connection closes one no request has authenticated yet, else waits to be accepted")
	f.IntVar(&cfg.HostedLimits.MaxSessions, "hosted-max-sessions", mcpserver.DefaultMaxSessions, "hosted endpoint: most MCP sessions (clients before 2026-07-28) of one hosted session at once; more are refused")
	f.IntVar(&cfg.HostedLimits.RefusalReports, "hosted-refusal-reports", mcpserver.DefaultRefusalReports, "hosted endpoint: most reports a second, per session, of the tool calls it refuses itself (a tool not listed, arguments its schema refuses) that go to the audit; the rest are counted in the next report")
	f.DurationVar(&cfg.HostedLimits.SessionIdle, "hosted-session-idle", mcpserver.DefaultSessionIdle, "hosted endpoint: an MCP session with no request (a notification stream counts as one) for this long is closed")
	f.IntVar(&cfg.AgentctlFlags.MCPEventBytes, "mcp-event-bytes", 0, "sessions' MCP endpoints: bytes an MCP session keeps to resume a broken stream (0: agentctl's default, 65536)")
	f.DurationVar(&cfg.AgentctlFlags.MCPEventAge, "mcp-event-age", 0, "sessions' MCP endpoints: a request's stream is kept for resuming this long (0: agentctl's default, 1m0s)")
	cmd.Flags().StringVar(&cfg.Remote.Addr, "remote-addr", "", "host:port of an agentctl daemon on another host (enables the remote executor)")
	cmd.Flags().StringVar(&cfg.Remote.CertFile, "remote-cert", "", "orchestrator client certificate for the remote daemon (from 'toolscope certs init')")
	cmd.Flags().StringVar(&cfg.Remote.KeyFile, "remote-key", "", "its private key")
	cmd.Flags().StringVar(&cfg.Remote.CA, "remote-ca", "", "CA certificate that signed the remote daemon's certificate")
	k := &cfg.Kubernetes
	f.StringVar(&k.Namespace, "kubernetes-namespace", "", "run sessions as pods in this namespace (enables the kubernetes executor; docs/operations.md)")
	f.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig file of the kubernetes executor (default $KUBECONFIG, ~/.kube/config, else the in-cluster configuration)")
	f.StringVar(&k.Context, "kubernetes-context", "", "kubeconfig context of the kubernetes executor (default: the current one)")
	f.StringVar(&k.AgentctlImage, "kubernetes-agentctl-image", "", "the toolscope image with /agentctl, the pods' init container (deploy/kubernetes)")
	f.StringVar(&k.Connect, "kubernetes-connect", "port-forward", "how agentctl is reached: port-forward (through the API server) or pod-ip (an orchestrator inside the cluster)")
	f.StringVar(&k.PullPolicy, "kubernetes-pull-policy", "", "imagePullPolicy of the pods' containers: Always, IfNotPresent or Never (default: the cluster's)")
	f.StringVar(&k.CPU, "kubernetes-cpu", "", "CPU request and limit of each session's pod (e.g. 500m; default: none)")
	f.StringVar(&k.Memory, "kubernetes-memory", "", "memory request and limit of each session's pod (e.g. 1Gi; default: none)")
	f.StringArrayVar(&k.NodeSelector, "kubernetes-node-selector", nil, "key=value the sessions' nodes must carry (repeatable)")
	f.StringArrayVar(&k.Tolerations, "kubernetes-toleration", nil, "key[=value]:Effect taint the sessions' pods tolerate (repeatable)")
	return cmd
}

// checkServeBounds refuses a negative bound among serve's flags, naming
// it (0 is their "default" or "none").
func checkServeBounds(cmd *cobra.Command) error {
	for _, name := range []string{"logs-max-bytes", "logs-max-age", "docker-log-tail", "exit-tail-lines", "exit-tail-bytes",
		"log-backlog", "agent-log-max-bytes", "workspaces-max-bytes", "mcp-header-timeout", "mcp-body-timeout", "mcp-idle-timeout", "mcp-max-conns",
		"mcp-max-sessions", "mcp-session-idle", "mcp-event-bytes", "mcp-event-age"} {
		if v := cmd.Flag(name).Value.String(); strings.HasPrefix(v, "-") {
			return cli.Usagef("invalid --%s %s: give 0 or more (default %s)", name, v, cmd.Flag(name).DefValue)
		}
	}
	for _, name := range []string{"max-inspects", "audit-keep", "max-hosted", "max-hosted-per-task", "hosted-header-timeout", "hosted-body-timeout", "hosted-idle-timeout",
		"hosted-body-max-bytes", "hosted-max-conns", "hosted-max-sessions", "hosted-session-idle", "hosted-refusal-reports"} {
		if v := cmd.Flag(name).Value.String(); strings.HasPrefix(v, "-") || v == "0" || v == "0s" {
			return cli.Usagef("invalid --%s %s: give a positive value (default %s)", name, v, cmd.Flag(name).DefValue)
		}
	}
	if v, _ := cmd.Flags().GetInt64("hosted-body-max-bytes"); v > mcpserver.MaxRequestBytes {
		return cli.Usagef("invalid --hosted-body-max-bytes %d: at most %d", v, mcpserver.MaxRequestBytes)
	}
	return nil
}
