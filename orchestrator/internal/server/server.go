// Package server assembles the orchestrator: it opens the store under the
// data directory, wires the event broker, the catalog's connection pool and
// the service, and serves the public gRPC API with health checking and
// reflection (so grpcurl works) until its context ends.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/docker"
	"github.com/toolscope/toolscope/executors/kubernetes"
	"github.com/toolscope/toolscope/executors/local"
	"github.com/toolscope/toolscope/executors/remote"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/periodic"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/api"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/hosted"
	"github.com/toolscope/toolscope/orchestrator/internal/lifecycle"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/toolcalls"
)

// Config configures the orchestrator server.
type Config struct {
	// Listen, if set, is a TCP address to serve on in addition to the Unix
	// socket. Callers there must authenticate; a non-loopback address
	// needs TLS.
	Listen string
	// TLS, if CertFile is set, serves Listen over TLS.
	TLS TLSConfig
	// DataDir holds the SQLite database and the Unix socket;
	// paths.DefaultDataDir() if empty. It is created 0700.
	DataDir string
	// WorkspacesDir holds the local and docker executors' sessions'
	// workspaces; DataDir/workspaces if empty. Local agents under uids of
	// their own (a root orchestrator) must be able to traverse its
	// parents, which a 0700 DataDir forbids (docs/operations.md,
	// Workspaces); a container sees its session's alone.
	WorkspacesDir string
	// Database, if set (else $TOOLSCOPE_DATABASE), is a PostgreSQL
	// connection URL used instead of the SQLite database in DataDir. It
	// must hold no password: DatabasePassword refers to it.
	Database string
	// DatabasePassword, if its Kind is set, is the reference (environment
	// variable or file) to the PostgreSQL password, resolved at start.
	DatabasePassword model.CredentialRef
	// Agentctl is the agentctl binary the local executor runs; if empty,
	// an agentctl next to the running binary, then on PATH. Without one the
	// local executor is off and says why.
	Agentctl string
	// Remote, if Addr is set, enables the remote executor.
	Remote RemoteConfig
	// Kubernetes, if its Namespace is set, enables the kubernetes executor.
	Kubernetes kubernetes.Settings
	// PollInterval is how often the lifecycle polls the tasks' pull and
	// merge requests; zero turns polling off.
	PollInterval time.Duration
	// PushTimeout bounds one push of a surface to a session
	// (service.DefaultPushTimeout if zero); RepairBackoff bounds the wait
	// between two failed attempts to bring a session to its desired
	// surface (service.DefaultRepairBackoff if zero).
	PushTimeout, RepairBackoff time.Duration
	// LeaseTTL and LeaseRenew are the replica lease's (ADR 0027):
	// service.DefaultLeaseTTL and service.DefaultLeaseRenew if zero.
	LeaseTTL, LeaseRenew time.Duration
	// MaxInspects bounds the running sessions one listing inspects at
	// once (service.DefaultMaxInspects if zero).
	MaxInspects int
	// AgentEnv lists the variables a launch may pass to its agent by name
	// (service.DefaultAgentEnv if nil).
	AgentEnv []string
	// AuditKeep is how many tool.called events each task keeps, the
	// newest (store.DefaultAuditKeep if zero).
	AuditKeep int
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
	// ProviderCalls bounds the provider calls in flight on each workspace
	// connection; forge.DefaultLimiterOptions if zero.
	ProviderCalls forge.LimiterOptions
	// DBMaxReaders bounds the database's reader connections;
	// store.DefaultMaxReaders if zero.
	DBMaxReaders int
	// AgentctlFlags are the bounds every agentctl the local and docker
	// executors start gets (agentctl's defaults where zero).
	AgentctlFlags executors.AgentctlFlags
	// DockerLogTailLines bounds the lines of a container's output read
	// before following it; docker.DefaultLogTailLines if zero.
	DockerLogTailLines int
	// Logs bounds DataDir/logs, the stopped sessions' logs; no bound if
	// zero.
	Logs logdir.Bound
	// Console, if set, serves the web console on this TCP address
	// (behind the API's authentication and roles; a non-loopback address
	// needs the TLS files). ConsoleLogins bounds its logins.
	Console       string
	ConsoleLogins ConsoleConfig
	// Metrics, if set, serves the Prometheus metrics on this loopback TCP
	// address, at MetricsPath (ADR 0028).
	Metrics string
	// Hosted, if set, serves hosted sessions' MCP endpoints on this TCP
	// address (package hosted, ADR 0026; a non-loopback address needs the
	// TLS files). HostedLimits bound the endpoint (mcpserver's defaults
	// where zero), HostedSessions the hosted sessions (service's defaults).
	Hosted         string
	HostedLimits   mcpserver.Limits
	HostedSessions service.HostedLimits
}

