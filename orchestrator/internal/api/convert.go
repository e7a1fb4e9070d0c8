package api

import (
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/api/eventkind"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func toWorkspace(w model.Workspace) *pb.Workspace {
	out := &pb.Workspace{Id: w.ID, Name: w.Name, CreateTime: ts(w.CreatedAt), AgentSourcePolicy: sourcePolicies[w.AgentSources]}
	for _, c := range w.Connections {
		out.Connections = append(out.Connections, toConnection(c))
	}
	return out
}

func toConnection(c model.Connection) *pb.Connection {
	out := &pb.Connection{
		Provider: string(c.Provider), ApiBaseUrl: c.APIBaseURL, Username: c.Username,
		ValidateTime: ts(c.ValidatedAt), Credential: &pb.CredentialRef{},
	}
	switch c.Credential.Kind {
	case model.CredentialEnv:
		out.Credential.Source = &pb.CredentialRef_EnvVar{EnvVar: c.Credential.Ref}
	case model.CredentialFile:
		out.Credential.Source = &pb.CredentialRef_FilePath{FilePath: c.Credential.Ref}
	}
	return out
}

func fromCredential(c *pb.CredentialRef) model.CredentialRef {
	switch s := c.GetSource().(type) {
	case *pb.CredentialRef_EnvVar:
		return model.CredentialRef{Kind: model.CredentialEnv, Ref: s.EnvVar}
	case *pb.CredentialRef_FilePath:
		return model.CredentialRef{Kind: model.CredentialFile, Ref: s.FilePath}
	}
	return model.CredentialRef{}
}

func toRepository(r model.Repository) *pb.Repository {
	return &pb.Repository{
		Id: r.ID, WorkspaceId: r.WorkspaceID, Provider: r.Provider, Host: r.Host, Path: r.Path,
		RemoteUrl: r.RemoteURL, CreateTime: ts(r.CreatedAt),
	}
}

func toProviderSet(p model.ProviderSet) *pb.ProviderSet {
	return &pb.ProviderSet{Providers: p.Set.Strings(), Generation: p.Generation}
}

func toTask(t model.Task) *pb.Task {
	out := &pb.Task{
		Id: t.ID, WorkspaceId: t.WorkspaceID, Title: t.Title, Description: t.Description,
		ProviderSet: toProviderSet(t.Providers), CreateTime: ts(t.CreatedAt), UpdateTime: ts(t.UpdatedAt),
	}
	for _, r := range t.Repositories {
		out.Repositories = append(out.Repositories, &pb.TaskRepository{
			Repository: toRepository(r.Repository), Position: uint32(r.Position), Primary: r.Primary,
		})
	}
	return out
}

var modes = map[model.Mode]pb.SessionMode{
	model.ModeTask: pb.SessionMode_SESSION_MODE_TASK,
	model.ModePlan: pb.SessionMode_SESSION_MODE_PLAN,
}

func fromMode(m pb.SessionMode) (model.Mode, error) {
	if m == pb.SessionMode_SESSION_MODE_UNSPECIFIED {
		return "", nil
	}
	for k, v := range modes {
		if v == m {
			return k, nil
		}
	}
	return "", errdefs.InvalidField("mode", "unknown session mode %d", int32(m))
}

var states = map[model.SessionState]pb.SessionState{
	model.SessionPending: pb.SessionState_SESSION_STATE_PENDING,
	model.SessionRunning: pb.SessionState_SESSION_STATE_RUNNING,
	model.SessionStopped: pb.SessionState_SESSION_STATE_STOPPED,
	model.SessionFailed:  pb.SessionState_SESSION_STATE_FAILED,
}

func toSession(s model.Session) *pb.Session {
	var exitCode *int32
	if s.AgentExited {
		exitCode = proto.Int32(int32(s.AgentExitCode))
	}
	return &pb.Session{
		AgentExitCode: exitCode,
		Id:            s.ID, TaskId: s.TaskID, Executor: s.Executor, Mode: modes[s.Mode], State: states[s.State],
		Agent: &pb.AgentSpec{Argv: s.AgentArgv, WorkingDir: s.AgentWorkDir, Profile: s.AgentProfile, Model: s.AgentModel,
			CredentialEnv: s.AgentCredentialEnv, PassEnv: s.AgentPassEnv, Auth: s.AgentAuth},
		PushedProviderSet: toProviderSet(s.Applied), NeedsRepair: s.NeedsRepair, StatusMessage: s.StatusMessage,
		CreateTime: ts(s.CreatedAt), UpdateTime: ts(s.UpdatedAt), Transport: string(s.Transport()), Owner: s.Owner,
		WorkspaceDir: s.Checkouts.Dir, Checkouts: toCheckouts(s.Checkouts), WorkspaceRemoveTime: ts(s.Checkouts.Removed),
	}
}

func toCheckouts(c model.Checkouts) []*pb.SessionCheckout {
	var out []*pb.SessionCheckout
	for _, r := range c.Repositories {
		pc := &pb.SessionCheckout{RepositoryId: r.RepositoryID, Key: r.Key, Path: r.Path, Branch: r.Branch, Error: r.Error}
		if r.Delivered != nil {
			pc.DeliveredCommit, pc.DeliverTime = r.Delivered.Commit, ts(r.Delivered.At)
		}
		if w := r.Work; w != nil {
			pc.Work = &pb.CheckoutWork{Head: w.Head, Uncommitted: uint32(min(w.Uncommitted, math.MaxUint32)),
				Unpushed: uint32(min(w.Unpushed, math.MaxUint32)), Error: w.Error, MeasureTime: ts(w.At)}
		}
		out = append(out, pc)
	}
	return out
}

func toEvent(e model.Event) *pb.TaskEvent {
	return &pb.TaskEvent{
		Sequence: e.Seq, TaskId: e.TaskID, Kind: eventkind.ToProto(e.Kind), Time: ts(e.Time), SessionId: e.SessionID,
		RepositoryIds: e.RepositoryIDs, ProviderSet: toProviderSet(e.Providers), Message: e.Message,
		Actor: e.Actor.String(),
	}
}
