// Package remote runs sessions on an agentctl daemon that lives on another
// host (`agentctl serve --tls-cert ... --client-ca ...`). The orchestrator
// connects with mutual TLS — its client certificate and the CA that signed
// the daemon's — and creates sessions there; one daemon hosts many
// sessions over one connection, and the orchestrator-opened Attach stream
// carries their tool calls back, so the remote host never needs to reach
// the orchestrator (it may sit behind an SSH tunnel or a firewall).
//
// A session whose daemon stops answering is reported lost; it is running
// again as soon as the daemon answers (the network came back), and a
// session the daemon no longer hosts (it restarted) stays lost until it is
// relaunched.
package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/executors/attached"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// Name is the backend's name.
const Name = "remote"

const stateVersion = 1

// Options configure the remote backend.
type Options struct {
	// Addr is the daemon's gRPC address, host:port.
	Addr string
	// TLS carries the orchestrator's client certificate and the CA of the
	// daemon's certificate (see package pki).
	TLS *tls.Config
	// ProbeTimeout bounds one status call; a daemon that does not answer
	// within it is reported lost for now.
	ProbeTimeout   time.Duration
	Calls          executors.CallHandler
	Events         executors.EventHandler
	OrchestratorID string
	Log            *slog.Logger
}

type state struct {
	SessionID string `json:"session_id"`
	Addr      string `json:"addr"`
}

// Executor is the remote backend.
type Executor struct {
	opts Options
	host string // the daemon's host, for MCP URLs

	mu      sync.Mutex
	link    *agentlink.Link
	stopped map[string]bool
	known   map[string]bool // sessions launched or re-attached through this executor
}

// New returns the remote backend; it connects on first use.
func New(opts Options) (*Executor, error) {
	if opts.Addr == "" {
		return nil, errdefs.RequiredField("addr")
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, errdefs.InvalidField("addr", "%q is not host:port", opts.Addr)
	}
	if opts.TLS == nil {
		return nil, errdefs.InvalidField("tls", "is required: the remote daemon is reached over mutual TLS")
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 3 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Executor{opts: opts, host: host, stopped: map[string]bool{}, known: map[string]bool{}}, nil
}

// Name implements executors.Executor.
func (e *Executor) Name() string { return Name }

// connect returns the link to the daemon, dialing it once, when its
// Attach stream is live: what launches and re-attaches need, so that the
// session's tool calls reach this orchestrator.
func (e *Executor) connect(ctx context.Context) (*agentlink.Link, error) {
	l, err := e.dial()
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, 3*e.opts.ProbeTimeout)
	defer cancel()
	if err := l.WaitAttached(wait); err != nil {
		return nil, fmt.Errorf("the agentctl daemon at %s does not answer (%v): %w", e.opts.Addr, err, executors.ErrLost)
	}
	return l, nil
}

// dial returns the link to the daemon, dialing it once, without waiting
// for its Attach stream: unary calls (pushes, status probes) need none,
// and a dead host then fails them at once instead of after the wait.
func (e *Executor) dial() (*agentlink.Link, error) {
	e.mu.Lock()
	l := e.link
	e.mu.Unlock()
	if l == nil {
		var err error
		l, err = agentlink.Dial(agentlink.Options{
			Addr: e.opts.Addr, TLS: e.opts.TLS, Calls: e.opts.Calls, Events: e.opts.Events,
			OrchestratorID: e.opts.OrchestratorID, Log: e.opts.Log,
		})
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		if e.link == nil {
			e.link = l
		} else {
			_ = l.Close()
			l = e.link
		}
		e.mu.Unlock()
	}
	return l, nil
}

// Launch implements executors.Executor.
func (e *Executor) Launch(ctx context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	progress.Report("connecting to the agentctl daemon at %s (mutual TLS)", e.opts.Addr)
	l, err := e.connect(ctx)
	if err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	// A relaunch replaces what is left of the session on the daemon.
	_, _ = l.StopSession(ctx, spec.SessionID)
	progress.Report("%s", spec.Creating())
	status, err := l.CreateSession(ctx, spec)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return executors.Handle{}, executors.Status{}, err
	} else if err != nil {
		return executors.Handle{}, executors.Status{}, fmt.Errorf("create session on %s: %w", e.opts.Addr, err)
	}
	e.mu.Lock()
	e.known[spec.SessionID], e.stopped[spec.SessionID] = true, false
	e.mu.Unlock()
	status.MCPURL = e.mcpURL(status.MCPURL)
	return executors.Handle{Backend: Name, Version: stateVersion, State: executors.EncodeState(state{SessionID: spec.SessionID, Addr: e.opts.Addr})}, status, nil
}

// Preflight implements executors.Preflighter over the control channel:
// the daemon answers (its Attach stream is live, as a launch needs), and
// on its host the agent command is found on the PATH the agent would get
// with the credential variable it names set (agentctl CheckAgent). A
// daemon from before CheckAgent checks the command when it starts the
// agent instead.
func (e *Executor) Preflight(ctx context.Context, spec executors.Spec) error {
	l, err := e.connect(ctx)
	if err != nil {
		return err
	}
	probe, cancel := context.WithTimeout(ctx, e.opts.ProbeTimeout)
	defer cancel()
	err = l.CheckAgent(probe, spec.Agent)
	if errors.Is(err, errdefs.ErrUnimplemented) {
		return nil
	} else if err != nil {
		return fmt.Errorf("on %s: %w", e.opts.Addr, err)
	}
	return nil
}