// logsPruneInterval is how often DataDir/logs is bounded besides at start
// and after each stop (for Logs.MaxAge).
const logsPruneInterval = time.Hour

// auditFlushInterval is how often the calls the audit's rate suppressed
// are recorded; auditPruneInterval how often each task's audit is cut to
// its bound.
const (
	auditFlushInterval = 2 * time.Second
	auditPruneInterval = 10 * time.Minute
)

// RemoteConfig is how the orchestrator reaches an agentctl daemon on
// another host: its address and the files of the mutual TLS pair (see
// `toolscope certs`).
type RemoteConfig struct {
	Addr                  string
	CertFile, KeyFile, CA string
}

// TLSConfig names the files of the TCP listener's TLS: the server's
// certificate and key, and, optionally, the CA whose client certificates
// authenticate callers (their role is in the Subject's OrganizationalUnit;
// see 'toolscope certs client').
type TLSConfig struct {
	CertFile, KeyFile, ClientCA string
}

// FindAgentctl returns the agentctl binary: next to the running
// executable, else on PATH.
func FindAgentctl() (string, error) {
	if path, ok := paths.Companion("agentctl"); ok {
		return path, nil
	}
	return "", errors.New("no agentctl next to this binary or on PATH (build it with 'make build', or pass --agentctl)")
}

// EnvDatabase names the environment variable that gives the PostgreSQL
// connection URL when Config.Database is empty.
const EnvDatabase = "TOOLSCOPE_DATABASE"

