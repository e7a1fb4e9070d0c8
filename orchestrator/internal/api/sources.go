package api

import (
	"context"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

type sourcePolicy struct {
	pb.UnimplementedSourcePolicyServiceServer
	svc *service.Service
}

func (h *sourcePolicy) SetAgentSourcePolicy(ctx context.Context, req *pb.SetAgentSourcePolicyRequest) (*pb.SetAgentSourcePolicyResponse, error) {
	p, ok := fromSourcePolicy[req.GetPolicy()]
	if !ok {
		return nil, errdefs.InvalidField("policy", "%s is not a policy; use ALLOW, DENY or APPROVE", req.GetPolicy())
	}
	out, err := h.svc.SetSourcePolicy(ctx, req.GetWorkspaceId(), p)
	if err != nil {
		return nil, err
	}
	resp := &pb.SetAgentSourcePolicyResponse{Workspace: toWorkspace(out.Workspace), Rejected: []*pb.SourceRequest{}}
	for _, d := range out.Rejected {
		resp.Rejected = append(resp.Rejected, toSourceRequest(d.Request))
	}
	return resp, nil
}

func (h *sourcePolicy) ListSourceRequests(ctx context.Context, req *pb.ListSourceRequestsRequest) (*pb.ListSourceRequestsResponse, error) {
	f := store.SourceRequestFilter{TaskID: req.GetTaskId(), WorkspaceID: req.GetWorkspaceId()}
	if req.GetState() != pb.SourceRequestState_SOURCE_REQUEST_STATE_UNSPECIFIED {
		st, ok := fromRequestState[req.GetState()]
		if !ok {
			return nil, errdefs.InvalidField("state", "%s is not a request state", req.GetState())
		}
		f.State = st
	}
	list, err := h.svc.ListSourceRequests(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &pb.ListSourceRequestsResponse{Requests: []*pb.SourceRequest{}}
	for _, r := range list {
		out.Requests = append(out.Requests, toSourceRequest(r))
	}
	return out, nil
}

func (h *sourcePolicy) GetSourceRequest(ctx context.Context, req *pb.GetSourceRequestRequest) (*pb.GetSourceRequestResponse, error) {
	r, err := h.svc.GetSourceRequest(ctx, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &pb.GetSourceRequestResponse{Request: toSourceRequest(r)}, nil
}

func (h *sourcePolicy) ApproveSourceRequest(ctx context.Context, req *pb.ApproveSourceRequestRequest) (*pb.ApproveSourceRequestResponse, error) {
	d, err := h.svc.ApproveSourceRequest(ctx, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	out := &pb.ApproveSourceRequestResponse{Request: toSourceRequest(d.Request), Pushes: []*pb.SessionPush{}}
	if d.Sources != nil {
		out.Task, out.Pushes = toTask(d.Sources.Task), toPushes(d.Sources.Pushes)
	}
	return out, nil
}

func (h *sourcePolicy) RejectSourceRequest(ctx context.Context, req *pb.RejectSourceRequestRequest) (*pb.RejectSourceRequestResponse, error) {
	d, err := h.svc.RejectSourceRequest(ctx, req.GetRequestId(), req.GetReason())
	if err != nil {
		return nil, err
	}
	return &pb.RejectSourceRequestResponse{Request: toSourceRequest(d.Request)}, nil
}

var sourcePolicies = map[model.SourcePolicy]pb.AgentSourcePolicy{
	model.SourcePolicyAllow:   pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_ALLOW,
	model.SourcePolicyDeny:    pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_DENY,
	model.SourcePolicyApprove: pb.AgentSourcePolicy_AGENT_SOURCE_POLICY_APPROVE,
}

var fromSourcePolicy = invert(sourcePolicies)

var requestStates = map[model.SourceRequestState]pb.SourceRequestState{
	model.SourceRequestPending:  pb.SourceRequestState_SOURCE_REQUEST_STATE_PENDING,
	model.SourceRequestApproved: pb.SourceRequestState_SOURCE_REQUEST_STATE_APPROVED,
	model.SourceRequestRejected: pb.SourceRequestState_SOURCE_REQUEST_STATE_REJECTED,
}

var fromRequestState = invert(requestStates)

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

func toSourceRequest(r model.SourceRequest) *pb.SourceRequest {
	return &pb.SourceRequest{
		Id: r.ID, TaskId: r.TaskID, WorkspaceId: r.WorkspaceID, SessionId: r.SessionID, RepositoryIds: r.RepositoryIDs,
		State: requestStates[r.State], RequestedBy: r.RequestedBy.String(), DecidedBy: r.DecidedBy.String(),
		Reason: r.Reason, AttachedRepositoryIds: r.AttachedIDs, CreateTime: ts(r.CreatedAt), DecideTime: ts(r.DecidedAt),
	}
}

func toPushes(pushes []service.Push) []*pb.SessionPush {
	out := []*pb.SessionPush{}
	for _, p := range pushes {
		push := &pb.SessionPush{SessionId: p.SessionID, Ok: p.Err == nil, Applied: toProviderSet(p.Applied)}
		if p.Err != nil {
			push.Error = p.Err.Error()
		}
		out = append(out, push)
	}
	return out
}
