// Package daemon implements `agentctl serve`: the toolscope.agentctl.v1
// gRPC service that hosts agent sessions for the orchestrator.
//
// For each session it builds the tool registry from the launch spec's mode
// and provider set, serves it over streamable HTTP on loopback behind a
// per-session bearer token, writes an MCP client config the agent can be
// pointed at, and starts the agent command with the endpoint injected.
// ApplySurface rebuilds the registry locally from a surface: the provider
// set and the external tools of the orchestrator's catalog (see
// external.go), each with its generation (a stale part is ignored; the
// mode is kept); the deprecated SetProviders and SetExternalTools are its
// single-part forms. Tool calls go to the orchestrator over the Attach
// stream the orchestrator opened, with the session's identity bound here,
// never taken from the arguments.
//
// Every RPC must be authenticated: by the per-launch secret as a bearer
// token in the "authorization" metadata (local and Docker executors), or by
// a client certificate verified under mutual TLS (remote hosts). Refusals
// are logged without the secret.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/checkout"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
	"github.com/toolscope/toolscope/internal/version"
)

// EnvSecret carries the per-launch secret to `agentctl serve` when no
// --secret-file is given. It is never passed on to agents.
const EnvSecret = "TOOLSCOPE_AGENTCTL_SECRET"

// Options configure a Daemon.
type Options struct {
	// Secret authenticates the orchestrator. Required unless TLSClientAuth.
	Secret string
	// TLSClientAuth accepts calls whose peer presented a client certificate
	// that the gRPC server's mutual TLS verified.
	TLSClientAuth bool
	// StateDir holds agentctl's state; sessions' directories (configs,
	// agent logs) are in SessionsDir.
	StateDir string
	// SessionsDir holds one directory per session, owned by the session's
	// uid; StateDir/sessions if empty. Its parents must let the agents'
	// uids through (mode o+x) when AgentUIDs is set.
	SessionsDir string
	// LogsDir keeps the logs of stopped sessions, one directory each
	// (LogsDir/<id>/agent.log): a stopped session's directory, which holds
	// its MCP token, is removed; its agent's log is moved here first.
	// StateDir/logs if empty.
	LogsDir string
	// WorkspacesDir holds one workspace per session (its checkouts),
	// kept after the session stops; MirrorsDir the repositories' mirrors
	// the checkouts are made from, which no agent may enter.
	// StateDir/workspaces and StateDir/mirrors if empty.
	WorkspacesDir, MirrorsDir string
	// AgentUIDs, if set, gives each live session's agent a uid of its own
	// from the range; agentctl must then run as root.
	AgentUIDs agentuid.Range
	// AllowSharedUID lets agents of different workspaces share agentctl's
	// uid (no AgentUIDs): the operator accepts that they can read each
	// other's MCP tokens.
	AllowSharedUID bool
	// MCPHost is the address sessions' MCP endpoints bind; 127.0.0.1 if
	// empty.
	MCPHost string
	// MCPPort, if set, is the port of the MCP endpoint, so a container can
	// publish it; only one session can then be hosted. Zero picks a free
	// port per session.
	MCPPort int
	// AgentctlPath, if set, is written into MCP configs as the stdio
	// bridge command (`agentctl mcp`).
	AgentctlPath string
	// CallTimeout bounds one tool call's round trip to the orchestrator.
	CallTimeout time.Duration
	// AdoptWait bounds how long a call that changed the caller's own
	// surface waits for the new provider set and for the session's
	// clients to adopt it; mcpserver.DefaultAdoptWait if zero.
	AdoptWait time.Duration
	// StopGrace is how long an agent gets between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// MaxSessions bounds the sessions hosted at once (stopped ones do not
	// count); DefaultMaxSessions if zero.
	MaxSessions int
	// WorkspacesMaxBytes bounds the disk the host's workspaces and
	// mirrors use (WorkspacesDir and MirrorsDir, a hard-linked file once):
	// no checkout is made once they use it. Zero: no bound (agentctl
	// serve's flag defaults to DefaultWorkspacesMaxBytes).
	WorkspacesMaxBytes int64
	// MCPLimits bound each session's MCP endpoint (connections, request
	// bodies, MCP sessions); unset fields take mcpserver's defaults.
	MCPLimits mcpserver.Limits
	// ExitTailLines and ExitTailBytes bound the agent output an
	// agent_exited event carries; LogBacklog what ReadAgentLog sends
	// before following; AgentLogMax a running agent's log (agent.log and
	// its rotated part agent.log.1). The defaults (DefaultExitTailLines
	// ...) if zero.
	ExitTailLines, ExitTailBytes int
	LogBacklog, AgentLogMax      int64
	// LogFile is the file agentctl's own log is written to (agentctl serve
	// --log-file), which ReadAgentctlLog reads; empty: none (the log goes
	// to stderr only, its host's).
	LogFile string
	// KeptLogs bounds LogsDir: stopped sessions' logs beyond it are
	// removed, the oldest first, whenever a session stops and at start.
	// Zero: no bound (the local executor's agentctl: the orchestrator
	// bounds that directory, which holds every session's logs).
	KeptLogs logdir.Bound
	Logger   *slog.Logger
	// Metrics, if set, is the registry the daemon's metrics are
	// registered on (metrics.go); nil: none are kept.
	Metrics *prometheus.Registry
}

