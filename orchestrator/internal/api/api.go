// Package api serves the orchestrator's public gRPC API
// (toolscope.orchestrator.v1). Handlers only convert between the wire and
// the domain and call package service; errors stay domain errors and are
// turned into status codes by the grpcerr interceptors installed on the
// server.
package api

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// Register registers every public service on s.
func Register(s grpc.ServiceRegistrar, svc *service.Service) {
	pb.RegisterWorkspaceServiceServer(s, &workspaces{svc: svc})
	pb.RegisterRepositoryServiceServer(s, &repositories{svc: svc})
	pb.RegisterTaskServiceServer(s, &tasks{svc: svc})
	pb.RegisterSessionServiceServer(s, &sessions{svc: svc})
	pb.RegisterEventServiceServer(s, &eventsServer{svc: svc})
	pb.RegisterCatalogServiceServer(s, &catalogServer{svc: svc})
	pb.RegisterSourcePolicyServiceServer(s, &sourcePolicy{svc: svc})
	pb.RegisterAuthServiceServer(s, &authServer{svc: svc})
}

// ServiceNames lists the fully qualified names of the public services.
var ServiceNames = []string{
	pb.WorkspaceService_ServiceDesc.ServiceName,
	pb.RepositoryService_ServiceDesc.ServiceName,
	pb.TaskService_ServiceDesc.ServiceName,
	pb.SessionService_ServiceDesc.ServiceName,
	pb.EventService_ServiceDesc.ServiceName,
	pb.CatalogService_ServiceDesc.ServiceName,
	pb.SourcePolicyService_ServiceDesc.ServiceName,
	pb.AuthService_ServiceDesc.ServiceName,
}

type workspaces struct {
	pb.UnimplementedWorkspaceServiceServer
	svc *service.Service
}

