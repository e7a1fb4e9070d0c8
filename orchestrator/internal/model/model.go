// Package model holds the records the orchestrator owns: workspaces and
// their provider connections, repositories, tasks and their attached
// repositories, sessions, the task event log, and the governed catalog of
// external MCP servers and their tools. They are plain values;
// package store persists them and package service validates and changes
// them.
package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Workspace groups repositories and tasks.
type Workspace struct {
	ID          string
	Name        string
	Connections []Connection // canonical provider order
	// AgentSources is the policy for repositories its agents attach
	// themselves; SourcePolicyAllow unless set.
	AgentSources SourcePolicy
	CreatedAt    time.Time
}

// CredentialKind says where a credential reference points.
type CredentialKind string

// Credential reference kinds.
const (
	CredentialEnv  CredentialKind = "env"  // Ref names an environment variable
	CredentialFile CredentialKind = "file" // Ref is an absolute file path
)

// CredentialRef names where a secret lives; it never holds the secret.
type CredentialRef struct {
	Kind CredentialKind
	Ref  string
}

// Connection is how a workspace reaches one provider's API.
type Connection struct {
	Provider    providers.Provider
	APIBaseURL  string
	Credential  CredentialRef
	Username    string    // authenticated username, "" until validated
	ValidatedAt time.Time // zero until validated
}

// Repository is a source a task can work on. Provider is kept exactly as
// given; only providers.Of decides what it contributes.
type Repository struct {
	ID          string
	WorkspaceID string
	Provider    string
	Host        string
	Path        string
	RemoteURL   string
	CreatedAt   time.Time
}

// ProviderSet is a task's provider set and the generation that produced it.
type ProviderSet struct {
	Set        providers.Set
	Generation uint64
}

