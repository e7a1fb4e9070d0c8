// Package executors is the one interface the orchestrator uses to run agent
// sessions, whatever runs them: a local process (package local), a Docker
// container (package docker) or a daemon on a remote host (package remote).
// Every backend starts or reaches an agentctl, hands it the launch spec —
// with the mode and the provider set and its generation as typed fields —
// and keeps an Attach stream open so the agent's tool calls reach the
// orchestrator. External tools (of external MCP servers, from the
// orchestrator's catalog) travel the same way, with generations of their
// own. A backend owns the lifecycle only; everything said to a running
// session's agentctl goes through the one Controller (controller.go), by
// the Endpoint the backend gives. Package executortest proves every
// backend's lifecycle the same way, and the agentctl contract once.
//
// A backend returns a Handle the orchestrator persists; a restarted
// orchestrator passes it to Reattach to take over a session that is still
// running. Optional capabilities are separate small interfaces.
package executors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Mode selects the tools a session's agent is shown (toolapi.Mode, the
// one definition).
type Mode = toolapi.Mode

// Modes.
const (
	ModeTask = toolapi.ModeTask
	ModePlan = toolapi.ModePlan
)

// AgentCommand is the agent a session runs next to agentctl.
type AgentCommand struct {
	Argv    []string
	Env     map[string]string
	WorkDir string
	// Profile, Model, CredentialEnv and Auth select an agent profile
	// (package profiles); Argv then holds extra arguments.
	Profile, Model, CredentialEnv, Auth string
	// PassEnv names more variables of the executor's environment the
	// agent gets (`session launch --env NAME`). The agent's environment is
	// the allowlist profiles.Allowed of the command (see ProfileSpec);
	// nothing else of the executor's environment reaches agentctl or it.
	PassEnv []string
}

func (a *AgentCommand) pass() []string {
	if a == nil {
		return nil
	}
	return a.PassEnv
}

// ProfileSpec is the command as package profiles sees it: what decides
// the agent's environment allowlist.
func (a *AgentCommand) ProfileSpec() profiles.Spec {
	if a == nil {
		return profiles.Spec{}
	}
	return profiles.Spec{Profile: a.Profile, Args: a.Argv, Model: a.Model, CredentialEnv: a.CredentialEnv, PassEnv: a.PassEnv, Auth: a.Auth}
}

// AgentctlEnv is the environment an executor starts agentctl with, from
// its own: the allowlist of the session's agent, which agentctl passes on
// to the agent, and the tracing variables (AgentctlNames).
func (s Spec) AgentctlEnv(environ []string) []string {
	return profiles.Filter(environ, s.AgentctlNames())
}

// AgentctlNames are the names of the variables agentctl gets from its
// executor's environment: the agent's allowlist (profiles.Allowed), and
// the OTEL_* variables of profiles.TracingEnv, so that agentctl traces
// as the orchestrator does. Those are agentctl's own: its filter for the
// agent is profiles.Allowed alone, and an agent gets one only if its
// launch names it (--env).
func (s Spec) AgentctlNames() []string {
	return append(profiles.Allowed(s.Agent.ProfileSpec()), profiles.TracingEnv...)
}

// Spec is everything a backend needs to launch (or relaunch) a session.
type Spec struct {
	SessionID   string
	TaskID      string
	WorkspaceID string
	Mode        Mode
	// Agent is nil for a session that only serves MCP.
	Agent *AgentCommand
	// Providers and Generation are the task's provider set at launch.
	Providers  providers.Set
	Generation uint64
	// External and ExternalGeneration are the external tools the session
	// exposes from the start (none if empty), ordered by a generation of
	// their own, independent of the provider set's.
	External           []ExternalTool
	ExternalGeneration uint64
	// Image is the container image, for the docker backend.
	Image string
	// Orientation is what the orchestrator knew at launch of why tools
	// are missing or would fail; nil: nothing.
	Orientation *Orientation
	// Checkouts are the task's repositories, checked out in the session's
	// workspace before its agent starts (none: no workspace).
	Checkouts []Checkout
}