// DefaultWorkspacesMaxBytes is agentctl serve's --workspaces-max-bytes:
// 50 GiB.
const DefaultWorkspacesMaxBytes = 50 << 30

// DefaultMaxSessions is how many sessions one agentctl hosts at once
// unless told otherwise: each runs an agent, an MCP endpoint and its
// clients, so a host is better protected by a bound it can raise than by
// none.
const DefaultMaxSessions = 64

// Daemon hosts sessions. It is safe for concurrent use.
type Daemon struct {
	agentctlv1.UnimplementedAgentctlServiceServer

	opts        Options
	log         *slog.Logger
	callTimeout time.Duration
	hub         hub
	schemas     mcpserver.Schemas
	metrics     *metrics // nil without Options.Metrics
	mirrors     func() (*checkout.Mirrors, error)

	mu       sync.Mutex
	sessions map[string]*session
}

// New returns a daemon. It refuses an empty secret.
func New(opts Options) (*Daemon, error) {
	if opts.Secret == "" && !opts.TLSClientAuth {
		return nil, errdefs.InvalidField("secret", "is required without mutual TLS: the orchestrator authenticates with it")
	}
	if opts.StateDir == "" {
		return nil, errdefs.RequiredField("state_dir")
	}
	if opts.SessionsDir == "" {
		opts.SessionsDir = filepath.Join(opts.StateDir, "sessions")
	}
	if opts.LogsDir == "" {
		opts.LogsDir = filepath.Join(opts.StateDir, "logs")
	}
	opts.WorkspacesDir = cmp.Or(opts.WorkspacesDir, filepath.Join(opts.StateDir, "workspaces"))
	opts.MirrorsDir = cmp.Or(opts.MirrorsDir, filepath.Join(opts.StateDir, "mirrors"))
	if opts.AgentUIDs.Set() && os.Geteuid() != 0 {
		return nil, errdefs.InvalidField("agent_uids", "needs agentctl to run as root (it runs as uid %d), to start agents under other uids", os.Geteuid())
	}
	if opts.AgentUIDs.Set() {
		if err := reachableSessions(opts); err != nil {
			return nil, err
		}
	}
	if opts.MCPHost == "" {
		opts.MCPHost = "127.0.0.1"
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.AdoptWait <= 0 {
		opts.AdoptWait = mcpserver.DefaultAdoptWait
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	opts.ExitTailLines = cmp.Or(max(opts.ExitTailLines, 0), DefaultExitTailLines)
	opts.ExitTailBytes = cmp.Or(max(opts.ExitTailBytes, 0), DefaultExitTailBytes)
	opts.LogBacklog = cmp.Or(max(opts.LogBacklog, 0), DefaultLogBacklog)
	opts.AgentLogMax = cmp.Or(max(opts.AgentLogMax, 0), DefaultAgentLogMax)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{opts: opts, log: opts.Logger, callTimeout: opts.CallTimeout, sessions: map[string]*session{}}
	// Opened at the first checkout: made now, the mirrors' 0700
	// directory would make a missing state directory 0700 too, which the
	// agents must traverse to their sessions' directories.
	d.mirrors = sync.OnceValues(func() (*checkout.Mirrors, error) { return checkout.OpenMirrors(opts.MirrorsDir) })
	d.register(opts.Metrics)
	d.retireLeftovers()
	d.pruneLogs()
	return d, nil
}

// reachableSessions refuses a sessions directory the agents' uids could
// not enter: each agent's HOME and MCP configuration are in it, and an
// agent that cannot reach them runs with none of its tools.
func reachableSessions(opts Options) error {
	if err := os.MkdirAll(opts.SessionsDir, 0o711); err != nil {
		return err
	}
	if err := agentuid.Reaches(opts.AgentUIDs.First, opts.SessionsDir, agentuid.Enter); err != nil {
		return errdefs.InvalidField("state_dir", "the agents' uids (--agent-uids %s) could not reach their session directories in %s: %v; "+
			"give it and every directory above it mode o+x (0711 is enough: entered, never listed), or choose another --state-dir", opts.AgentUIDs, opts.SessionsDir, err)
	}
	return nil
}

// retireLeftovers removes the sessions' directories a previous run of the
// daemon left (it crashed, or was killed): a new daemon hosts no session,
// so each of them is a stopped session's, with its MCP token. Their agent
// logs are kept, as a stop keeps them.
func (d *Daemon) retireLeftovers() {
	entries, err := os.ReadDir(d.opts.SessionsDir)
	if err != nil {
		return // none yet
	}
	for _, e := range entries {
		if e.IsDir() {
			// Its workspace too, if it had one (takeBack).
			d.retire(&session{id: e.Name(), dir: filepath.Join(d.opts.SessionsDir, e.Name()),
				workspace: filepath.Join(d.opts.WorkspacesDir, e.Name())})
		}
	}
}

// NewGRPCServer returns a gRPC server with the daemon registered behind
// the error boundary and the secret check.
func (d *Daemon) NewGRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append(grpcerr.ServerOptions(d.log),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := d.authenticate(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := d.authenticate(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	// The orchestrator pings every 10 s to notice a dead agentctl quickly,
	// idle or not; the default policy (5 min) would answer with GOAWAY.
	opts = append(opts, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// agentctl pings too, so that an orchestrator that vanished
		// without closing its connection (a host down, a network cut)
		// stops holding the Attach stream within 15 s and another may
		// attach (ADR 0014).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}))
	opts = append(opts, tracesetup.ServerOption())
	s := grpc.NewServer(append(opts, extra...)...)
	agentctlv1.RegisterAgentctlServiceServer(s, d)
	return s
}

func (d *Daemon) authenticate(ctx context.Context, method string) error {
	p, _ := peer.FromContext(ctx)
	if d.opts.TLSClientAuth && p != nil {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 && len(info.State.VerifiedChains[0]) > 0 {
			// The CA may also sign API callers' certificates (certs
			// client): those carry a role, and are not the orchestrator.
			if err := pki.CheckOrchestrator(info.State.VerifiedChains[0][0]); err != nil {
				d.log.Warn("refused a call with a client certificate that is not the orchestrator's", "method", method, "peer", p.Addr.String(), "reason", err.Error())
				return fmt.Errorf("%v: %w", err, errdefs.ErrUnauthenticated)
			}
			return d.admit(ctx, method)
		}
	}
	given, err := bearer.Check(ctx, d.opts.Secret)
	if err == nil {
		return d.admit(ctx, method)
	}
	from := "unknown"
	if p != nil {
		from = p.Addr.String()
	}
	d.log.Warn("refused a call without the orchestrator secret", "method", method, "peer", from, "token_given", given)
	return err
}

// admit refuses a call (other than Attach, whose hello the hub checks)
// from an installation other than the one agentctl serves: while another
// is attached, or owns the sessions hosted (ADR 0014). A call that names
// no installation is let through.
func (d *Daemon) admit(ctx context.Context, method string) error {
	id := bearer.InstallationOf(ctx)
	if id == "" || method == agentctlv1.AgentctlService_Attach_FullMethodName {
		return nil
	}
	d.mu.Lock()
	hosted := len(d.sessions)
	d.mu.Unlock()
	if err := d.hub.admit(id, hosted); err != nil {
		d.log.Warn("refused a call from another orchestrator", "method", method, "orchestrator_id", id, "reason", err.Error())
		return err
	}
	return nil
}

// Close ends the Attach stream and stops every session.
func (d *Daemon) Close() {
	d.hub.mu.Lock()
	current := d.hub.current
	d.hub.mu.Unlock()
	if current != nil {
		d.hub.detach(current)
	}
	d.mu.Lock()
	all := make([]*session, 0, len(d.sessions))
	for _, s := range d.sessions {
		all = append(all, s)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.stop(d.opts.StopGrace) })
	}
	wg.Wait()
}

func (d *Daemon) lookup(id string) (*session, error) {
	if id == "" {
		return nil, errdefs.RequiredField("session_id")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sessions[id]
	if !ok {
		return nil, errdefs.NotFound("session", id)
	}
	return s, nil
}

// CreateSession implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) CreateSession(ctx context.Context, req *agentctlv1.CreateSessionRequest) (*agentctlv1.CreateSessionResponse, error) {
	spec := req.GetSpec()
	switch {
	case spec == nil:
		return nil, errdefs.RequiredField("spec")
	case spec.GetSessionId() == "":
		return nil, errdefs.RequiredField("spec.session_id")
	case spec.GetTaskId() == "":
		return nil, errdefs.RequiredField("spec.task_id")
	case strings.ContainsAny(spec.GetSessionId(), `/\`) || spec.GetSessionId() == "." || spec.GetSessionId() == "..":
		return nil, errdefs.InvalidField("spec.session_id", "must not contain path separators")
	}
	mode, err := modeFromProto(spec.GetMode())
	if err != nil {
		return nil, err
	}
	if a := spec.GetAgent(); a != nil && len(a.GetArgv()) == 0 && a.GetProfile() == "" && (len(a.GetEnv()) > 0 || a.GetWorkingDir() != "") {
		return nil, errdefs.InvalidField("spec.agent.argv", "is empty; leave agent out to only serve MCP")
	}
	if a := spec.GetAgent(); a.GetProfile() != "" {
		if err := profileSpec(a).Validate(); err != nil {
			return nil, errdefs.InvalidField("spec.agent.profile", "%v", err)
		}
	}
	for i, name := range spec.GetAgent().GetPassEnv() {
		if err := profiles.ValidateEnvName(name); err != nil {
			return nil, errdefs.InvalidField(fmt.Sprintf("spec.agent.pass_env[%d]", i), "%v", err)
		}
	}
	set := providers.Of(spec.GetProviderSet().GetProviders()...)
	external, err := d.externalTools("spec.external_tools", spec.GetExternalTools())
	if err != nil {
		return nil, err
	}
	repos, err := checkouts("spec.checkouts", spec.GetCheckouts())
	if err != nil {
		return nil, err
	}
	s := &session{
		id: spec.GetSessionId(), taskID: spec.GetTaskId(), workspaceID: spec.GetWorkspaceId(), mode: mode,
		dir: filepath.Join(d.opts.SessionsDir, spec.GetSessionId()), token: newToken(), uid: noUID,
		providers: set, gen: spec.GetProviderSet().GetGeneration(), genMoved: make(chan struct{}), phase: agentctlv1.SessionPhase_SESSION_PHASE_RUNNING,
		external: external, extGen: spec.GetExternalTools().GetGeneration(),
		orientation: orientationOf(spec.GetOrientation()), oriented: spec.GetOrientation() != nil,
		repos: repos,
		// Its place even without checkouts: a push may bring some.
		workspace: filepath.Join(d.opts.WorkspacesDir, spec.GetSessionId()),
	}

	d.mu.Lock()
	if _, exists := d.sessions[s.id]; exists {
		d.mu.Unlock()
		return nil, errdefs.AlreadyExists("session %q is already hosted here", s.id)
	}
	// Stopped sessions are forgotten (StopSession), so the map holds the
	// live ones.
	if n := len(d.sessions); n >= d.opts.MaxSessions {
		d.mu.Unlock()
		return nil, fmt.Errorf("this agentctl already hosts %d sessions, its limit (agentctl serve --max-sessions); stop one or use another host: %w",
			n, errdefs.ErrResourceExhausted)
	}
	if err := d.checkSharedUIDLocked(s.workspaceID); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if s.uid, err = d.allocUIDLocked(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	d.sessions[s.id] = s // reserved; removed again if the start fails
	d.mu.Unlock()

	if err := d.start(ctx, s, spec); err != nil {
		s.stopQuietly(d.opts.StopGrace)
		d.retire(s)
		d.mu.Lock()
		delete(d.sessions, s.id)
		d.mu.Unlock()
		return nil, err
	}
	d.log.Info("session created", "session_id", s.id, "task_id", s.taskID, "mode", mode,
		"providers", set.String(), "generation", s.gen, "external_tools", len(external), "external_generation", s.extGen,
		"mcp_url", s.url, "agent", len(spec.GetAgent().GetArgv()) > 0)
	d.logShadowed(s.id, external)
	return &agentctlv1.CreateSessionResponse{Status: s.status()}, nil
}

func (d *Daemon) start(ctx context.Context, s *session, spec *agentctlv1.LaunchSpec) error {
	// The checkouts come first: the session's tools are never served
	// before the repositories they act on are in its workspace, and the
	// first registry shows the workspace's tools only if it has one.
	d.materialize(ctx, s, 0, spec.GetCheckouts())
	// Built and set under the session's lock: a push that arrives while
	// the session starts is either in the first registry or published
	// after it, never lost.
	s.mu.Lock()
	s.pub = mcpserver.New(registry.Build(s.specLocked()), mcpserver.Options{
		Name: "toolscope", Version: version.String(), Handler: traced(s, d.toolHandler(s)), Logger: d.log, AdoptWait: d.opts.AdoptWait,
		OnListChanged: d.metrics.onListChanged(), OnRefused: s.reportRefusal(&d.hub), RefusalReports: d.opts.MCPLimits.RefusalReports,
	})
	s.pub.InstructWith(s.instructions)
	s.mu.Unlock()
	if err := s.serveMCP(d.opts.MCPHost, d.opts.MCPPort, d.opts.MCPLimits); err != nil {
		return err
	}
	if err := s.prepareDir(); err != nil {
		return fmt.Errorf("create the directory of session %q: %w", s.id, err)
	}
	if err := s.writeConfigs(d.opts.AgentctlPath); err != nil {
		return fmt.Errorf("write MCP config for session %q: %w", s.id, err)
	}

	if len(spec.GetAgent().GetArgv()) == 0 && spec.GetAgent().GetProfile() == "" {
		return nil
	}
	return s.startAgent(spec.GetAgent(), d.opts.AgentctlPath, d.opts, func(code int32, out string) {
		d.log.Info("agent exited", "session_id", s.id, "exit_code", code)
		e := s.event(agentctlv1.SessionEventKind_SESSION_EVENT_KIND_AGENT_EXITED, fmt.Sprintf("agent exited with code %d", code))
		e.AgentExitCode, e.AgentOutputTail = code, out
		d.emit(e)
	})
}

// emit queues a session event for the orchestrator, logging a drop.
func (d *Daemon) emit(e *agentctlv1.SessionEvent) {
	if !d.hub.event(e) {
		d.log.Debug("session event not delivered (no orchestrator attached, or it reads too slowly)",
			"session_id", e.GetSessionId(), "kind", e.GetKind().String())
	}
}

// stopQuietly releases whatever a failed start acquired.
func (s *session) stopQuietly(grace time.Duration) {
	if s.pub != nil && s.endpoint != nil {
		s.stop(grace)
	} else if s.pub != nil {
		s.pub.Close()
	}
}

// SetProviders implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) SetProviders(_ context.Context, req *agentctlv1.SetProvidersRequest) (*agentctlv1.SetProvidersResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if req.GetProviderSet() == nil {
		return nil, errdefs.RequiredField("provider_set")
	}
	res := d.apply(s, newSurface(req.GetProviderSet(), nil, nil))
	return &agentctlv1.SetProvidersResponse{Applied: res.GetAppliedProviderSet(), Accepted: res.GetAccepted(), ToolsChanged: res.GetToolsChanged()}, nil
}

// GetSessionState implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) GetSessionState(ctx context.Context, req *agentctlv1.GetSessionStateRequest) (*agentctlv1.GetSessionStateResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if req.GetWork() && !s.stopped() {
		d.measureWork(ctx, s)
	}
	return &agentctlv1.GetSessionStateResponse{Status: s.status()}, nil
}

// StopSession implements agentctlv1.AgentctlServiceServer. Stopping a
// stopped or unknown session succeeds. A stopped session is forgotten: its
// id may be created again.
func (d *Daemon) StopSession(ctx context.Context, req *agentctlv1.StopSessionRequest) (*agentctlv1.StopSessionResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if errors.Is(err, errdefs.ErrNotFound) {
		return &agentctlv1.StopSessionResponse{Status: &agentctlv1.SessionStatus{
			SessionId: req.GetSessionId(), Phase: agentctlv1.SessionPhase_SESSION_PHASE_STOPPED,
		}}, nil
	} else if err != nil {
		return nil, err
	}
	s.stop(d.opts.StopGrace)
	// The work left in the workspace, once nothing of the agent runs and
	// before its uid serves another session: what git runs for the
	// measure is ended with it.
	d.measureWork(ctx, s)
	if s.uid != noUID {
		agentuid.End(uint32(s.uid))
	}
	d.retire(s)
	// A stopped session is forgotten, so a long-running daemon does not
	// accumulate them; stopping it again, or an unknown one, succeeds.
	d.mu.Lock()
	if d.sessions[s.id] == s {
		delete(d.sessions, s.id)
	}
	d.mu.Unlock()
	d.log.Info("session stopped", "session_id", s.id)
	d.pruneLogs()
	return &agentctlv1.StopSessionResponse{Status: s.status()}, nil
}

// retire removes the directory of a session that no longer runs, since its
// files (mcp.json, bridge.json, the agent profile's files) hold the
// session's MCP token. The agent's log is kept first, in LogsDir.
func (d *Daemon) retire(s *session) {
	d.takeBack(s)
	if err := keepLog(filepath.Join(s.dir, "agent.log"), filepath.Join(d.opts.LogsDir, s.id)); err != nil {
		d.log.Warn("keeping the agent log of a stopped session", "session_id", s.id, "error", err)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		d.log.Warn("removing the directory of a stopped session", "session_id", s.id, "error", err)
	}
}

// pruneLogs bounds LogsDir (Options.KeptLogs), never touching the logs
// of a session hosted now.
func (d *Daemon) pruneLogs() {
	removed, err := logdir.Prune(d.opts.LogsDir, d.opts.KeptLogs, time.Now(), func(id string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.sessions[id]
		return ok
	})
	if err != nil {
		d.log.Warn("bounding the stopped sessions' logs", "dir", d.opts.LogsDir, "error", err)
	}
	if len(removed) > 0 {
		d.log.Info("removed the oldest stopped sessions' logs", "dir", d.opts.LogsDir, "sessions", removed,
			"max_bytes", d.opts.KeptLogs.MaxBytes, "max_age", d.opts.KeptLogs.MaxAge)
	}
}

// keepLog appends the log at from, if any, with its rotated part first,
// to agent.log in dir.
func keepLog(from, dir string) error {
	var errs error
	for _, part := range []string{rotated(from), from} {
		src, err := os.Open(part)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			_ = src.Close()
			return err
		}
		dst, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			_ = src.Close()
			return err
		}
		_, err = io.Copy(dst, src)
		errs = errors.Join(errs, err, dst.Close(), src.Close())
	}
	return errs
}

// Notify implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) Notify(ctx context.Context, req *agentctlv1.NotifyRequest) (*agentctlv1.NotifyResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if req.GetText() == "" {
		return nil, errdefs.RequiredField("text")
	}
	return &agentctlv1.NotifyResponse{Delivered: int32(s.pub.Notify(ctx, req.GetText()))}, nil
}

// Attach implements agentctlv1.AgentctlServiceServer: the orchestrator's
// stream for tool calls and session events. agentctl serves one
// orchestrator at a time (see hub): a newer stream of the attached
// orchestrator replaces its older one; another orchestrator is refused,
// with a message naming the holder.
func (d *Daemon) Attach(stream grpc.BidiStreamingServer[agentctlv1.AttachRequest, agentctlv1.AttachResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetHello() == nil {
		return errdefs.InvalidField("hello", "the first message on Attach must be a hello")
	}
	id := first.GetHello().GetOrchestratorId()
	from := "unknown"
	if p, ok := peer.FromContext(stream.Context()); ok {
		from = p.Addr.String()
	}
	d.mu.Lock()
	hosted := len(d.sessions)
	d.mu.Unlock()
	l, err := d.hub.claim(holder{id: id, from: from, since: time.Now()}, hosted, stream.Send)
	if err != nil {
		d.log.Warn("refused an orchestrator's attach", "orchestrator_id", id, "peer", from, "reason", err.Error())
		return err
	}
	defer d.hub.detach(l)
	if err := l.sendMsg(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_Attached{
		Attached: &agentctlv1.AttachAck{AgentctlVersion: version.String()},
	}}); err != nil {
		return err
	}
	d.log.Info("orchestrator attached", "orchestrator_id", id, "peer", from)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			if r := msg.GetToolResult(); r != nil {
				d.hub.deliver(l, r)
			}
		}
	}()
	select {
	case <-ended:
		d.log.Info("orchestrator detached", "orchestrator_id", id)
	case <-l.done:
		d.log.Info("orchestrator stream replaced or daemon closing", "orchestrator_id", id)
	}
	return nil
}

func modeFromProto(m agentctlv1.SessionMode) (registry.Mode, error) {
	switch m {
	case agentctlv1.SessionMode_SESSION_MODE_UNSPECIFIED, agentctlv1.SessionMode_SESSION_MODE_TASK:
		return registry.ModeTask, nil
	case agentctlv1.SessionMode_SESSION_MODE_PLAN:
		return registry.ModePlan, nil
	}
	return "", errdefs.InvalidField("spec.mode", "unknown session mode %d", int32(m))
}

func modeToProto(m registry.Mode) agentctlv1.SessionMode {
	if m == registry.ModePlan {
		return agentctlv1.SessionMode_SESSION_MODE_PLAN
	}
	return agentctlv1.SessionMode_SESSION_MODE_TASK
}

// ApplySurface implements agentctlv1.AgentctlServiceServer.
func (d *Daemon) ApplySurface(ctx context.Context, req *agentctlv1.ApplySurfaceRequest) (*agentctlv1.ApplySurfaceResponse, error) {
	s, err := d.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	sf := req.GetSurface()
	if sf == nil {
		return nil, errdefs.RequiredField("surface")
	}
	if m := sf.GetMode(); m != agentctlv1.SessionMode_SESSION_MODE_UNSPECIFIED && m != modeToProto(s.mode) {
		return nil, errdefs.InvalidField("surface.mode", "the session's mode is %s, fixed at launch", s.mode)
	}
	var tools []registry.Tool
	if ext := sf.GetExternalTools(); ext != nil {
		if tools, err = d.externalTools("surface.external_tools", ext); err != nil {
			return nil, err
		}
	}
	in := newSurface(sf.GetProviderSet(), sf.GetExternalTools(), tools)
	in.orientation = sf.GetOrientation()
	if len(sf.GetCheckouts()) == 0 {
		return d.apply(s, in), nil
	}
	// The repositories first, then their tools.
	if err := d.addCheckouts(ctx, s, sf.GetCheckouts()); err != nil {
		return nil, err
	}
	res := d.apply(s, in)
	s.mu.Lock()
	res.WorkspaceDir, res.Checkouts = s.workdirLocked(), s.checkoutStates()
	s.mu.Unlock()
	return res, nil
}

// apply applies a validated surface to a session and logs the outcome.
func (d *Daemon) apply(s *session, in surface) *agentctlv1.ApplySurfaceResponse {
	res := s.apply(in)
	args := []any{"session_id", s.id, "accepted", res.GetAccepted(), "tools_changed", res.GetToolsChanged()}
	if in.providers != nil {
		args = append(args, "providers", in.set.String(), "generation", in.providers.GetGeneration())
	}
	if in.external != nil {
		args = append(args, "external_tools", len(in.tools), "external_generation", in.external.GetGeneration())
		if res.GetAccepted() {
			d.logShadowed(s.id, in.tools)
		}
	}
	d.log.Info("surface applied", args...)
	return res
}
