package model

import (
	"strings"
	"time"
)

// SourcePolicy is a workspace's rule for repositories its agents attach
// themselves (the task_add_sources tool). Additions a person makes through
// the API never go through it.
type SourcePolicy string

// Source policies.
const (
	// SourcePolicyAllow attaches an agent's batch at once (the default).
	SourcePolicyAllow SourcePolicy = "allow"
	// SourcePolicyDeny refuses it; the agent is told to ask a person.
	SourcePolicyDeny SourcePolicy = "deny"
	// SourcePolicyApprove holds it as a SourceRequest until a person
	// approves or rejects it.
	SourcePolicyApprove SourcePolicy = "approve"
)

// SourcePolicies are the policies, in the order the CLI lists them.
var SourcePolicies = []SourcePolicy{SourcePolicyAllow, SourcePolicyDeny, SourcePolicyApprove}

// SourceRequestState is where a source request is in its life.
type SourceRequestState string

// Source request states. A request is decided once: approved and
// rejected are final.
const (
	SourceRequestPending  SourceRequestState = "pending"
	SourceRequestApproved SourceRequestState = "approved"
	SourceRequestRejected SourceRequestState = "rejected"
)

// SourceRequest is an agent's batch held under the approve policy.
type SourceRequest struct {
	ID            string
	TaskID        string
	WorkspaceID   string
	SessionID     string   // the session whose agent asked
	RepositoryIDs []string // as the agent named them, in its order
	State         SourceRequestState
	RequestedBy   Actor
	DecidedBy     Actor  // zero while pending
	Reason        string // why it was rejected, if given
	// AttachedIDs are the repositories the approval attached: those of
	// RepositoryIDs not already attached by then.
	AttachedIDs []string
	CreatedAt   time.Time
	DecidedAt   time.Time // zero while pending
}

// ParseActor reads an actor as Actor.String renders it; "" gives the zero
// Actor.
func ParseActor(s string) Actor {
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Actor{}
	}
	return Actor{Kind: ActorKind(kind), Name: name}
}