// Task is a unit of work on one or more repositories.
type Task struct {
	ID           string
	WorkspaceID  string
	Title        string
	Description  string
	Repositories []TaskRepository // position order
	Providers    ProviderSet
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// TaskRepository is a repository attached to a task.
type TaskRepository struct {
	Repository
	Position int
	Primary  bool
}

// Mode selects the tools a session's agent is shown (toolapi.Mode, the
// one definition).
type Mode = toolapi.Mode

// Session modes.
const (
	ModeTask = toolapi.ModeTask
	ModePlan = toolapi.ModePlan
)

// SessionState is where a session is in its life.
type SessionState string

// Session states.
const (
	SessionPending SessionState = "pending"
	SessionRunning SessionState = "running"
	SessionStopped SessionState = "stopped"
	SessionFailed  SessionState = "failed"
)

// Handle is what an executor backend needs to find a session again after
// the orchestrator restarts. State is opaque to everyone but the backend.
type Handle struct {
	Version int
	State   []byte
}

// Checkouts is a session's workspace: the directory on its agentctl's
// host that holds its checkouts (empty: it has none), and each checkout
// its launch asked for.
type Checkouts struct {
	Dir          string     `json:"dir,omitempty"`
	Repositories []Checkout `json:"repositories,omitempty"`
	// Removed is when the workspace was removed (session clean); zero
	// while it is kept. A relaunch makes a new one.
	Removed time.Time `json:"removed,omitzero"`
}

// Undelivered describes each checkout of the workspace that may hold
// work its provider lacks (Work.Undelivered), or "" when none does.
func (c Checkouts) Undelivered() string {
	var out []string
	for _, r := range c.Repositories {
		if r.Error != "" || !r.Work.Undelivered() {
			continue // never made, or nothing to lose
		}
		what := "its work was never measured"
		switch w := r.Work; {
		case w == nil:
		case w.Error != "":
			what = "its work could not be measured (" + w.Error + ")"
		default:
			what = fmt.Sprintf("%d uncommitted path(s) and %d unpushed commit(s) at %s", w.Uncommitted, w.Unpushed, w.At.UTC().Format(time.RFC3339))
		}
		out = append(out, fmt.Sprintf("%s (branch %s): %s", r.Key, r.Branch, what))
	}
	return strings.Join(out, "; ")
}

// Checkout is one repository of a session's workspace: where it is and on
// which branch, or why it is not there (Error), the session's last
// delivery of it, and its work when last measured.
type Checkout struct {
	RepositoryID string     `json:"repository_id"`
	Key          string     `json:"key"`            // host/owner/name
	Path         string     `json:"path,omitempty"` // absolute, on agentctl's host; empty when not made
	Branch       string     `json:"branch"`
	Error        string     `json:"error,omitempty"`
	Delivered    *Delivered `json:"delivered,omitempty"`
	Work         *Work      `json:"work,omitempty"`
}

// Work is what a checkout held that its remote lacked when measured (at
// the session's stop, after its agent ended): what removing it would
// lose. Error says why it could not be measured; the counts are then
// unknown.
type Work struct {
	Head        string    `json:"head,omitempty"`
	Uncommitted int       `json:"uncommitted"`
	Unpushed    int       `json:"unpushed"`
	Error       string    `json:"error,omitempty"`
	At          time.Time `json:"at"`
}

// Undelivered reports whether the work may hold something its remote
// lacks: uncommitted paths, unpushed commits, or a measure that failed.
func (w *Work) Undelivered() bool {
	return w == nil || w.Error != "" || w.Uncommitted > 0 || w.Unpushed > 0
}

// Delivered is a session's last delivery of a checkout's branch (git_push):
// the commit the provider's branch points at, and when.
type Delivered struct {
	Commit string    `json:"commit"`
	At     time.Time `json:"at"`
}

// Checkout returns the checkout of the repository with key, if the
// session's workspace has one.
func (c Checkouts) Checkout(key string) (Checkout, bool) {
	return c.find(func(r Checkout) bool { return r.Key == key })
}

// OfRepository returns the checkout of task repository id, if the
// session's workspace has one.
func (c Checkouts) OfRepository(id string) (Checkout, bool) {
	return c.find(func(r Checkout) bool { return r.RepositoryID == id })
}

func (c Checkouts) find(match func(Checkout) bool) (Checkout, bool) {
	for _, r := range c.Repositories {
		if match(r) {
			return r, true
		}
	}
	return Checkout{}, false
}

// Session is one run of an agent on a task through an executor.
type Session struct {
	ID           string
	TaskID       string
	Executor     string
	Mode         Mode
	State        SessionState
	AgentArgv    []string
	AgentWorkDir string
	// AgentProfile, AgentModel and AgentCredentialEnv select an agent
	// profile (package profiles); the credential is a variable name.
	AgentProfile, AgentModel, AgentCredentialEnv string
	// AgentAuth is how the agent pays for its model (profiles.Auths;
	// empty: profiles.DefaultAuth).
	AgentAuth string
	// AgentPassEnv names more variables of the executor's environment the
	// agent gets (`session launch --env NAME`); names, never values. They
	// are stored with the session, so a relaunch by resume passes them
	// again (read from the executor's environment then).
	AgentPassEnv []string
	Image        string // container image, for the docker executor
	Handle       Handle
	// Applied is the provider set, at its generation, the session's
	// agentctl last acknowledged; ExternalGeneration is the catalog
	// generation of the external tool set it last acknowledged (0: none).
	// Together they are the session's applied surface.
	Applied            ProviderSet
	ExternalGeneration uint64
	// Checkouts is the session's workspace as its last launch made it,
	// and what was delivered from it since (ADR 0038).
	Checkouts Checkouts
	// NeedsRepair is derived by the reconciler: a running session's
	// applied surface lags its desired one (a push failed), or the session
	// was lost.
	NeedsRepair   bool
	StatusMessage string
	// AgentExited says the agent of the session's current run exited, with
	// AgentExitCode (-1: ended by a signal); it is recorded once, with a
	// agent.exited event.
	AgentExited   bool
	AgentExitCode int
	// Owner is the orchestrator replica that acts on the session (ADR
	// 0027): it launched it, or took it over when its owner's lease
	// expired. Only the store's claims change it.
	Owner     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ExecutorHosted is the executor name of a hosted session: one whose MCP
// surface the orchestrator serves itself, with no agentctl.
const ExecutorHosted = "hosted"

// Transport is where the session's surface is served from, which decides
// the fields of its schemas and results: hosted for a session of the
// hosted executor, colocated (agentctl next to the agent's files) for
// every other.
func (s Session) Transport() toolapi.Transport {
	if s.Executor == ExecutorHosted {
		return toolapi.TransportHosted
	}
	return toolapi.TransportColocated
}

// SurfaceVersion is what a session's desired surface is a function of:
// its task's provider generation and the catalog generation (with the
// workspace whose tools the catalog assigns). The mode is the session's.
type SurfaceVersion struct {
	WorkspaceID                           string
	ProviderGeneration, CatalogGeneration uint64
}

// Every, given as the workspace of a task listing or the task of a session
// listing, stands for all of them: one listing instead of one per
// workspace or task (the API's wildcard, as AIP-159's "-"). No id is "-".
const Every = "-"

// EventKind says what a task event records.
type EventKind string

// Task event kinds.
const (
	EventTaskCreated    EventKind = "task.created"
	EventSourcesAdded   EventKind = "sources.added"
	EventSessionStarted EventKind = "session.started"
	EventSessionEnded   EventKind = "session.ended"
	// EventAgentExited records a session's agent process exiting: its exit
	// code and the last lines of its output. The session stays running
	// (agentctl serves its MCP endpoint) until it is stopped.
	EventAgentExited         EventKind = "agent.exited"
	EventProvidersPushed     EventKind = "providers.pushed"
	EventProvidersPushFailed EventKind = "providers.push_failed"
	EventProvidersRecomputed EventKind = "providers.recomputed"
	// EventExternalToolsPushed records a catalog push that changed a
	// session's tools; pushes that change nothing are not recorded.
	EventExternalToolsPushed     EventKind = "external_tools.pushed"
	EventExternalToolsPushFailed EventKind = "external_tools.push_failed"
	EventPrompted                EventKind = "lifecycle.prompted"
	EventAutoMerged              EventKind = "lifecycle.auto_merged"
	EventLifecycleSkipped        EventKind = "lifecycle.skipped"
	// EventSourcesRequested records an agent's batch held for approval;
	// EventSourceRequestDecided its approval or rejection.
	EventSourcesRequested     EventKind = "sources.requested"
	EventSourceRequestDecided EventKind = "sources.request_decided"
	// EventToolCalled is the audit record of one tool call, allowed or
	// refused: the session, the tool, the target repository if any, the
	// outcome code ("ok" or the refusal or error code) and the duration.
	// Never the arguments.
	EventToolCalled EventKind = "tool.called"
)

// Event is one entry of a task's append-only event log.
type Event struct {
	Seq           uint64 // assigned by the store on commit
	TaskID        string
	Kind          EventKind
	Time          time.Time
	SessionID     string
	RepositoryIDs []string
	Providers     ProviderSet
	Message       string
	// Actor made the change recorded (sources.added, sources.requested,
	// sources.request_decided); zero for events nobody made.
	Actor Actor
}

// Automation is what toolscope does on its own about a change request.
type Automation struct {
	AutoMerge               bool
	PromptOnReviewRequested bool
	PromptOnMerged          bool
	PromptOnClosed          bool
	AutoFixChecks           bool
}

// DefaultAutomation is the setting of a new change request: prompts on,
// nothing done without being asked.
var DefaultAutomation = Automation{PromptOnReviewRequested: true, PromptOnMerged: true, PromptOnClosed: true}

// ChangeRequest is the pull request (GitHub) or merge request (GitLab) a
// task opened on one of its repositories.
type ChangeRequest struct {
	TaskID       string
	RepositoryID string
	Provider     providers.Provider
	Number       int64 // PR number or MR iid
	URL          string
	Title        string
	SourceBranch string
	TargetBranch string
	Automation   Automation
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Checkpoint is what the lifecycle already acted on for one change
// request, so that each transition acts once.
type Checkpoint struct {
	ReviewRequestedUser string // the workspace username a review request was prompted for
	Merged, Closed      bool
	ChecksFailedSHA     string // head commit whose failed checks were prompted
	AutoMergedSHA       string
	SkippedReason       string // why the last evaluation could not act, reported once
}

// Prompt is a message for a task's agent.
type Prompt struct {
	ID        int64
	TaskID    string
	Text      string
	Link      string
	CreatedAt time.Time
}

// TransportKind says how the orchestrator reaches an external MCP server.
type TransportKind string

// Transport kinds of an MCP server.
const (
	TransportStdio TransportKind = "stdio" // a process on the orchestrator's host
	TransportHTTP  TransportKind = "http"  // MCP streamable HTTP
)

// MCPServer is an external MCP server whose tools the catalog governs
// (not a "provider": that word means GitHub or GitLab; ADR 0017).
// Exactly one of Stdio and HTTP is set, as Transport says. Its secrets are
// references (environment variable names, files), never values.
type MCPServer struct {
	ID        string
	Name      string // ^[a-z][a-z0-9-]{0,31}$; exposed tool names start with it
	Transport TransportKind
	Stdio     *StdioTransport
	HTTP      *HTTPTransport
	Enabled   bool
	// DiscoveredAt is when discovery last succeeded (zero: never).
	DiscoveredAt time.Time
	// DiscoveryError says why the last discovery failed; "" when it
	// succeeded. A failed discovery keeps the catalog as it was.
	DiscoveryError string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// StdioTransport runs an MCP server as a process of the orchestrator.
type StdioTransport struct {
	Command    string // absolute path
	Args       []string
	WorkingDir string // absolute; "" is the orchestrator's data directory
	// Env is the server's whole environment besides a minimal PATH and
	// HOME: each variable is read from the orchestrator's environment when
	// the server starts.
	Env []EnvReference
}

// EnvReference sets the server's variable Name from the orchestrator's
// variable FromEnv.
type EnvReference struct {
	Name    string
	FromEnv string
}

// HTTPTransport reaches an MCP server over streamable HTTP.
type HTTPTransport struct {
	URL     string // absolute http(s), without userinfo, query or fragment
	Headers []HeaderReference
}

// HeaderReference sets request header Name to Prefix followed by the
// secret Value refers to, resolved at request time.
type HeaderReference struct {
	Name   string
	Value  CredentialRef
	Prefix string // for example "Bearer "
}

// CatalogTool is one tool an MCP server's discovery found. Enabled (an
// administrator's decision) and Available (whether the server's latest
// successful discovery listed it) are independent: a new tool is disabled
// and available; a tool missing from a later discovery becomes unavailable,
// is never deleted, and keeps its enablement.
type CatalogTool struct {
	ID           string
	ServerID     string
	ServerName   string
	ExternalName string // the tool's name on its server
	// ExposedName is the name agents see, assigned once and kept for the
	// life of the record: ServerName + "__" + ExternalName, made safe
	// (see store.ExposedName).
	ExposedName  string
	Title        string
	Description  string
	InputSchema  json.RawMessage // canonical JSON (see catalog.Canonical)
	OutputSchema json.RawMessage // canonical JSON; nil when the server gives none
	SchemaHash   string          // hex SHA-256 over both canonical schemas
	ReadOnly     bool            // the server's annotations.readOnlyHint
	Enabled      bool
	Available    bool
	WorkspaceIDs []string // workspaces the tool is assigned to, sorted
	FirstSeen    time.Time
	LastSeen     time.Time // the last discovery that listed it
}

// DiscoveredTool is one tool as a server's tools/list gave it, with its
// schemas in canonical form and their hash.
type DiscoveredTool struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	SchemaHash   string
	ReadOnly     bool
}

// DiscoveryCounts is what one discovery changed in a server's catalog.
type DiscoveryCounts struct {
	New         int // tools seen for the first time (recorded disabled)
	Changed     int // title, description, read-only hint or canonical schemas differ
	Unchanged   int
	Unavailable int // were available, missing now
	Restored    int // were unavailable, listed again (enablement untouched)
	Total       int // tools the server lists now
}

// AffectsSessions reports whether a discovery with these counts can change
// what a session sees, and so bumps the catalog generation. New tools are
// always disabled, so only changed, unavailable and restored ones can.
func (c DiscoveryCounts) AffectsSessions() bool {
	return c.Changed+c.Unavailable+c.Restored > 0
}

// CatalogBlock says why a catalog tool may not be called from a
// workspace's session; "" means it may. The values are the refusal codes
// of such calls.
type CatalogBlock string

// Reasons a catalog tool call is refused, in the order Gate checks them.
// The codes are the agents' contract and keep their words:
// BlockServerDisabled is still "provider_disabled".
const (
	BlockNotAssigned     CatalogBlock = "tool_not_assigned"
	BlockServerDisabled  CatalogBlock = "provider_disabled"
	BlockToolDisabled    CatalogBlock = "tool_disabled"
	BlockToolUnavailable CatalogBlock = "tool_unavailable"
)

// CatalogCallTarget is a catalog tool with its server, read together,
// for checking and forwarding a call.
type CatalogCallTarget struct {
	Tool   CatalogTool
	Server MCPServer
}

// Gate applies the runtime rule to a call from a session of workspaceID:
// the tool must be assigned to the workspace, its server enabled, and
// the tool enabled and available. It returns the first rule broken, or ""
// when the call may go through. store.ExternalTools selects with the same
// rule.
func (c CatalogCallTarget) Gate(workspaceID string) CatalogBlock {
	switch {
	case workspaceID == "" || !slices.Contains(c.Tool.WorkspaceIDs, workspaceID):
		return BlockNotAssigned
	case !c.Server.Enabled:
		return BlockServerDisabled
	case !c.Tool.Enabled:
		return BlockToolDisabled
	case !c.Tool.Available:
		return BlockToolUnavailable
	}
	return ""
}