// Checkout is one task repository of a session's workspace: agentctl
// keeps one mirror of it for all its sessions, fetched with Fetch, and
// makes the session a checkout of it on Branch (ADR 0038).
type Checkout struct {
	Key    string // host/owner/name: the mirror's name
	URL    string // the clone URL, http(s), with no credential
	Branch string // the session's own (SessionBranch)
	Base   string // where Branch starts if new: the default branch when empty
	Path   string // the checkout's directory in the workspace: one segment
	// Fetch is the credential of the launch's fetch, used for it only.
	Fetch GitCredential
}

// GitCredential is HTTP basic authentication for one git operation
// (GitHub: x-access-token and a token; GitLab: oauth2 and a token). It
// formats as its user only.
type GitCredential struct{ User, Token string }

// String shows the user, never the token.
func (c GitCredential) String() string { return c.User + ":[token]" }

// GoString is String, for %#v.
func (c GitCredential) GoString() string { return c.String() }

// SessionBranch is the branch a session of a task works on, in every
// repository of its workspace; the only branch it may deliver.
func SessionBranch(taskID, sessionID string) string { return "toolscope/" + taskID + "/" + sessionID }

// Delivery is what a session's delivery pushed.
type Delivery struct {
	Ref    string // refs/heads/<the session's branch>
	Commit string // the commit the remote ref points at now
	// UpToDate: the remote branch was already at Commit.
	UpToDate bool
}

// Orientation is what only the orchestrator knows of why a session's
// tools are missing or would fail (connections, credentials, catalog
// states), as task_info says it. agentctl builds the server instructions
// from it and the session's surface.
type Orientation struct {
	Entries []toolapi.Orientation
}

// Surface is what a session's tool list is built from: its mode (fixed
// at launch), its task's provider set at the provider generation, and its
// workspace's external tools at the catalog generation. The generations
// are independent; a part whose generation is 0 is not part of a push
// (agentctl keeps what it applied), and agentctl ignores a part older than
// the one it applied.
type Surface struct {
	Mode               Mode
	Providers          providers.Set
	Generation         uint64
	External           []ExternalTool
	ExternalGeneration uint64
	// Orientation rides along with a push (it has no generation: nil
	// keeps what agentctl has).
	Orientation *Orientation
	// Checkouts ride along with a provider part: the task's checkouts, of
	// which agentctl makes those the workspace lacks before it applies
	// the set (sources added while the session runs).
	Checkouts []Checkout
}

// Creating is the launch's progress line for the step that creates the
// session in agentctl, which makes its checkouts first: a repository's
// first checkout on a host downloads it, which may take minutes.
func (s Spec) Creating() string {
	line := fmt.Sprintf("creating the session with providers %q (generation %d)", s.Providers.String(), s.Generation)
	switch n := len(s.Checkouts); n {
	case 0:
	case 1:
		line += fmt.Sprintf("; checking out %s on branch %s first (a first checkout on this host downloads it)", s.Checkouts[0].Key, s.Checkouts[0].Branch)
	default:
		line += fmt.Sprintf("; checking out %d repositories on branch %s first (a first checkout on this host downloads the repository)", n, s.Checkouts[0].Branch)
	}
	return line
}

// Surface is the surface a session launches with.
func (s Spec) Surface() Surface {
	return Surface{Mode: s.Mode, Providers: s.Providers, Generation: s.Generation, External: s.External, ExternalGeneration: s.ExternalGeneration,
		Orientation: s.Orientation}
}

// ExternalTool is one tool of an external MCP server, from the
// orchestrator's governed catalog, as a session exposes it. agentctl lists
// it and validates a call's arguments against InputSchema; the call then
// comes back to the orchestrator (a ToolCall whose Tool is Name), which
// checks it again and forwards it to the server.
type ExternalTool struct {
	// Name is the stable exposed name: 1 to 64 ASCII letters, digits, '_'
	// or '-', unique in a set. A name a built-in tool has is not exposed.
	Name        string
	Title       string
	Description string
	// InputSchema is the JSON Schema of the arguments: an object schema
	// ("type": "object"). OutputSchema, if set, is the JSON Schema of the
	// structured result, an object schema too.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// ReadOnly marks a tool that changes nothing; plan-mode sessions show
	// only read-only tools.
	ReadOnly bool
}