// mcpURL rewrites a loopback MCP URL the daemon reports to its host as the
// orchestrator reaches it. It is reachable from here only when the daemon
// binds MCP beyond loopback (`agentctl serve --mcp-host 0.0.0.0`).
func (e *Executor) mcpURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() {
		u.Host = net.JoinHostPort(e.host, u.Port())
	}
	return u.String()
}

func (e *Executor) session(h executors.Handle) (string, error) {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return "", err
	}
	if st.Addr != e.opts.Addr {
		return "", errdefs.FailedPrecondition("session %q runs on %s; this orchestrator reaches %s", st.SessionID, st.Addr, e.opts.Addr)
	}
	e.mu.Lock()
	known := e.known[st.SessionID]
	e.mu.Unlock()
	if !known {
		return "", attached.NotAttached(fmt.Sprintf("session %q", st.SessionID))
	}
	return st.SessionID, nil
}

// Endpoint implements executors.Executor. The daemon is dialed once and
// not waited for: a push or a status probe needs no Attach stream, and a
// dead host then fails it at once. A status probe is bounded by
// ProbeTimeout.
func (e *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	id, err := e.session(h)
	if err != nil {
		return executors.Endpoint{}, err
	}
	l, err := e.dial()
	if err != nil {
		return executors.Endpoint{}, err
	}
	return executors.Endpoint{
		SessionID: id, Agentctl: l, ProbeTimeout: e.opts.ProbeTimeout,
		Down: func() (executors.Phase, string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.stopped[id] {
				return executors.PhaseStopped, ""
			}
			return "", ""
		},
		Complete: func(st *executors.Status) { st.MCPURL = e.mcpURL(st.MCPURL) },
	}, nil
}

// onThisHost returns the id of the session of h and the link to its
// daemon, also once the session stopped, refusing a session that ran on
// another host.
func (e *Executor) onThisHost(ctx context.Context, h executors.Handle) (string, *agentlink.Link, error) {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return "", nil, err
	}
	if st.Addr != e.opts.Addr {
		return "", nil, errdefs.FailedPrecondition("session %q ran on %s; this orchestrator reaches %s", st.SessionID, st.Addr, e.opts.Addr)
	}
	l, err := e.connect(ctx)
	return st.SessionID, l, err
}

// AgentctlLog implements executors.AgentctlLogReader: the lines of the
// daemon's log that name the session (agentctl serve --log-file, set by
// the host's operator), also once the session stopped; following them
// ends when the daemon no longer hosts it.
func (e *Executor) AgentctlLog(ctx context.Context, h executors.Handle, follow bool, fn func([]byte) error) error {
	id, l, err := e.onThisHost(ctx, h)
	if err != nil {
		return err
	}
	return l.AgentctlLog(ctx, id, follow, fn)
}

// KeptAgentLog implements executors.KeptAgentLogReader: the agent log the
// daemon kept in its --logs-dir when the session stopped.
func (e *Executor) KeptAgentLog(ctx context.Context, h executors.Handle, fn func([]byte) error) error {
	id, l, err := e.onThisHost(ctx, h)
	if err != nil {
		return err
	}
	return l.AgentLog(ctx, id, false, fn)
}

// Stop implements executors.Executor.
func (e *Executor) Stop(ctx context.Context, h executors.Handle) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	if l, err := e.connect(ctx); err == nil {
		stop, cancel := context.WithTimeout(ctx, 3*e.opts.ProbeTimeout)
		_, _ = l.StopSession(stop, st.SessionID)
		cancel()
	}
	e.mu.Lock()
	e.known[st.SessionID], e.stopped[st.SessionID] = true, true
	e.mu.Unlock()
	return nil
}

// Reattach implements executors.Executor.
func (e *Executor) Reattach(ctx context.Context, h executors.Handle) error {
	var st state
	if err := executors.DecodeState(h, Name, stateVersion, &st); err != nil {
		return err
	}
	if st.Addr != e.opts.Addr {
		return errdefs.FailedPrecondition("session %q runs on %s; this orchestrator reaches %s", st.SessionID, st.Addr, e.opts.Addr)
	}
	l, err := e.connect(ctx)
	if err != nil {
		return err
	}
	probe, cancel := context.WithTimeout(ctx, e.opts.ProbeTimeout)
	defer cancel()
	status, err := l.State(probe, st.SessionID)
	if err != nil {
		return fmt.Errorf("session %q on %s: %v: %w", st.SessionID, e.opts.Addr, err, executors.ErrLost)
	}
	if status.Phase == executors.PhaseStopped {
		return fmt.Errorf("session %q on %s is stopped: %w", st.SessionID, e.opts.Addr, executors.ErrLost)
	}
	// The orchestrator's records say it created this session on this
	// daemon: the link may carry it again.
	l.Adopt(st.SessionID)
	e.mu.Lock()
	e.known[st.SessionID], e.stopped[st.SessionID] = true, false
	e.mu.Unlock()
	return nil
}

// Close implements executors.Executor; sessions keep running on the
// daemon.
func (e *Executor) Close() error {
	e.mu.Lock()
	l := e.link
	e.link = nil
	e.mu.Unlock()
	if l != nil {
		return l.Close()
	}
	return nil
}
