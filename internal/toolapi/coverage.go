package toolapi

// Coverage is the written decision, for every operation the orchestrator
// can perform, whether an agent reaches it as a tool, and if not, why not
// (issue 19, seed 002). Operations are the methods of the forge.Client
// interface ("forge.Create") and the public RPCs of the
// toolscope.orchestrator.v1 services, by full gRPC method name.
//
// A test in orchestrator/internal/access fails when an operation or RPC has
// no entry, an entry names a tool that is not in the tool table, an entry
// names an operation or RPC that does not exist, or an entry gives neither
// tools nor a reason. A new operation therefore cannot slip in unexposed or
// over-exposed without someone writing its line here.
type Coverage struct {
	// Operation is "forge.<Method>" or a full gRPC method name.
	Operation string
	// Tools are the built-in tools that perform the operation for an agent.
	Tools []string
	// Why says why the operation is not a tool; empty when Tools is set.
	Why string
}

// Reasons shared by several operations, each stated once.
const (
	whyOperator  = "an operator's act: agents work inside one task, they do not administer the orchestrator"
	whyAdmin     = "administration (credentials, tokens, the catalog): never delegated to an agent"
	whyBound     = "an agent is bound to its own task and session; it reads them through task_info and session_info"
	whyLifecycle = "a session's lifecycle is driven by the person or script that launched it, not by the agent inside it"
	whyDeprecate = "deprecated alias of the McpServer RPC of the same verb (ADR 0017), administration"
)

func forgeOp(name string, tools ...string) Coverage {
	return Coverage{Operation: "forge." + name, Tools: tools}
}

func rpc(service, method, why string, tools ...string) Coverage {
	return Coverage{Operation: "/toolscope.orchestrator.v1." + service + "/" + method, Why: why, Tools: tools}
}

// CoverageMap returns the coverage map.
func CoverageMap() []Coverage { return append([]Coverage(nil), coverage...) }

var coverage = []Coverage{
	// Forge operations.
	forgeOp("Create", GitHubPRCreate, GitLabMRCreate),
	forgeOp("Status", GitHubPRStatus, GitLabMRStatus),
	forgeOp("Comments", GitHubPRComments, GitLabMRDiscussions),
	forgeOp("Reply", GitHubPRReply, GitLabMRReply),
	forgeOp("RequestReviewers", GitHubPRRequestReviewers, GitLabMRRequestReviewers),
	{Operation: "forge.Observe", Why: "the lifecycle watcher's poll; an agent reads the same state through the pr/mr status and automation tools"},
	{Operation: "forge.Reviewers", Why: "internal fallback of an observation that carries no reviewers; the status tools report reviewers"},
	{Operation: "forge.Merge", Why: "merging is the automation's act once its conditions hold; an agent asks for it with the set_automation tools, never merges directly"},
	{Operation: "forge.CurrentUser", Why: "identity check of a connection's credential when an operator sets it; reveals nothing an agent needs"},

	// WorkspaceService.
	rpc("WorkspaceService", "CreateWorkspace", whyOperator),
	rpc("WorkspaceService", "GetWorkspace", whyBound),
	rpc("WorkspaceService", "ListWorkspaces", whyBound),
	rpc("WorkspaceService", "SetConnection", whyAdmin),
	rpc("WorkspaceService", "RemoveConnection", whyAdmin),

	// RepositoryService.
	rpc("RepositoryService", "CreateRepository", "a repository record widens what a workspace credential reaches: admin only (ADR 0010)"),
	rpc("RepositoryService", "GetRepository", whyBound),
	rpc("RepositoryService", "ListRepositories", "an agent may only name repositories to attach; it does not browse the workspace's records"),

	// TaskService.
	rpc("TaskService", "CreateTask", whyOperator),
	rpc("TaskService", "GetTask", "", TaskInfoTool),
	rpc("TaskService", "ListTasks", whyBound),
	rpc("TaskService", "AddSources", "", AddSourcesTool),

	// SessionService.
	rpc("SessionService", "LaunchSession", whyLifecycle),
	rpc("SessionService", "StartSession", whyLifecycle),
	rpc("SessionService", "ResumeSession", whyLifecycle),
	rpc("SessionService", "StopSession", whyLifecycle),
	rpc("SessionService", "CleanSession", "removes a stopped session's workspace, possibly discarding its work: a person decides that, never the agent whose work it is"),
	rpc("SessionService", "GetSession", "", SessionInfoTool),
	rpc("SessionService", "ListSessions", whyBound),
	rpc("SessionService", "GetSessionMCP", "returns the session's MCP bearer token: handing it to the agent would let it act as the session elsewhere"),
	rpc("SessionService", "AttachSession", "opens a hosted session and returns its bearer token: a person or script hands it to an agent, an agent never mints one"),
	rpc("SessionService", "ReadSessionLog", "the agent's own output, read by people; the agent already has it"),

	// EventService.
	rpc("EventService", "WatchTaskEvents", "the event stream is for people and scripts; what concerns the agent reaches it as prompts, read with task_inbox"),

	// CatalogService.
	rpc("CatalogService", "CreateMcpServer", whyAdmin),
	rpc("CatalogService", "UpdateMcpServer", whyAdmin),
	rpc("CatalogService", "GetMcpServer", whyAdmin),
	rpc("CatalogService", "ListMcpServers", whyAdmin),
	rpc("CatalogService", "TestMcpServer", whyAdmin),
	rpc("CatalogService", "RefreshMcpServer", whyAdmin),
	rpc("CatalogService", "SetMcpServerEnabled", whyAdmin),
	rpc("CatalogService", "CreateToolProvider", whyDeprecate),
	rpc("CatalogService", "UpdateToolProvider", whyDeprecate),
	rpc("CatalogService", "GetToolProvider", whyDeprecate),
	rpc("CatalogService", "ListToolProviders", whyDeprecate),
	rpc("CatalogService", "TestToolProvider", whyDeprecate),
	rpc("CatalogService", "RefreshToolProvider", whyDeprecate),
	rpc("CatalogService", "SetToolProviderEnabled", whyDeprecate),
	rpc("CatalogService", "ListCatalogTools", "the assigned catalog tools are themselves on the agent's surface; the catalog listing is administration"),
	rpc("CatalogService", "GetCatalogTool", whyAdmin),
	rpc("CatalogService", "SetCatalogToolEnabled", whyAdmin),
	rpc("CatalogService", "AssignCatalogTool", whyAdmin),

	// SourcePolicyService.
	rpc("SourcePolicyService", "SetAgentSourcePolicy", whyAdmin),
	rpc("SourcePolicyService", "ListSourceRequests", "the agent learns its request's outcome from task_add_sources and task_inbox"),
	rpc("SourcePolicyService", "GetSourceRequest", "the agent learns its request's outcome from task_add_sources and task_inbox"),
	rpc("SourcePolicyService", "ApproveSourceRequest", "a person decides an agent's request; an agent approving its own would void the policy"),
	rpc("SourcePolicyService", "RejectSourceRequest", "a person decides an agent's request"),

	// AuthService.
	rpc("AuthService", "CreateAPIToken", whyAdmin),
	rpc("AuthService", "ListAPITokens", whyAdmin),
	rpc("AuthService", "RevokeAPIToken", whyAdmin),
	rpc("AuthService", "RevokeCertificate", whyAdmin),
	rpc("AuthService", "ListRevokedCertificates", whyAdmin),
	rpc("AuthService", "WhoAmI", "an agent's identity is its session, bound by agentctl; it reads it through session_info"),
}