// Validate checks the fields every backend needs.
func (s Spec) Validate() error {
	switch {
	case s.SessionID == "":
		return errdefs.RequiredField("session_id")
	case s.TaskID == "":
		return errdefs.RequiredField("task_id")
	case s.Mode != ModeTask && s.Mode != ModePlan:
		return errdefs.InvalidField("mode", "%q is not a session mode", s.Mode)
	case s.Agent != nil && len(s.Agent.Argv) == 0 && s.Agent.Profile == "":
		return errdefs.InvalidField("agent.argv", "is empty")
	}
	for i, name := range s.Agent.pass() {
		if err := profiles.ValidateEnvName(name); err != nil {
			return errdefs.InvalidField(fmt.Sprintf("agent.pass_env[%d]", i), "%v", err)
		}
	}
	return nil
}

// Handle is what a backend needs to find a session again. The orchestrator
// persists it; State is opaque to everyone but the backend and never holds
// a secret (only references, such as a file path).
type Handle struct {
	Backend string
	Version int
	State   []byte
}

// Phase is where a session is, as its backend sees it.
type Phase string

// Phases.
const (
	PhaseRunning     Phase = "running"      // agentctl answers; the agent runs (if any)
	PhaseAgentExited Phase = "agent_exited" // the agent exited; agentctl still serves MCP
	PhaseStopped     Phase = "stopped"      // stopped on request
	PhaseLost        Phase = "lost"         // agentctl is gone or unreachable
)

// Status is a session as its backend sees it.
type Status struct {
	Phase Phase
	// Reason says why a session is lost.
	Reason string
	// MCPURL and MCPToken attach an MCP client to the session. MCPURL is
	// reachable from the orchestrator's host.
	MCPURL, MCPToken string
	// StdioCommand runs a stdio MCP server for the session (agentctl mcp)
	// on the orchestrator's host, when the backend can offer one.
	StdioCommand []string
	Providers    providers.Set
	Generation   uint64
	// ExternalGeneration is the generation of the external tool set the
	// session applied (0: none was ever given).
	ExternalGeneration uint64
	ToolNames          []string
	// AgentExitCode and AgentOutput, when Phase is PhaseAgentExited: the
	// agent's exit code and the last lines of its output (as in
	// SessionEvent).
	AgentExitCode int
	AgentOutput   string
	// WorkspaceDir is the session's workspace on agentctl's host (empty:
	// it has none), and Checkouts what became of each checkout of its
	// launch.
	WorkspaceDir string
	Checkouts    []CheckoutState
}

// CheckoutState is one checkout of a session as agentctl made it: in the
// workspace, or not, with why (Error, naming no credential), and its work
// when measured (Agentctl.Work, Agentctl.StopSession; else nil).
type CheckoutState struct {
	Key, Path, Branch string
	Error             string
	Work              *Work
}

// Work is what a checkout holds that its remote lacks: what removing it
// would lose (checkout.Work). Error says why it could not be measured;
// the counts are then unknown, not zero.
type Work struct {
	Head                  string
	Uncommitted, Unpushed int
	Error                 string
}

// PushResult is the outcome of applying a surface: what the session's
// agentctl applied afterwards.
type PushResult struct {
	// Accepted is false when a part pushed was older than the applied one
	// and was ignored.
	Accepted bool
	// ToolsChanged is true when the session's tool list changed, so its
	// MCP clients were sent notifications/tools/list_changed.
	ToolsChanged bool
	// Applied and Generation are the provider set now applied.
	Applied    providers.Set
	Generation uint64
	// ExternalGeneration is the generation of the external tool set now
	// applied (0: none was ever given).
	ExternalGeneration uint64
	// WorkspaceDir and Checkouts are the session's workspace after a push
	// that gave checkouts (as in Status); else empty.
	WorkspaceDir string
	Checkouts    []CheckoutState
}

