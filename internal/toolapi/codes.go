package toolapi

// The stable refusal codes of the built-in tools: what an agent reads in a
// refused call's result, and acts on. The orchestrator's dispatcher
// (orchestrator/internal/toolcalls) and its provider clients
// (orchestrator/internal/forge) answer with these; the tool table says
// which of them each tool can return (Tool.Refusals).
const (
	// CodeSessionNotOnLink: the call claims a session this orchestrator
	// did not create (or re-adopt) on the agentctl link it came on.
	CodeSessionNotOnLink = "session_not_on_link"
	CodeUnknownSession   = "unknown_session"
	CodePermissionDenied = "permission_denied"
	CodeSessionEnded     = "session_ended"
	CodeUnknownTool      = "unknown_tool"
	CodeInvalidArguments = "invalid_arguments"
	// CodeReadOnlySession: a plan-mode session called a tool that writes.
	CodeReadOnlySession = "read_only_session"
	CodeInternal        = "internal"

	// The provider checks, before any call to the provider's API.
	CodeProviderNotAttached   = "provider_not_attached"
	CodeRepositoryNotAttached = "repository_not_attached"
	CodeProviderMismatch      = "provider_mismatch"
	CodeAmbiguousRepository   = "ambiguous_repository"
	CodeNotConnected          = "provider_not_connected"
	CodeCredentialUnavailable = "credential_unavailable"

	// What the tools themselves refuse.
	CodeNoChangeRequest = "no_change_request"
	CodeAlreadyExists   = "already_exists"
	// CodeSourceAdditionDenied refuses task_add_sources under its
	// workspace's deny policy; the message names the repositories and says
	// to ask a person (ADR 0013).
	CodeSourceAdditionDenied = "source_addition_denied"
	// git_push's: the session has no checkout of the repository (no
	// workspace, or the repository was not checked out at its launch);
	// the push breaks a delivery rule (the default branch, a rewritten
	// history, nothing committed on the branch); the provider refused it
	// or did not answer.
	CodeNoWorkspace  = "no_workspace"
	CodePushRejected = "push_rejected"
	CodePushFailed   = "push_failed"

	// The provider's answers (package forge), and the per-connection
	// gate in front of it.
	CodeProviderUnauthorized = "provider_unauthorized"
	CodeProviderForbidden    = "provider_forbidden"
	CodeProviderNotFound     = "provider_not_found"
	CodeProviderInvalid      = "provider_invalid"
	CodeRateLimited          = "rate_limited"
	CodeProviderUnavailable  = "provider_unavailable"
	CodeProviderFailed       = "provider_error"
)

// EndpointRefusals are the codes an MCP endpoint (package mcpserver)
// refuses a call with itself, before it reaches the orchestrator: the
// ones a refusal report may carry (ADR 0036).
var EndpointRefusals = map[string]bool{
	CodeUnknownTool: true, CodeInvalidArguments: true, CodeArgumentsTooLarge: true,
}
