package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// UnknownPerson is the actor of an API change when the context carries
// none (an API without authentication). The API's authentication puts the
// person in the context, so it should never be recorded.
var UnknownPerson = model.Actor{Kind: model.ActorPerson, Name: "unknown"}

// actorOf is who makes the change ctx carries: the API's authenticated
// person, or UnknownPerson.
func actorOf(ctx context.Context) model.Actor {
	if a, ok := model.ActorFrom(ctx); ok && a.Kind != "" {
		return a
	}
	return UnknownPerson
}

// AgentSourcesResult is what became of an agent's batch: attached (Request
// is nil; Sources is the batch's outcome) or held for approval.
type AgentSourcesResult struct {
	Sources SourcesResult
	Request *model.SourceRequest
}

// AgentAddSources is task_add_sources: a batch the agent of session
// sessionID asks for, checked like AddSources, then handled by the task's
// workspace policy (see store.AgentAddSources). An attached batch is
// recomputed and pushed as AddSources does; a denied one is an error that
// matches store.ErrSourceAdditionDenied.
func (s *Service) AgentAddSources(ctx context.Context, sessionID, taskID string, repoIDs []string) (AgentSourcesResult, error) {
	if err := validateBatch(taskID, repoIDs); err != nil {
		return AgentSourcesResult{}, err
	}
	if err := required("session_id", sessionID); err != nil {
		return AgentSourcesResult{}, err
	}
	out, err := s.store.AgentAddSources(ctx, taskID, sessionID, repoIDs)
	if err != nil {
		return AgentSourcesResult{}, err
	}
	if out.Request != nil {
		s.log.InfoContext(ctx, "source request recorded", "task_id", taskID, "session_id", sessionID, "request_id", out.Request.ID)
		return AgentSourcesResult{Request: out.Request}, nil
	}
	res, err := s.afterBatch(ctx, out.Task, repoIDs)
	return AgentSourcesResult{Sources: res}, err
}

// SetSourcePolicy sets a workspace's policy for agent-initiated source
// additions. Switching to deny rejects the workspace's pending requests,
// and their agents are told; see store.SetSourcePolicy.
func (s *Service) SetSourcePolicy(ctx context.Context, workspaceID string, p model.SourcePolicy) (store.PolicyChange, error) {
	if err := required("workspace_id", workspaceID); err != nil {
		return store.PolicyChange{}, err
	}
	if !slices.Contains(model.SourcePolicies, p) {
		return store.PolicyChange{}, errdefs.InvalidField("agent_sources", "%q is not a policy; use allow, deny or approve", p)
	}
	out, err := s.store.SetSourcePolicy(ctx, workspaceID, p, actorOf(ctx))
	if err != nil {
		return out, err
	}
	s.log.InfoContext(ctx, "source policy set", "workspace_id", workspaceID, "policy", string(p), "rejected", len(out.Rejected))
	for _, d := range out.Rejected {
		s.DeliverPrompt(context.WithoutCancel(ctx), d.Prompt)
	}
	return out, nil
}

// ListSourceRequests returns the source requests of a task or a workspace
// (or all), in one state or all, oldest first.
func (s *Service) ListSourceRequests(ctx context.Context, f store.SourceRequestFilter) ([]model.SourceRequest, error) {
	switch f.State {
	case "", model.SourceRequestPending, model.SourceRequestApproved, model.SourceRequestRejected:
	default:
		return nil, errdefs.InvalidField("state", "%q is not a request state; use pending, approved or rejected", f.State)
	}
	return s.store.ListSourceRequests(ctx, f)
}

// GetSourceRequest returns one source request.
func (s *Service) GetSourceRequest(ctx context.Context, id string) (model.SourceRequest, error) {
	if err := required("request_id", id); err != nil {
		return model.SourceRequest{}, err
	}
	return s.store.GetSourceRequest(ctx, id)
}

// SourceDecision is a decided request and, for an approval that attached
// repositories, the batch's outcome (its pushes).
type SourceDecision struct {
	Request model.SourceRequest
	Sources *SourcesResult
}

// ApproveSourceRequest approves a pending request: the repositories not
// attached by now are attached as one batch with the caller as its actor,
// recomputed and pushed as AddSources does, and the agent is told through
// its inbox once its sessions have the new set.
func (s *Service) ApproveSourceRequest(ctx context.Context, id string) (SourceDecision, error) {
	return s.decide(ctx, id, store.Decision{Approve: true})
}

// RejectSourceRequest rejects a pending request; reason, if given, is
// passed on to the agent.
func (s *Service) RejectSourceRequest(ctx context.Context, id, reason string) (SourceDecision, error) {
	reason = strings.TrimSpace(reason)
	if err := textlimit.Reason.Check("reason", reason); err != nil {
		return SourceDecision{}, err
	}
	return s.decide(ctx, id, store.Decision{Reason: reason})
}

func (s *Service) decide(ctx context.Context, id string, d store.Decision) (SourceDecision, error) {
	if err := required("request_id", id); err != nil {
		return SourceDecision{}, err
	}
	d.By = actorOf(ctx)
	out, err := s.store.DecideSourceRequest(ctx, id, d)
	if err != nil {
		return SourceDecision{}, err
	}
	s.log.InfoContext(ctx, "source request decided", "request_id", id, "state", string(out.Request.State), "by", d.By.String())
	res := SourceDecision{Request: out.Request}
	if out.Attached {
		batch, err := s.afterBatch(ctx, out.Task, out.Request.AttachedIDs)
		res.Sources = &batch
		if err != nil {
			return res, fmt.Errorf("source request %q was approved and its repositories attached, but: %w", id, err)
		}
	}
	s.DeliverPrompt(context.WithoutCancel(ctx), out.Prompt)
	return res, nil
}