// Progress reports a step of a slow operation ("creating container",
// "waiting for agentctl", ...). It may be nil.
type Progress func(step string)

// Report calls p if it is set.
func (p Progress) Report(format string, args ...any) {
	if p != nil {
		p(fmt.Sprintf(format, args...))
	}
}

// Executor runs sessions: their lifecycle, and nothing else. It starts
// (or reaches) a session's agentctl, re-attaches to it after an
// orchestrator restart, stops it, and reports its loss on its own
// (EventLost). Everything said to a running session's agentctl — pushes,
// status, notifications, the agent's log — goes through the one
// Controller, by the Endpoint the backend gives for the session.
// Implementations are safe for concurrent use.
type Executor interface {
	// Name is the backend's name: "local", "docker" or "remote".
	Name() string
	// Launch starts a session and returns its handle once its agentctl
	// applied the spec. A failed launch leaves nothing running.
	Launch(ctx context.Context, spec Spec, progress Progress) (Handle, Status, error)
	// Reattach takes over a session launched by an earlier orchestrator
	// process. It fails with ErrLost if the session is gone.
	Reattach(ctx context.Context, h Handle) error
	// Endpoint returns how to reach a session this executor launched or
	// re-attached: errdefs.ErrNotFound for one it does not hold.
	Endpoint(h Handle) (Endpoint, error)
	// Stop stops a session. Stopping a stopped or lost session succeeds.
	Stop(ctx context.Context, h Handle) error
	// Close releases connections; sessions keep running.
	Close() error
}

// Preflighter is an Executor that can check, before anything is recorded
// or spawned, that a session can start where it spawns agents. Every
// backend checks what it can reach cheaply (ADR 0032): local, the agent
// binary on the PATH agentctl will get and the credential variable the
// user named (profiles.Preflight); docker, the image on the engine and
// the agent binary inside it; remote, that the daemon answers and, on its
// host, the same checks as local (agentctl CheckAgent). The service calls
// it before a launch records a session, before a resume starts one again,
// and for a dry run, which reports the refusal.
type Preflighter interface {
	Preflight(ctx context.Context, spec Spec) error
}

// Agentctl is the orchestrator's end of one agentctl, in domain types
// (agentlink.Link is the one over gRPC): the calls the Controller makes
// on a running session.
type Agentctl interface {
	// ApplySurface makes the session's surface the given one: each part
	// given (generation above 0) replaces the applied one unless it is
	// older (Accepted false), with one rebuild and at most one
	// list_changed. The mode must be the session's (or empty). A surface
	// with an invalid external tool is refused whole with an
	// errdefs.FieldError naming it ("surface.external_tools.tools[2].name"),
	// and the session keeps what it had.
	ApplySurface(ctx context.Context, sessionID string, surface Surface) (PushResult, error)
	// State reports the session as agentctl sees it.
	State(ctx context.Context, sessionID string) (Status, error)
	// Work reports the session as State does, with each checkout's work
	// measured now (CheckoutState.Work): a git status per checkout, as the
	// agent's uid.
	Work(ctx context.Context, sessionID string) (Status, error)
	// StopSession ends the session's agent and MCP endpoint, measures the
	// work its checkouts hold once nothing of the agent runs, and reports
	// its last status; the executor's Stop ends the rest (agentctl's
	// process, the container, the pod). Stopping a stopped session
	// succeeds.
	StopSession(ctx context.Context, sessionID string) (Status, error)
	// Notify offers a message to the session's MCP clients and returns to
	// how many.
	Notify(ctx context.Context, sessionID, text string) (int, error)
	// AgentLog sends the agent log's last 1 MiB to fn, then, with follow,
	// what the agent writes, until it exits, the session stops or ctx ends.
	AgentLog(ctx context.Context, sessionID string, follow bool, fn func([]byte) error) error
	// Deliver pushes the session's own branch of its checkout of the
	// repository key, with cred for this push only: never forced, never
	// the default branch.
	Deliver(ctx context.Context, sessionID, key string, cred GitCredential) (Delivery, error)
}