// database returns the PostgreSQL URL and its password ("" and "": the
// SQLite database in the data directory). The password is resolved from
// its reference now, so a missing one stops the start with a clear error,
// and is recorded in the scrub set like every resolved credential.
func database(cfg Config, creds credentials.Resolver) (dbURL, password string, err error) {
	dbURL = cfg.Database
	if dbURL == "" {
		dbURL = os.Getenv(EnvDatabase)
	}
	if cfg.DatabasePassword.Kind == "" {
		return dbURL, "", nil
	}
	if dbURL == "" {
		return "", "", fmt.Errorf("invalid database password reference: given without a PostgreSQL database (--database): %w", errdefs.ErrInvalidArgument)
	}
	if password, err = creds.Resolve(cfg.DatabasePassword); err != nil {
		return "", "", fmt.Errorf("invalid database password reference: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	return dbURL, password, nil
}

// InstallationID identifies this orchestrator's installation to every
// agentctl it attaches to (ADR 0014): the host and the database's
// absolute, resolved path. A restart on the same data directory keeps it;
// a copy of the database elsewhere, on this host or another, has another
// one, so agentctl refuses to let it take over the original's sessions.
// Docker containers are labelled with it too.
func InstallationID(dbPath string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	if abs, err := filepath.Abs(dbPath); err == nil {
		dbPath = abs
	}
	if resolved, err := filepath.EvalSymlinks(dbPath); err == nil {
		dbPath = resolved
	}
	return "toolscope@" + host + ":" + dbPath
}

// ReplicaID names this orchestrator process among the replicas that share
// a PostgreSQL database (ADR 0027): the host and the data directory's
// absolute, resolved path. A restart keeps it, so the restarted replica
// finds its sessions its own; two replicas cannot have one, since a data
// directory serves one process (its socket lock).
func ReplicaID(dataDir string) string {
	return strings.TrimPrefix(InstallationID(dataDir), "toolscope@")
}

// newDocker enables the docker executor when a Docker engine answers.
func newDocker(ctx context.Context, cfg Config, d *toolcalls.Dispatcher, ev executors.EventHandler, id string, log *slog.Logger) (*docker.Executor, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ping, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := cli.Ping(ping); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	return docker.New(docker.Options{
		Agentctl: cfg.Agentctl, StateDir: filepath.Join(cfg.DataDir, "containers"), Client: cli,
		WorkspacesDir: cfg.WorkspacesDir, MirrorsDir: filepath.Join(cfg.DataDir, "docker-mirrors"),
		AgentctlFlags: cfg.AgentctlFlags, LogTailLines: cfg.DockerLogTailLines,
		Calls: d.CallHandler, Events: ev, OrchestratorID: id, Log: log,
	})
}

// newKubernetes enables the kubernetes executor: pods in the namespace
// given, reached through a kubeconfig context or the in-cluster
// configuration (ADR 0031).
func newKubernetes(cfg Config, d *toolcalls.Dispatcher, ev executors.EventHandler, id string, log *slog.Logger) (*kubernetes.Executor, error) {
	opts, err := cfg.Kubernetes.Options()
	if err != nil {
		return nil, err
	}
	opts.StateDir = filepath.Join(cfg.DataDir, "kubernetes")
	opts.AgentctlFlags, opts.Calls, opts.Events, opts.OrchestratorID, opts.Log = cfg.AgentctlFlags, d.CallHandler, ev, id, log
	return kubernetes.New(opts)
}

func newRemote(rc RemoteConfig, d *toolcalls.Dispatcher, ev executors.EventHandler, id string, log *slog.Logger) (*remote.Executor, error) {
	if rc.CertFile == "" || rc.KeyFile == "" || rc.CA == "" {
		return nil, errdefs.InvalidField("remote", "needs --remote-cert, --remote-key and --remote-ca (create them with 'toolscope certs')")
	}
	var files [3][]byte
	for i, f := range []string{rc.CertFile, rc.KeyFile, rc.CA} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		files[i] = b
	}
	tlsCfg, err := pki.ClientConfig(pki.Pair{CertPEM: files[0], KeyPEM: files[1]}, files[2])
	if err != nil {
		return nil, err
	}
	return remote.New(remote.Options{Addr: rc.Addr, TLS: tlsCfg, Calls: d.CallHandler, Events: ev, OrchestratorID: id, Log: log})
}

// registerServices registers everything the server serves: the public
// API, health checking and reflection. Every method of these must be in
// access.Table or access.Open (TestEveryMethodHasARole).
func registerServices(srv *grpc.Server, svc *service.Service) *health.Server {
	api.Register(srv, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	for _, name := range api.ServiceNames {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(srv)
	return hs
}

// Ready describes a server that accepts connections.
type Ready struct {
	Socket string // the Unix socket's path
	Addr   string // the TCP address actually bound (useful with port 0); empty without Listen
	DBPath string
	// Console is the web console's URL; empty without Config.Console.
	Console string
	// Metrics is the metrics' URL; empty without Config.Metrics.
	Metrics string
	// Hosted is the hosted endpoint's URL; empty without Config.Hosted.
	Hosted string
	// Workspaces is how many workspaces the database holds, so that the
	// first hint fits it (create one, or list what is there).
	Workspaces int
}

// Run serves until ctx ends, then stops gracefully. ready, if set, is
// called once the listener is bound and the store is open.
func Run(ctx context.Context, cfg Config, ready func(Ready)) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every credential the orchestrator resolves is recorded in secrets;
	// what leaves toward an agent (tool results), a watcher (events,
	// prompts) or the log is scrubbed of those values and of token-shaped
	// strings (package scrub).
	secrets := &scrub.Set{}
	creds := credentials.Resolver{Secrets: secrets}
	log = slog.New(scrub.NewHandler(log.Handler(), secrets))
	if cfg.DataDir == "" {
		d, err := paths.DefaultDataDir()
		if err != nil {
			return err
		}
		cfg.DataDir = d
	}
	tlsConfig, err := checkListen(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	if info, err := os.Stat(cfg.DataDir); err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("the data directory is open to other users; it holds the socket and agentctl secrets (chmod 700 it)",
			"dir", cfg.DataDir, "mode", info.Mode().Perm().String())
	}
	// Bound first, so that a second orchestrator on the same data
	// directory stops here, before it touches the store or any session;
	// connections wait in the backlog until Serve.
	sock, err := listenSocket(paths.Socket(cfg.DataDir))
	if err != nil {
		return err
	}
	defer sock.Close()
	var tcp net.Listener
	if cfg.Listen != "" {
		if tcp, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s (set --listen to another address): %w", cfg.Listen, err)
		}
		defer tcp.Close()
	}
	var metricsLis net.Listener
	if cfg.Metrics != "" {
		if metricsLis, err = listenMetrics(cfg.Metrics); err != nil {
			return err
		}
		defer metricsLis.Close()
	}
	obs := newMetrics(metricsLis)

	broker := &events.Broker{}
	// With a shared database the follower is the broker's one source, in
	// sequence order across replicas; this process's commits only nudge it.
	var follower atomic.Pointer[service.Follower]
	dbOpts := store.Options{Logger: log, OnCommit: broker.Publish, Secrets: secrets, MaxReaders: cfg.DBMaxReaders, Metrics: obs}
	if dbOpts.DatabaseURL, dbOpts.DatabasePassword, err = database(cfg, creds); err != nil {
		return err
	}
	if dbOpts.DatabaseURL != "" {
		dbOpts.OnCommit = func([]model.Event) {
			if f := follower.Load(); f != nil {
				f.Nudge()
			}
		}
	}
	st, err := store.Open(ctx, cfg.DataDir, dbOpts)
	if err != nil {
		return err
	}
	defer st.Close()
	// The goroutines that use the store end before it closes.
	var background sync.WaitGroup
	defer background.Wait()
	ctx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()

	// The one component that reaches GitHub and GitLab: the tool calls,
	// the lifecycle poller and the connection validation share its
	// per-connection rate limit and bound on calls in flight.
	conns := connections.New(st, connections.Options{Credentials: creds, Limits: cfg.ProviderCalls, Metrics: obs})
	dispatcher := toolcalls.New(st, log)
	dispatcher.SetConnections(conns)
	dispatcher.SetMetrics(obs)
	// Backends report sessions lost on their own; the service (created
	// below, before anything is launched or re-attached) records them.
	var eventsTo atomic.Pointer[service.Service]
	sessionEvents := func(ev executors.SessionEvent) {
		if s := eventsTo.Load(); s != nil {
			s.SessionEvent(ev)
		}
	}
	execs := map[string]executors.Executor{}
	if cfg.Agentctl == "" {
		if found, err := FindAgentctl(); err != nil {
			log.Warn("the local executor is off", "reason", err.Error())
		} else {
			cfg.Agentctl = found
		}
	}
	orchestratorID := InstallationID(st.Path())
	if st.Shared() {
		// Every replica of a shared database is one installation to the
		// agentctls (ADR 0014): any of them may take a session over.
		orchestratorID = "toolscope@" + st.Path()
	}
	// With SQLite one process serves the database, so it has one replica,
	// unnamed: every session is its own, as before replicas (a restored
	// copy tries them all, and agentctl refuses it, ADR 0014).
	replica := ""
	if st.Shared() {
		replica = ReplicaID(cfg.DataDir)
	}
	if cfg.Agentctl != "" {
		localExec, err := local.New(local.Options{
			Agentctl: cfg.Agentctl, StateDir: filepath.Join(cfg.DataDir, "sessions"), LogsDir: filepath.Join(cfg.DataDir, "logs"), Calls: dispatcher.CallHandler,
			WorkspacesDir: cfg.WorkspacesDir, MirrorsDir: filepath.Join(cfg.DataDir, "mirrors"),
			Events: sessionEvents, OrchestratorID: orchestratorID, Log: log, AgentctlFlags: cfg.AgentctlFlags,
		})
		if err != nil {
			return fmt.Errorf("local executor: %w", err)
		}
		defer localExec.Close()
		execs[local.Name] = localExec
		if dockerExec, err := newDocker(ctx, cfg, dispatcher, sessionEvents, orchestratorID, log); err != nil {
			log.Warn("the docker executor is off", "reason", err.Error())
		} else {
			defer dockerExec.Close()
			execs[docker.Name] = dockerExec
		}
	}
	if cfg.Remote.Addr != "" {
		remoteExec, err := newRemote(cfg.Remote, dispatcher, sessionEvents, orchestratorID, log)
		if err != nil {
			return fmt.Errorf("remote executor: %w", err)
		}
		defer remoteExec.Close()
		execs[remote.Name] = remoteExec
	}
	if cfg.Hosted != "" {
		hostedExec, err := serveHosted(cfg, tlsConfig, dispatcher, log)
		if err != nil {
			return err
		}
		defer hostedExec.Close()
		execs[hosted.Name] = hostedExec
	}
	if cfg.Kubernetes.Namespace != "" {
		kubeExec, err := newKubernetes(cfg, dispatcher, sessionEvents, orchestratorID, log)
		if err != nil {
			return fmt.Errorf("kubernetes executor: %w", err)
		}
		defer kubeExec.Close()
		execs[kubernetes.Name] = kubeExec
	}
	for name := range execs {
		log.Info("executor on", "executor", name)
	}
	// Connections to the catalog's external MCP servers: made on first
	// use, closed (stdio servers ended) when Run returns.
	pool := catalog.New(catalog.Options{WorkDir: cfg.DataDir, Logger: log, Credentials: creds})
	defer pool.Close()
	dispatcher.SetExternalCaller(pool)
	svc := service.New(st, broker, service.Options{Logger: log, Executors: execs, Catalog: pool, Connections: conns, DataDir: cfg.DataDir, Logs: cfg.Logs,
		PushTimeout: cfg.PushTimeout, RepairBackoff: cfg.RepairBackoff, Metrics: obs, Hosted: cfg.HostedSessions,
		Replica: replica, LeaseTTL: cfg.LeaseTTL, LeaseRenew: cfg.LeaseRenew, MaxInspects: cfg.MaxInspects,
		AgentEnv: cfg.AgentEnv, ReservedEnv: reservedEnv(cfg), AgentOutputRole: access.Table[access.AgentOutput]})
	eventsTo.Store(svc)
	// Every credential is known to the scrubbers before anything is
	// answered, not only once it was used since this start.
	if err := svc.RememberCredentials(ctx); err != nil {
		return err
	}
	if st.Shared() {
		f, err := svc.NewFollower(ctx)
		if err != nil {
			return err
		}
		follower.Store(f)
		background.Go(func() { f.Run(ctx) })
	}
	svc.SetOrienter(dispatcher.Orientation)
	dispatcher.SetDeliverer(svc.Deliver)
	dispatcher.SetSourceAdder(func(ctx context.Context, sessionID, taskID string, repoIDs []string) (toolcalls.SourceOutcome, error) {
		res, err := svc.AgentAddSources(ctx, sessionID, taskID, repoIDs)
		return toolcalls.SourceOutcome{Providers: res.Sources.Task.Providers, Request: res.Request}, err
	})
	if cfg.PollInterval > 0 {
		opts := lifecycle.Options{Store: st, Deliver: svc.DeliverPrompt, Log: log, Connections: conns,
			Lease: func(ctx context.Context, name string) bool {
				// Held across one interval and a replica lease, so the
				// holder keeps it from one cycle to the next.
				held, _, err := st.TakeLease(ctx, name, replica, cfg.PollInterval+svc.LeaseTTL())
				return err == nil && held
			}}
		if st.Shared() {
			opts.Deliver = nil // each replica's follower delivers to its own sessions
		}
		poller := lifecycle.New(opts)
		background.Go(func() { poller.Run(ctx, cfg.PollInterval) })
		log.Info("lifecycle polling on", "interval", cfg.PollInterval)
	}
	if attached, lost, err := svc.Reattach(ctx); err != nil {
		log.Error("re-attaching sessions failed", "error", err)
	} else if attached+lost > 0 {
		log.Info("sessions from before the restart", "reattached", attached, "lost", lost)
	}
	leaseLost := make(chan error, 1)
	background.Go(func() {
		if err := svc.RunReplica(ctx); err != nil {
			leaseLost <- err
		}
	})

	if cfg.Logs.Set() {
		go periodic.Run(ctx, logsPruneInterval, func(ctx context.Context) error { svc.PruneLogs(ctx); return nil })
	}
	// The audit: what each session's rate suppressed is recorded once it
	// is quiet, and each task keeps its newest AuditKeep calls.
	background.Go(func() {
		periodic.Run(ctx, auditFlushInterval, func(ctx context.Context) error { dispatcher.FlushAudit(ctx); return nil })
	})
	auditKeep := cmp.Or(max(cfg.AuditKeep, 0), store.DefaultAuditKeep)
	background.Go(func() {
		periodic.Run(ctx, auditPruneInterval, func(ctx context.Context) error {
			if n, err := st.PruneAudit(ctx, auditKeep); err != nil {
				log.WarnContext(ctx, "bounding the audit", "error", err)
			} else if n > 0 {
				log.InfoContext(ctx, "audit bounded", "removed_calls", n, "kept_per_task", auditKeep)
			}
			return nil
		})
	})

	auth := &access.Authenticator{Credentials: st, OwnerUID: uint32(os.Getuid()), Log: log}
	opts := append(grpcerr.ServerOptions(log), grpc.Creds(access.Transport(tlsConfig)), tracesetup.ServerOption())
	srv := grpc.NewServer(append(opts, auth.ServerOptions()...)...)
	hs := registerServices(srv, svc)

	serveErr := make(chan error, 2)
	r := Ready{Socket: sock.Addr().String(), DBPath: st.Path()}
	if list, err := st.ListWorkspaces(ctx); err == nil {
		r.Workspaces = len(list)
	}
	go func() { serveErr <- srv.Serve(sock) }()
	serving := 1
	if tcp != nil {
		r.Addr = tcp.Addr().String()
		serving++
		go func() { serveErr <- srv.Serve(tcp) }()
	}
	if cfg.Console != "" {
		consoleCtx, stopConsole := context.WithCancel(ctx)
		defer stopConsole()
		url, consoleDone, err := serveConsole(consoleCtx, cfg, tlsConfig, svc, auth, log)
		if err != nil {
			srv.Stop()
			return err
		}
		defer func() { stopConsole(); <-consoleDone }()
		r.Console = url
	}
	if obs != nil {
		obs.WatchSessions(st)
		metricsCtx, stopMetrics := context.WithCancel(ctx)
		metricsDone := serveMetrics(metricsCtx, metricsLis, obs, log)
		defer func() { stopMetrics(); <-metricsDone }()
		r.Metrics = "http://" + metricsLis.Addr().String() + MetricsPath
	}
	if x, ok := execs[hosted.Name].(*hosted.Executor); ok {
		r.Hosted = x.Base()
	}
	log.Info("toolscope serving", "socket", r.Socket, "addr", r.Addr, "console", r.Console, "metrics", r.Metrics, "hosted", r.Hosted, "tls", tlsConfig != nil, "db", st.Path())
	if ready != nil {
		ready(r)
	}

	select {
	case err := <-serveErr:
		srv.Stop()
		return err
	case err := <-leaseLost:
		// Fail-stop (ADR 0027): a supervisor restarts it, and it finds
		// which sessions are still its own.
		log.Error("stopping: the replica lease lapsed", "error", err.Error())
		srv.Stop()
		svc.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("toolscope stopping")
	hs.Shutdown()
	svc.Close()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		srv.Stop()
	}
	for range serving {
		if err := <-serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
	}
	return nil
}

// reservedEnv names the variables the orchestrator reads for itself,
// beyond its TOOLSCOPE_* and OTEL_* ones: no agent gets them.
func reservedEnv(cfg Config) []string {
	if cfg.DatabasePassword.Kind == model.CredentialEnv {
		return []string{cfg.DatabasePassword.Ref}
	}
	return nil
}
