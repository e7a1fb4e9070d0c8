// Package fake is an executor backend for the orchestrator's tests that
// runs no process: each session's agentctl is an in-memory
// executors.Agentctl that applies pushes as agentctl does (a generation
// older than the applied one is ignored, the mode is kept), and a test can
// make a session's pushes fail or lose the session. Service tests that
// check the orchestrator's bookkeeping use it instead of spawning agentctl
// processes; the real agentctl is proven over real gRPC by the agentctl
// contract suite and every real backend by package executortest.
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
)

// Executor is the fake backend. It is safe for concurrent use.
type Executor struct {
	name string
	// Events, if set, receives the EventLost of a session Lose ends.
	Events executors.EventHandler
	// Drops says its Stop ends a session's workspace
	// (executors.WorkspaceDropper), as the kubernetes executor's does.
	Drops bool
	// AgentOutput, if set, is what every session's agent printed: its
	// agent log (AgentLog), as a real agentctl's once the agent ran.
	AgentOutput string
	inspecting  atomic.Pointer[func(ctx context.Context, sessionID string)] // SetInspecting

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	spec      executors.Spec
	providers providers.Set
	gen       uint64
	external  []executors.ExternalTool
	extGen    uint64
	orient    *executors.Orientation // the last carried, as agentctl keeps it
	stopped   bool
	lost      string // why, once lost
	fail      error  // every call fails with it while set
	pushes    int
	failed    int
	notes     []string
	work      map[string]executors.Work // by checkout key: SetWork
}

// New returns a fake backend called name ("local", say, so that sessions
// recorded for that backend run on it).
func New(name string) *Executor {
	return &Executor{name: name, sessions: map[string]*session{}}
}

// SetInspecting makes fn run as each later State call begins; it may
// block, as an agentctl that is slow to answer would. nil removes it.
func (x *Executor) SetInspecting(fn func(ctx context.Context, sessionID string)) {
	if fn == nil {
		x.inspecting.Store(nil)
		return
	}
	x.inspecting.Store(&fn)
}

// Name implements executors.Executor.
func (x *Executor) Name() string { return x.name }

// Launch implements executors.Executor.
func (x *Executor) Launch(_ context.Context, spec executors.Spec, progress executors.Progress) (executors.Handle, executors.Status, error) {
	if err := spec.Validate(); err != nil {
		return executors.Handle{}, executors.Status{}, err
	}
	progress.Report("launching %s in memory", spec.SessionID)
	s := &session{spec: spec, providers: spec.Providers, gen: spec.Generation, external: spec.External, extGen: spec.ExternalGeneration,
		orient: spec.Orientation}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.sessions[spec.SessionID]; ok && !old.stopped && old.lost == "" {
		return executors.Handle{}, executors.Status{}, errdefs.AlreadyExists("session %q is already running", spec.SessionID)
	}
	x.sessions[spec.SessionID] = s
	return executors.Handle{Backend: x.name, Version: 1, State: []byte(spec.SessionID)}, s.status(), nil
}

// status is the session's status. A session launched with checkouts has
// a workspace, /fake/<session>, holding each (made, never fetched), with
// the work SetWork gave it.
func (s *session) status() executors.Status {
	st := executors.Status{Phase: executors.PhaseRunning, MCPURL: "http://127.0.0.1:1/mcp", MCPToken: "session-token",
		StdioCommand: []string{"agentctl", "mcp"}, Providers: s.providers, Generation: s.gen, ExternalGeneration: s.extGen}
	if len(s.spec.Checkouts) > 0 {
		st.WorkspaceDir = "/fake/" + s.spec.SessionID
	}
	for _, c := range s.spec.Checkouts {
		cs := executors.CheckoutState{Key: c.Key, Path: st.WorkspaceDir + "/" + c.Path, Branch: c.Branch}
		if w, ok := s.work[c.Key]; ok {
			cs.Work = &w
		}
		st.Checkouts = append(st.Checkouts, cs)
	}
	return st
}

// DropsWorkspaces implements executors.WorkspaceDropper: Drops.
func (x *Executor) DropsWorkspaces() bool { return x.Drops }

// SetWork makes a session's checkout of key hold w, as agentctl would
// measure it.
func (x *Executor) SetWork(sessionID, key string, w executors.Work) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.sessions[sessionID]; ok {
		if s.work == nil {
			s.work = map[string]executors.Work{}
		}
		s.work[key] = w
	}
}

// Reattach implements executors.Executor: a session launched here and
// neither lost nor stopped is re-attached.
func (x *Executor) Reattach(_ context.Context, h executors.Handle) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.sessions[string(h.State)]
	if !ok || s.lost != "" || s.stopped {
		return fmt.Errorf("session %q is not running here: %w", h.State, executors.ErrLost)
	}
	return nil
}

// Endpoint implements executors.Executor.
func (x *Executor) Endpoint(h executors.Handle) (executors.Endpoint, error) {
	id := string(h.State)
	x.mu.Lock()
	_, ok := x.sessions[id]
	x.mu.Unlock()
	if !ok {
		return executors.Endpoint{}, errdefs.NotFound("session on the fake executor", id)
	}
	return executors.Endpoint{SessionID: id, Agentctl: (*agentctl)(x), Down: func() (executors.Phase, string) {
		x.mu.Lock()
		defer x.mu.Unlock()
		s := x.sessions[id]
		switch {
		case s.stopped:
			return executors.PhaseStopped, ""
		case s.lost != "":
			return executors.PhaseLost, s.lost
		}
		return "", ""
	}}, nil
}