// Endpoint is how the orchestrator reaches one session its backend holds:
// the agentctl serving it, and what only the backend knows about it.
type Endpoint struct {
	SessionID string
	Agentctl  Agentctl
	// Down reports what the backend knows without asking agentctl:
	// PhaseStopped (stopped on request) or PhaseLost (its process or
	// container is gone) with why; "" while agentctl may answer. Nil: the
	// backend cannot tell (a remote host).
	Down func() (Phase, string)
	// ProbeTimeout bounds a status probe (0: only the caller's context).
	ProbeTimeout time.Duration
	// Complete adds to a status agentctl reported what only the backend
	// knows (an MCP URL as the orchestrator reaches it, a stdio command).
	// It may be nil.
	Complete func(*Status)
}

// Exit is the end of a session's agentctl (its process, container or
// pod) as its backend saw it: ended once, with why.
type Exit struct {
	once  sync.Once
	done  chan struct{}
	cause string
}

// NewExit returns an Exit not ended yet.
func NewExit() *Exit { return &Exit{done: make(chan struct{})} }

// End records the end and its cause; it reports whether this call ended
// it (only the first does).
func (x *Exit) End(cause string) bool {
	first := false
	x.once.Do(func() { x.cause = cause; close(x.done); first = true })
	return first
}

// Done is closed when the session's agentctl is gone.
func (x *Exit) Done() <-chan struct{} { return x.done }

// Gone reports whether the session's agentctl is gone.
func (x *Exit) Gone() bool {
	select {
	case <-x.done:
		return true
	default:
		return false
	}
}

// Cause is why the session's agentctl is gone; "" while it is not.
func (x *Exit) Cause() string {
	if !x.Gone() {
		return ""
	}
	return x.cause
}

// DownFrom is the Down of a backend that knows whether it stopped a
// session on request (stopped) and whether the session's agentctl
// process, container or pod is gone (exit).
func DownFrom(stopped func() bool, exit *Exit) func() (Phase, string) {
	return func() (Phase, string) {
		switch {
		case stopped():
			return PhaseStopped, ""
		case exit.Gone():
			return PhaseLost, exit.Cause()
		}
		return "", ""
	}
}

// down is Down, or "" when the backend cannot tell.
func (e Endpoint) down() (Phase, string) {
	if e.Down == nil {
		return "", ""
	}
	return e.Down()
}

// Sweeper is an optional capability: a backend that can find what it
// created — containers, say — and remove what no live session needs any
// more, after an orchestrator restart.
type Sweeper interface {
	// Sweep removes every resource of a session for which keep returns
	// false, and returns the ids of the sessions it cleaned.
	Sweep(ctx context.Context, keep func(sessionID string) bool) ([]string, error)
}

// WorkspaceRemover is an Executor whose sessions' workspaces outlive them
// on a host it reaches (ADR 0038): it removes a stopped session's
// workspace, dir as the session recorded it, which must be the one the
// executor gave the session; a running session's is refused.
type WorkspaceRemover interface {
	RemoveWorkspace(ctx context.Context, h Handle, dir string) error
}

// WorkspaceDropper is an Executor whose Stop may end a session's workspace
// with the rest of it (kubernetes: the workspace is the pod's volume)
// when DropsWorkspaces says so. The service then stops a session only
// once its work is measured delivered, or when the caller discards it,
// and records the workspace removed.
type WorkspaceDropper interface {
	DropsWorkspaces() bool
}

// KeptAgentLogReader is an optional capability: a backend that keeps a
// session's agent log once its agentctl ended (the local executor's logs
// directory), for sessions AgentLog no longer serves.
type KeptAgentLogReader interface {
	// KeptAgentLog sends the kept log's last bytes (the log backlog) to
	// fn; errdefs.ErrNotFound if none was kept.
	KeptAgentLog(ctx context.Context, h Handle, fn func([]byte) error) error
}