func (h *workspaces) CreateWorkspace(ctx context.Context, req *pb.CreateWorkspaceRequest) (*pb.CreateWorkspaceResponse, error) {
	ws, err := h.svc.CreateWorkspace(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &pb.CreateWorkspaceResponse{Workspace: toWorkspace(ws)}, nil
}

func (h *workspaces) GetWorkspace(ctx context.Context, req *pb.GetWorkspaceRequest) (*pb.GetWorkspaceResponse, error) {
	ws, err := h.svc.GetWorkspace(ctx, req.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	return &pb.GetWorkspaceResponse{Workspace: toWorkspace(ws)}, nil
}

func (h *workspaces) ListWorkspaces(ctx context.Context, req *pb.ListWorkspacesRequest) (*pb.ListWorkspacesResponse, error) {
	list, next, err := listing[model.Workspace, *pb.Workspace]{
		name:     "workspaces",
		list:     h.svc.ListWorkspacesPage,
		cursor:   func(ws model.Workspace) store.Cursor { return store.Cursor{Created: ws.CreatedAt, ID: ws.ID} },
		wire:     toWorkspace,
		describe: func(ws model.Workspace) string { return "workspace " + ws.ID },
	}.page(ctx, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &pb.ListWorkspacesResponse{Workspaces: list, NextPageToken: next}, nil
}

func (h *workspaces) SetConnection(ctx context.Context, req *pb.SetConnectionRequest) (*pb.SetConnectionResponse, error) {
	c, err := h.svc.SetConnection(ctx, service.ConnectionInput{
		WorkspaceID: req.GetWorkspaceId(), Provider: req.GetProvider(), APIBaseURL: req.GetApiBaseUrl(),
		Credential: fromCredential(req.GetCredential()), SkipValidation: req.GetSkipValidation(),
	})
	if err != nil {
		return nil, err
	}
	return &pb.SetConnectionResponse{Connection: toConnection(c)}, nil
}

func (h *workspaces) RemoveConnection(ctx context.Context, req *pb.RemoveConnectionRequest) (*pb.RemoveConnectionResponse, error) {
	if err := h.svc.RemoveConnection(ctx, req.GetWorkspaceId(), req.GetProvider()); err != nil {
		return nil, err
	}
	return &pb.RemoveConnectionResponse{}, nil
}

type repositories struct {
	pb.UnimplementedRepositoryServiceServer
	svc *service.Service
}

func (h *repositories) CreateRepository(ctx context.Context, req *pb.CreateRepositoryRequest) (*pb.CreateRepositoryResponse, error) {
	r, err := h.svc.CreateRepository(ctx, service.RepositoryInput{
		WorkspaceID: req.GetWorkspaceId(), Provider: req.GetProvider(), Host: req.GetHost(), Path: req.GetPath(),
		RemoteURL: req.GetRemoteUrl(),
	})
	if err != nil {
		return nil, err
	}
	return &pb.CreateRepositoryResponse{Repository: toRepository(r)}, nil
}

func (h *repositories) GetRepository(ctx context.Context, req *pb.GetRepositoryRequest) (*pb.GetRepositoryResponse, error) {
	r, err := h.svc.GetRepository(ctx, req.GetRepositoryId())
	if err != nil {
		return nil, err
	}
	return &pb.GetRepositoryResponse{Repository: toRepository(r)}, nil
}

func (h *repositories) ListRepositories(ctx context.Context, req *pb.ListRepositoriesRequest) (*pb.ListRepositoriesResponse, error) {
	ws := req.GetWorkspaceId()
	list, next, err := listing[model.Repository, *pb.Repository]{
		name: "repositories", parent: ws,
		list: func(ctx context.Context, p store.Page) ([]model.Repository, error) {
			return h.svc.ListRepositoriesPage(ctx, ws, p)
		},
		cursor:   func(r model.Repository) store.Cursor { return store.Cursor{Created: r.CreatedAt, ID: r.ID} },
		wire:     toRepository,
		describe: func(r model.Repository) string { return "repository " + r.ID },
	}.page(ctx, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &pb.ListRepositoriesResponse{Repositories: list, NextPageToken: next}, nil
}

type tasks struct {
	pb.UnimplementedTaskServiceServer
	svc *service.Service
}

func (h *tasks) CreateTask(ctx context.Context, req *pb.CreateTaskRequest) (*pb.CreateTaskResponse, error) {
	t, err := h.svc.CreateTask(ctx, service.TaskInput{
		WorkspaceID: req.GetWorkspaceId(), Title: req.GetTitle(), Description: req.GetDescription(),
		RepositoryID: req.GetRepositoryId(),
	})
	if err != nil {
		return nil, err
	}
	return &pb.CreateTaskResponse{Task: toTask(t)}, nil
}

func (h *tasks) GetTask(ctx context.Context, req *pb.GetTaskRequest) (*pb.GetTaskResponse, error) {
	t, err := h.svc.GetTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	return &pb.GetTaskResponse{Task: toTask(t)}, nil
}

func (h *tasks) ListTasks(ctx context.Context, req *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
	ws := req.GetWorkspaceId()
	list, next, err := listing[model.Task, *pb.Task]{
		name: "tasks", parent: ws,
		list: func(ctx context.Context, p store.Page) ([]model.Task, error) {
			return h.svc.ListTasksPage(ctx, ws, p)
		},
		cursor:   func(t model.Task) store.Cursor { return store.Cursor{Created: t.CreatedAt, ID: t.ID} },
		wire:     toTask,
		describe: func(t model.Task) string { return "task " + t.ID },
	}.page(ctx, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &pb.ListTasksResponse{Tasks: list, NextPageToken: next}, nil
}

func (h *tasks) AddSources(ctx context.Context, req *pb.AddSourcesRequest) (*pb.AddSourcesResponse, error) {
	res, err := h.svc.AddSources(ctx, req.GetTaskId(), req.GetRepositoryIds())
	if err != nil {
		return nil, err
	}
	return &pb.AddSourcesResponse{Task: toTask(res.Task), Pushes: toPushes(res.Pushes)}, nil
}

type sessions struct {
	pb.UnimplementedSessionServiceServer
	svc *service.Service
}

func (h *sessions) LaunchSession(ctx context.Context, req *pb.LaunchSessionRequest) (*pb.LaunchSessionResponse, error) {
	in, err := sessionInput(req)
	if err != nil {
		return nil, err
	}
	if req.GetDryRun() {
		plan, err := h.svc.DryRun(ctx, in)
		if err != nil {
			return nil, err
		}
		out := &pb.LaunchPlan{Argv: plan.Argv, Env: plan.Env, PassEnv: plan.PassEnv, Refused: plan.Refused}
		for _, f := range plan.Files {
			out.Files = append(out.Files, &pb.PlanFile{Path: f.Path, Content: f.Content})
		}
		return &pb.LaunchSessionResponse{Plan: out}, nil
	}
	s, err := h.svc.LaunchSession(ctx, in, nil)
	if err != nil {
		return nil, err
	}
	return &pb.LaunchSessionResponse{Session: toSession(s)}, nil
}

func (h *sessions) StartSession(req *pb.StartSessionRequest, stream grpc.ServerStreamingServer[pb.StartSessionResponse]) error {
	in, err := sessionInput(req.GetLaunch())
	if err != nil {
		return err
	}
	progress := func(step string) {
		_ = stream.Send(&pb.StartSessionResponse{Update: &pb.StartSessionResponse_Progress{Progress: step}})
	}
	s, err := h.svc.LaunchSession(stream.Context(), in, progress)
	if err != nil {
		return err
	}
	return stream.Send(&pb.StartSessionResponse{Update: &pb.StartSessionResponse_Session{Session: toSession(s)}})
}

func (h *sessions) ReadSessionLog(req *pb.ReadSessionLogRequest, stream grpc.ServerStreamingServer[pb.ReadSessionLogResponse]) error {
	log := service.LogAgent
	switch req.GetLog() {
	case pb.SessionLog_SESSION_LOG_UNSPECIFIED, pb.SessionLog_SESSION_LOG_AGENT:
	case pb.SessionLog_SESSION_LOG_AGENTCTL:
		log = service.LogAgentctl
	default:
		return errdefs.InvalidField("log", "%d is not a session log", req.GetLog())
	}
	return h.svc.ReadSessionLog(stream.Context(), req.GetSessionId(), log, req.GetFollow(), func(text string) error {
		return stream.Send(&pb.ReadSessionLogResponse{Text: text})
	})
}

func sessionInput(req *pb.LaunchSessionRequest) (service.SessionInput, error) {
	mode, err := fromMode(req.GetMode())
	if err != nil {
		return service.SessionInput{}, err
	}
	return service.SessionInput{
		TaskID: req.GetTaskId(), Executor: req.GetExecutor(), Mode: mode, Image: req.GetImage(),
		AgentArgv: req.GetAgent().GetArgv(), AgentWorkDir: req.GetAgent().GetWorkingDir(),
		AgentProfile: req.GetAgent().GetProfile(), AgentModel: req.GetAgent().GetModel(), AgentCredentialEnv: req.GetAgent().GetCredentialEnv(),
		AgentPassEnv: req.GetAgent().GetPassEnv(), AgentAuth: req.GetAgent().GetAuth(), ModelUnchecked: req.GetModelUnchecked(),
	}, nil
}

func (h *sessions) ResumeSession(ctx context.Context, req *pb.ResumeSessionRequest) (*pb.ResumeSessionResponse, error) {
	s, err := h.svc.ResumeSession(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return &pb.ResumeSessionResponse{Session: toSession(s)}, nil
}

func (h *sessions) AttachSession(ctx context.Context, req *pb.AttachSessionRequest) (*pb.AttachSessionResponse, error) {
	mode, err := fromMode(req.GetMode())
	if err != nil {
		return nil, err
	}
	a, err := h.svc.AttachSession(ctx, req.GetTaskId(), mode)
	if err != nil {
		return nil, err
	}
	return &pb.AttachSessionResponse{Session: toSession(a.Session), Url: a.URL, BearerToken: a.BearerToken}, nil
}

func (h *sessions) StopSession(ctx context.Context, req *pb.StopSessionRequest) (*pb.StopSessionResponse, error) {
	s, err := h.svc.StopSession(ctx, req.GetSessionId(), req.GetDiscard())
	if err != nil {
		return nil, err
	}
	return &pb.StopSessionResponse{Session: toSession(s)}, nil
}

func (h *sessions) CleanSession(ctx context.Context, req *pb.CleanSessionRequest) (*pb.CleanSessionResponse, error) {
	s, err := h.svc.CleanSession(ctx, req.GetSessionId(), req.GetDiscard())
	if err != nil {
		return nil, err
	}
	return &pb.CleanSessionResponse{Session: toSession(s)}, nil
}

func (h *sessions) GetSession(ctx context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	s, err := h.svc.MeasureSession(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return &pb.GetSessionResponse{Session: toSession(s)}, nil
}

func (h *sessions) ListSessions(ctx context.Context, req *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	task := req.GetTaskId()
	list, next, err := listing[model.Session, *pb.Session]{
		name: "sessions", parent: task,
		list: func(ctx context.Context, p store.Page) ([]model.Session, error) {
			return h.svc.ListSessionsPage(ctx, task, p)
		},
		cursor:   func(s model.Session) store.Cursor { return store.Cursor{Created: s.CreatedAt, ID: s.ID} },
		wire:     toSession,
		describe: func(s model.Session) string { return "session " + s.ID },
	}.page(ctx, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &pb.ListSessionsResponse{Sessions: list, NextPageToken: next}, nil
}

func (h *sessions) GetSessionMCP(ctx context.Context, req *pb.GetSessionMCPRequest) (*pb.GetSessionMCPResponse, error) {
	m, err := h.svc.GetSessionMCP(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return &pb.GetSessionMCPResponse{Url: m.URL, BearerToken: m.BearerToken, StdioCommand: m.StdioCommand}, nil
}

type eventsServer struct {
	pb.UnimplementedEventServiceServer
	svc *service.Service
}

func (h *eventsServer) WatchTaskEvents(req *pb.WatchTaskEventsRequest, stream grpc.ServerStreamingServer[pb.WatchTaskEventsResponse]) error {
	return h.svc.WatchTaskEvents(stream.Context(), req.GetTaskId(), req.GetAfterSequence(), func(e model.Event) error {
		return stream.Send(&pb.WatchTaskEventsResponse{Event: toEvent(e)})
	})
}
