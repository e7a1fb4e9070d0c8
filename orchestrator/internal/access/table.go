// Package access decides who reaches the orchestrator's public API: it
// authenticates each call (the owner on the Unix socket, an API token, or
// a client certificate) and checks the caller's role against Table, the
// one statement of which role each RPC needs. A method missing from the
// table is refused (fail-closed). See ADR 0010.
package access

import (
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Table maps each full gRPC method name to the least role that may call
// it. Every method of every service the server registers must be here or
// in Open; anything else is refused.
//
// Repositories are admin: a repository record is what a workspace's
// provider credential is used against, so adding one widens what that
// credential reaches. Members attach existing repositories to tasks.
// GetSessionMCP is member: it returns the session's MCP bearer token.
var Table = map[string]model.Role{
	// Workspaces and their connections.
	pb.WorkspaceService_CreateWorkspace_FullMethodName:  model.RoleAdmin,
	pb.WorkspaceService_GetWorkspace_FullMethodName:     model.RoleViewer,
	pb.WorkspaceService_ListWorkspaces_FullMethodName:   model.RoleViewer,
	pb.WorkspaceService_SetConnection_FullMethodName:    model.RoleAdmin,
	pb.WorkspaceService_RemoveConnection_FullMethodName: model.RoleAdmin,

	// Repositories.
	pb.RepositoryService_CreateRepository_FullMethodName: model.RoleAdmin,
	pb.RepositoryService_GetRepository_FullMethodName:    model.RoleViewer,
	pb.RepositoryService_ListRepositories_FullMethodName: model.RoleViewer,

	// Tasks and sources.
	pb.TaskService_CreateTask_FullMethodName: model.RoleMember,
	pb.TaskService_GetTask_FullMethodName:    model.RoleViewer,
	pb.TaskService_ListTasks_FullMethodName:  model.RoleViewer,
	pb.TaskService_AddSources_FullMethodName: model.RoleMember,

	// Sessions.
	pb.SessionService_LaunchSession_FullMethodName: model.RoleMember,
	pb.SessionService_StartSession_FullMethodName:  model.RoleMember,
	pb.SessionService_ResumeSession_FullMethodName: model.RoleMember,
	pb.SessionService_StopSession_FullMethodName:   model.RoleMember,
	pb.SessionService_CleanSession_FullMethodName:  model.RoleMember,
	pb.SessionService_GetSession_FullMethodName:    model.RoleViewer,
	pb.SessionService_ListSessions_FullMethodName:  model.RoleViewer,
	pb.SessionService_GetSessionMCP_FullMethodName: model.RoleMember,
	// AttachSession is member: it returns a hosted session's bearer token.
	pb.SessionService_AttachSession_FullMethodName: model.RoleMember,
	// ReadSessionLog is member: an agent's output may hold what it read.
	// Its role is also the one that reads the output an agent.exited
	// event carries (AgentOutput).
	pb.SessionService_ReadSessionLog_FullMethodName: model.RoleMember,

	// Events.
	pb.EventService_WatchTaskEvents_FullMethodName: model.RoleViewer,

	// The catalog, reads included: it names the commands and URLs of the
	// external MCP servers.
	pb.CatalogService_CreateMcpServer_FullMethodName:     model.RoleAdmin,
	pb.CatalogService_UpdateMcpServer_FullMethodName:     model.RoleAdmin,
	pb.CatalogService_GetMcpServer_FullMethodName:        model.RoleAdmin,
	pb.CatalogService_ListMcpServers_FullMethodName:      model.RoleAdmin,
	pb.CatalogService_TestMcpServer_FullMethodName:       model.RoleAdmin,
	pb.CatalogService_RefreshMcpServer_FullMethodName:    model.RoleAdmin,
	pb.CatalogService_SetMcpServerEnabled_FullMethodName: model.RoleAdmin,
	// The deprecated names of the seven above (ADR 0017), served for one
	// release and removed in the next.
	pb.CatalogService_CreateToolProvider_FullMethodName:     model.RoleAdmin,
	pb.CatalogService_UpdateToolProvider_FullMethodName:     model.RoleAdmin,
	pb.CatalogService_GetToolProvider_FullMethodName:        model.RoleAdmin,
	pb.CatalogService_ListToolProviders_FullMethodName:      model.RoleAdmin,
	pb.CatalogService_TestToolProvider_FullMethodName:       model.RoleAdmin,
	pb.CatalogService_RefreshToolProvider_FullMethodName:    model.RoleAdmin,
	pb.CatalogService_SetToolProviderEnabled_FullMethodName: model.RoleAdmin,
	pb.CatalogService_ListCatalogTools_FullMethodName:       model.RoleAdmin,
	pb.CatalogService_GetCatalogTool_FullMethodName:         model.RoleAdmin,
	pb.CatalogService_SetCatalogToolEnabled_FullMethodName:  model.RoleAdmin,
	pb.CatalogService_AssignCatalogTool_FullMethodName:      model.RoleAdmin,

	// Agent-initiated source additions: the policy is an admin's; a
	// pending request is decided by a member, as AddSources is theirs.
	pb.SourcePolicyService_SetAgentSourcePolicy_FullMethodName: model.RoleAdmin,
	pb.SourcePolicyService_ListSourceRequests_FullMethodName:   model.RoleViewer,
	pb.SourcePolicyService_GetSourceRequest_FullMethodName:     model.RoleViewer,
	pb.SourcePolicyService_ApproveSourceRequest_FullMethodName: model.RoleMember,
	pb.SourcePolicyService_RejectSourceRequest_FullMethodName:  model.RoleMember,

	// API tokens, and the caller's own identity.
	pb.AuthService_CreateAPIToken_FullMethodName:          model.RoleAdmin,
	pb.AuthService_ListAPITokens_FullMethodName:           model.RoleAdmin,
	pb.AuthService_RevokeAPIToken_FullMethodName:          model.RoleAdmin,
	pb.AuthService_RevokeCertificate_FullMethodName:       model.RoleAdmin,
	pb.AuthService_ListRevokedCertificates_FullMethodName: model.RoleAdmin,
	pb.AuthService_WhoAmI_FullMethodName:                  model.RoleViewer,

	// Server reflection needs a credential: it describes the whole API.
	reflectionpb.ServerReflection_ServerReflectionInfo_FullMethodName:      model.RoleViewer,
	reflectionalphapb.ServerReflection_ServerReflectionInfo_FullMethodName: model.RoleViewer,
}

// Open lists the methods anyone who can connect may call: health checking.
var Open = map[string]bool{
	healthpb.Health_Check_FullMethodName: true,
	healthpb.Health_Watch_FullMethodName: true,
	healthpb.Health_List_FullMethodName:  true,
}

// AgentOutput is the RPC whose role reads an agent's output wherever the
// orchestrator holds it: the session's log (ReadSessionLog), and the last
// lines of output an agent.exited event records. An agent's output may
// hold what it read, so a caller whose role does not reach it learns that
// the agent exited, and its code, never what it printed.
const AgentOutput = pb.SessionService_ReadSessionLog_FullMethodName

// MayReadAgentOutput reports whether role reaches the role Table gives
// AgentOutput: the one statement of who reads an agent's output.
func MayReadAgentOutput(role model.Role) bool {
	least, ok := Table[AgentOutput]
	return ok && role.AtLeast(least)
}
