// Package model holds the records the orchestrator owns: workspaces and
// their provider connections, repositories, tasks and their attached
// repositories, sessions, and the task event log. They are plain values;
// package store persists them and package service validates and changes
// them.
package model

import (
	"time"

	"github.com/toolscope/toolscope/internal/providers"
)

// Workspace groups repositories and tasks.
type Workspace struct {
	ID          string
	Name        string
	Connections []Connection // canonical provider order
	CreatedAt   time.Time
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

// Mode selects the tools a session's agent is shown.
type Mode string

// Session modes.
const (
	ModeTask Mode = "task" // task tools plus provider tools
	ModePlan Mode = "plan" // read-only tools only
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
	Image                                        string // container image, for the docker executor
	Handle                                       Handle
	Pushed                                       ProviderSet // the set the session's agentctl last applied
	NeedsRepair                                  bool
	StatusMessage                                string
	CreatedAt                                    time.Time
	UpdatedAt                                    time.Time
}

// EventKind says what a task event records.
type EventKind string

// Task event kinds.
const (
	EventTaskCreated         EventKind = "task.created"
	EventSourcesAdded        EventKind = "sources.added"
	EventSessionStarted      EventKind = "session.started"
	EventSessionEnded        EventKind = "session.ended"
	EventProvidersPushed     EventKind = "providers.pushed"
	EventProvidersPushFailed EventKind = "providers.push_failed"
	EventProvidersRecomputed EventKind = "providers.recomputed"
	EventPrompted            EventKind = "lifecycle.prompted"
	EventAutoMerged          EventKind = "lifecycle.auto_merged"
	EventLifecycleSkipped    EventKind = "lifecycle.skipped"
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
