package console

import (
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Action is something a person does in the console: see a page, press a
// button.
type Action string

// The console's actions. Each performs one RPC of the public API, through
// the same service call its gRPC handler makes.
const (
	ViewSessions     Action = "view-sessions"
	ViewSession      Action = "view-session"
	ResumeSession    Action = "resume-session"
	StopSession      Action = "stop-session"
	CleanSession     Action = "clean-session"
	ShowSessionMCP   Action = "show-session-mcp"
	ReadSessionLog   Action = "read-session-log"
	ViewTasks        Action = "view-tasks"
	ViewTask         Action = "view-task"
	AddSources       Action = "add-sources"
	SetSourcePolicy  Action = "set-source-policy"
	ViewRequests     Action = "view-source-requests"
	ApproveRequest   Action = "approve-source-request"
	RejectRequest    Action = "reject-source-request"
	WatchEvents      Action = "watch-events"
	ViewWorkspaces   Action = "view-workspaces"
	TestConnection   Action = "test-connection"
	ViewCatalog      Action = "view-catalog"
	TestMCPServer    Action = "test-mcp-server"
	RefreshMCPServer Action = "refresh-mcp-server"
	EnableMCPServer  Action = "enable-mcp-server"
	ViewCatalogTool  Action = "view-catalog-tool"
	EnableTool       Action = "enable-catalog-tool"
	AssignTool       Action = "assign-catalog-tool"
	WhoAmI           Action = "who-am-i"
)

// RPCs maps every console action to the full name of the RPC it performs.
// The role an action needs is that RPC's in access.Table, the one
// statement of the role rules: the console asks the access layer to
// authorize that method with the person's credential before it acts, and
// greys out what the person's role does not reach.
var RPCs = map[Action]string{
	ViewSessions:     pb.SessionService_ListSessions_FullMethodName,
	ViewSession:      pb.SessionService_GetSession_FullMethodName,
	ResumeSession:    pb.SessionService_ResumeSession_FullMethodName,
	StopSession:      pb.SessionService_StopSession_FullMethodName,
	CleanSession:     pb.SessionService_CleanSession_FullMethodName,
	ShowSessionMCP:   pb.SessionService_GetSessionMCP_FullMethodName,
	ReadSessionLog:   pb.SessionService_ReadSessionLog_FullMethodName,
	ViewTasks:        pb.TaskService_ListTasks_FullMethodName,
	ViewTask:         pb.TaskService_GetTask_FullMethodName,
	AddSources:       pb.TaskService_AddSources_FullMethodName,
	SetSourcePolicy:  pb.SourcePolicyService_SetAgentSourcePolicy_FullMethodName,
	ViewRequests:     pb.SourcePolicyService_ListSourceRequests_FullMethodName,
	ApproveRequest:   pb.SourcePolicyService_ApproveSourceRequest_FullMethodName,
	RejectRequest:    pb.SourcePolicyService_RejectSourceRequest_FullMethodName,
	WatchEvents:      pb.EventService_WatchTaskEvents_FullMethodName,
	ViewWorkspaces:   pb.WorkspaceService_ListWorkspaces_FullMethodName,
	TestConnection:   pb.WorkspaceService_SetConnection_FullMethodName,
	ViewCatalog:      pb.CatalogService_ListMcpServers_FullMethodName,
	TestMCPServer:    pb.CatalogService_TestMcpServer_FullMethodName,
	RefreshMCPServer: pb.CatalogService_RefreshMcpServer_FullMethodName,
	EnableMCPServer:  pb.CatalogService_SetMcpServerEnabled_FullMethodName,
	ViewCatalogTool:  pb.CatalogService_GetCatalogTool_FullMethodName,
	EnableTool:       pb.CatalogService_SetCatalogToolEnabled_FullMethodName,
	AssignTool:       pb.CatalogService_AssignCatalogTool_FullMethodName,
	WhoAmI:           pb.AuthService_WhoAmI_FullMethodName,
}

// Needs returns the least role action needs: its RPC's in access.Table
// (admin, the most, for an action or RPC missing there, which
// access.Authorize refuses anyway).
func Needs(a Action) model.Role {
	if role, ok := access.Table[RPCs[a]]; ok {
		return role
	}
	return model.RoleAdmin
}