// AgentctlLogReader is an optional capability: a backend that keeps the
// log of each session's agentctl, also once the session failed or
// stopped (the local executor's agentctl.log).
type AgentctlLogReader interface {
	// AgentctlLog sends the log's last 1 MiB to fn, then, with follow,
	// what agentctl writes until it ends or ctx does.
	AgentctlLog(ctx context.Context, h Handle, follow bool, fn func([]byte) error) error
}

// ErrLost reports a session whose agentctl is gone or unreachable. It is an
// errdefs.ErrUnavailable.
var ErrLost = fmt.Errorf("session lost: %w", errdefs.ErrUnavailable)

// ToolCall is a tool call an agent made through agentctl, with the
// identity agentctl bound to it and what the orchestrator knows of the
// link it came on. SessionID and TaskID are only what agentctl claims;
// OnLink says whether the claim holds.
type ToolCall struct {
	SessionID string
	TaskID    string
	Tool      string
	Arguments json.RawMessage
	// OnLink reports whether SessionID is a session this orchestrator
	// created, or re-adopted after a restart, on the agentctl link the call
	// arrived on. agentlink sets it; a call without it acts as no session.
	OnLink bool
	// LinkSessions, for a call that is not OnLink, are the sessions the
	// link does carry: whose agentctl the call really came from.
	LinkSessions []string
	// Refused, when set, is the code the session's MCP endpoint (agentctl's
	// or the hosted one) refused the call with before it reached the
	// orchestrator: the call is reported to be audited, never answered
	// (mcpserver.Refusal), and has no arguments.
	Refused string
	// Suppressed counts, with Refused, the session's refusals not reported
	// since the previous report.
	Suppressed int
}

// ToolResult answers a ToolCall.
type ToolResult struct {
	IsError bool
	// Code is a stable, machine-readable reason, set when IsError.
	Code string
	Text string
	// Structured is the structured result as a JSON object, if any.
	Structured json.RawMessage
}

// CallHandler answers the tool calls of a backend's sessions.
type CallHandler func(ctx context.Context, call ToolCall) ToolResult

// SessionEvent is something agentctl, or the backend, reports about a
// session.
type SessionEvent struct {
	SessionID string
	// Kind is EventAgentExited (from agentctl) or EventLost (from the
	// backend).
	Kind    string
	Message string
	// AgentExitCode and AgentOutput, for EventAgentExited: the agent's exit
	// code (-1: ended by a signal) and the last lines of its output,
	// bounded by agentctl and not scrubbed.
	AgentExitCode int
	AgentOutput   string
}

// EventAgentExited is the kind of event agentctl sends when a session's
// agent process exits; agentctl goes on serving the session's MCP
// endpoint until the session is stopped.
const EventAgentExited = "agent_exited"

// EventLost is the kind of event a backend sends, on its own, when it sees
// a launched session's agentctl end without being stopped (the process or
// container died). Message says why. Backends that cannot see that (remote
// hosts) report the loss from Inspect and pushes instead.
const EventLost = "lost"

// EventHandler receives session events.
type EventHandler func(SessionEvent)

// EncodeState and DecodeState are the JSON helpers backends use for
// Handle.State.
func EncodeState(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("executors: encode handle state: %v", err))
	}
	return b
}

// DecodeState decodes a handle's state, checking its backend and version.
func DecodeState(h Handle, backend string, version int, v any) error {
	if h.Backend != backend {
		return errdefs.InvalidField("handle", "belongs to backend %q, not %q", h.Backend, backend)
	}
	if h.Version != version {
		return errdefs.InvalidField("handle", "version %d; this %s backend reads version %d", h.Version, backend, version)
	}
	if err := json.Unmarshal(h.State, v); err != nil {
		return errors.Join(errdefs.InvalidField("handle", "unreadable state"), err)
	}
	return nil
}