// Stop implements executors.Executor.
func (x *Executor) Stop(_ context.Context, h executors.Handle) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.sessions[string(h.State)]; ok {
		s.stopped = true
	}
	return nil
}

// Close implements executors.Executor.
func (x *Executor) Close() error { return nil }

// Lose makes a session's agentctl gone, as a killed process is, and
// reports it (EventLost) like the local and docker backends do.
func (x *Executor) Lose(sessionID, reason string) {
	x.mu.Lock()
	if s, ok := x.sessions[sessionID]; ok {
		s.lost = reason
	}
	x.mu.Unlock()
	if x.Events != nil {
		x.Events(executors.SessionEvent{SessionID: sessionID, Kind: executors.EventLost, Message: reason})
	}
}

// Fail makes every call to a session's agentctl fail with err, until it
// is called again with nil.
func (x *Executor) Fail(sessionID string, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.sessions[sessionID]; ok {
		s.fail = err
	}
}

// Spec is the spec of a session's latest launch (zero if none).
func (x *Executor) Spec(sessionID string) executors.Spec {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.sessions[sessionID]; ok {
		return s.spec
	}
	return executors.Spec{}
}

// Applied is what a session's agentctl applied.
type Applied struct {
	Providers          providers.Set
	Generation         uint64
	External           []string // the external tools' names
	ExternalGeneration uint64
	// Pushes counts the pushes that reached it, stale ones included;
	// Failed the calls that failed because of Fail.
	Pushes, Failed int
	// Notes are the messages offered to its clients.
	Notes []string
	// Orientation is the last one a launch or push carried (nil: none).
	Orientation *executors.Orientation
}

// Applied reports what a session's agentctl applied.
func (x *Executor) Applied(sessionID string) Applied {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.sessions[sessionID]
	if !ok {
		return Applied{}
	}
	a := Applied{Providers: s.providers, Generation: s.gen, ExternalGeneration: s.extGen, Pushes: s.pushes, Failed: s.failed, Notes: slices.Clone(s.notes),
		Orientation: s.orient}
	for _, t := range s.external {
		a.External = append(a.External, t.Name)
	}
	return a
}

// agentctl is the fake's in-memory executors.Agentctl.
type agentctl Executor

// call runs fn on a reachable session.
func (a *agentctl) call(ctx context.Context, id string, fn func(*session)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	switch {
	case !ok || s.stopped:
		return errdefs.NotFound("session", id)
	case s.lost != "":
		return fmt.Errorf("%s: %w", s.lost, errdefs.ErrUnavailable)
	case s.fail != nil:
		s.failed++
		return s.fail
	}
	fn(s)
	return nil
}

func (a *agentctl) ApplySurface(ctx context.Context, id string, sf executors.Surface) (res executors.PushResult, err error) {
	var refused error
	err = a.call(ctx, id, func(s *session) {
		s.pushes++
		if sf.Mode != "" && sf.Mode != s.spec.Mode {
			refused = errdefs.InvalidField("surface.mode", "the session's mode is %s, fixed at launch", s.spec.Mode)
			return
		}
		accepted, changed := true, false
		if sf.Generation > 0 {
			if sf.Generation < s.gen {
				accepted = false
			} else {
				changed = changed || sf.Providers != s.providers
				s.providers, s.gen = sf.Providers, sf.Generation
			}
		}
		if sf.ExternalGeneration > 0 {
			if sf.ExternalGeneration < s.extGen {
				accepted = false
			} else {
				changed = changed || !slices.EqualFunc(sf.External, s.external, func(a, b executors.ExternalTool) bool { return a.Name == b.Name })
				s.external, s.extGen = slices.Clone(sf.External), sf.ExternalGeneration
			}
		}
		if sf.Orientation != nil {
			s.orient = sf.Orientation
		}
		res = executors.PushResult{Accepted: accepted, ToolsChanged: changed, Applied: s.providers, Generation: s.gen, ExternalGeneration: s.extGen}
	})
	if err == nil {
		err = refused
	}
	return res, err
}

func (a *agentctl) State(ctx context.Context, id string) (st executors.Status, err error) {
	if fn := a.inspecting.Load(); fn != nil {
		(*fn)(ctx, id)
	}
	err = a.call(ctx, id, func(s *session) { st = s.status() })
	return st, err
}

// Work: the status, with the work SetWork gave the checkouts.
func (a *agentctl) Work(ctx context.Context, id string) (executors.Status, error) {
	return a.State(ctx, id)
}

// StopSession reports the session's last status; the executor's Stop
// stops it.
func (a *agentctl) StopSession(ctx context.Context, id string) (executors.Status, error) {
	return a.State(ctx, id)
}

func (a *agentctl) Notify(ctx context.Context, id, text string) (n int, err error) {
	err = a.call(ctx, id, func(s *session) { s.notes = append(s.notes, text) })
	return 0, err
}

func (a *agentctl) AgentLog(ctx context.Context, id string, _ bool, fn func([]byte) error) error {
	if err := a.call(ctx, id, func(*session) {}); err != nil || a.AgentOutput == "" {
		return err
	}
	return fn([]byte(a.AgentOutput + "\n"))
}

// Deliver: a fake session has no workspace (the real one is agentctl's,
// tested with a real git server).
func (a *agentctl) Deliver(ctx context.Context, id, key string, _ executors.GitCredential) (executors.Delivery, error) {
	if err := a.call(ctx, id, func(*session) {}); err != nil {
		return executors.Delivery{}, err
	}
	return executors.Delivery{}, errdefs.FailedPrecondition("session %q runs on the fake executor, which makes no workspace: no checkout of %s", id, key)
}
