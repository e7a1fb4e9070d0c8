package toolapi

//go:generate go run ../cmd/tooltable -schemas schemas_gen.go -readme ../../README.md

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/toolscope/toolscope/internal/providers"
)

// The built-in tools' names, each stated once. Identity (task, session)
// is never an argument: agentctl binds it from the session.
const (
	TaskInfoTool    = "task_info"
	SessionInfoTool = "session_info"
	TaskInboxTool   = "task_inbox"
	AddSourcesTool  = "task_add_sources"
	GitPushTool     = "git_push"

	GitHubPRCreate           = "github_pr_create"
	GitHubPRStatus           = "github_pr_status"
	GitHubPRComments         = "github_pr_comments"
	GitHubPRReply            = "github_pr_reply"
	GitHubPRRequestReviewers = "github_pr_request_reviewers"
	GitHubPRAutomation       = "github_pr_automation"
	GitHubPRSetAutomation    = "github_pr_set_automation"

	GitLabMRCreate           = "gitlab_mr_create"
	GitLabMRStatus           = "gitlab_mr_status"
	GitLabMRDiscussions      = "gitlab_mr_discussions"
	GitLabMRReply            = "gitlab_mr_reply"
	GitLabMRRequestReviewers = "gitlab_mr_request_reviewers"
	GitLabMRAutomation       = "gitlab_mr_automation"
	GitLabMRSetAutomation    = "gitlab_mr_set_automation"
)

// Group says when a session shows a built-in tool: the task tools always,
// a provider's tools (the "provider tools") when that provider is in the
// task's provider set.
type Group string

// Groups.
const (
	GroupTask   Group = "task"
	GroupGitHub Group = Group(providers.GitHub)
	GroupGitLab Group = Group(providers.GitLab)
)

// Provider returns the review provider a group's tools act on, and false
// for the task group.
func (g Group) Provider() (providers.Provider, bool) {
	if g == GroupTask {
		return "", false
	}
	return providers.Normalize(string(g))
}

// Tool is one built-in tool, as the table states it.
type Tool struct {
	Name  string
	Group Group
	// Title and Description are what an agent reads; Description says
	// when to use the tool, briefly: it costs context on every turn.
	Title       string
	Description string
	// ReadOnly: the tool only reads. A plan-mode session is shown, and
	// may call, only these. agentctl's registry marks its definitions
	// from it; the orchestrator's dispatcher refuses every other built-in
	// tool to a plan session from it.
	ReadOnly bool
	// Idempotent and OpenWorld are the MCP annotations: calling again
	// changes nothing more; the tool reaches outside toolscope (a
	// provider's API).
	Idempotent bool
	OpenWorld  bool
	// Args is the type the arguments decode into (strictly: unknown
	// fields are refused), nil for a tool that takes none. Result is the
	// type of the structured result. The input and output schemas are
	// theirs.
	Args, Result reflect.Type
	// Codes are the refusals of the tool itself; Refusals adds those of
	// the checks every call (and every call of its group) goes through.
	Codes []string
	// Counterpart is, for a provider tool, the other provider's tool that
	// does the same, or "" with a reason in ParityExemptions.
	Counterpart string
	// Workspace: the tool acts on the session's workspace (its checkouts
	// of the task's repositories, next to agentctl), so only a session
	// with one shows it; a hosted session never has one.
	Workspace bool
}

// The refusals the table's tools share.
var (
	// callCodes: the checks every call goes through before its tool runs,
	// and the bound on every call's result (MaxResultBytes).
	callCodes = []string{CodeSessionNotOnLink, CodeUnknownSession, CodePermissionDenied, CodeSessionEnded,
		CodeArgumentsTooLarge, CodeInvalidArguments, CodeInternal, CodeResultTooLarge}
	// providerCodes: a provider tool's checks before the provider's API:
	// the target repository, the connection, its credential, the
	// connection's rate-limit gate and calls in flight.
	providerCodes = []string{CodeProviderNotAttached, CodeRepositoryNotAttached, CodeProviderMismatch,
		CodeAmbiguousRepository, CodeNotConnected, CodeCredentialUnavailable, CodeRateLimited, CodeProviderUnavailable}
	// apiCodes: the provider API's answers.
	apiCodes = []string{CodeProviderUnauthorized, CodeProviderForbidden, CodeProviderNotFound, CodeProviderInvalid,
		CodeRateLimited, CodeProviderUnavailable, CodeProviderFailed}
	// onChange: the tool acts on the task's existing change request.
	onChange = []string{CodeNoChangeRequest}
)

// APICodes returns, sorted, the codes of the provider API's answers (a
// provider tool's Codes hold them when it calls the API).
func APICodes() []string { return slices.Sorted(slices.Values(apiCodes)) }

// Refusals returns, sorted, every code a call of t can be refused with.
func (t Tool) Refusals() []string {
	codes := slices.Concat(callCodes, t.Codes)
	if !t.ReadOnly {
		codes = append(codes, CodeReadOnlySession)
	}
	if _, ok := t.Group.Provider(); ok {
		codes = append(codes, providerCodes...)
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}

// Noun returns what a provider's tools act on: "pull request" on GitHub,
// "merge request" on GitLab, "change request" for either.
func (g Group) Noun() string {
	switch g {
	case GroupGitHub:
		return "pull request"
	case GroupGitLab:
		return "merge request"
	}
	return "change request"
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// table is every built-in tool, once: the one statement agentctl's
// registry, the orchestrator's dispatcher, the parity test and the
// README's tool table are derived from.
var table = []Tool{
	{Name: TaskInfoTool, Group: GroupTask, Title: "Task info", ReadOnly: true, Idempotent: true, Result: typeOf[TaskInfo](),
		Description: "Call first, and whenever a tool you expect is missing or fails: this task's title, description, repositories, the review providers whose tools you have, and why tools are missing, with what to do."},
	{Name: SessionInfoTool, Group: GroupTask, Title: "Session info", ReadOnly: true, Idempotent: true, Result: typeOf[SessionInfo](),
		Description: "Show who this session acts as: task, workspace, agent, providers, and the username authenticated with each provider. Never includes credentials."},
	{Name: TaskInboxTool, Group: GroupTask, Title: "Task inbox", ReadOnly: true, Result: typeOf[Inbox](),
		Description: "Read the messages toolscope left for you (review requested, merged, closed, checks failed), once; call it when notified."},
	{Name: AddSourcesTool, Group: GroupTask, Title: "Attach repositories", Args: typeOf[AddSourcesArgs](), Result: typeOf[AddSourcesResult](),
		Codes:       []string{CodeSourceAdditionDenied, CodeAlreadyExists},
		Description: "Attach workspace repositories to this task in one batch (all or none); their providers' tools then appear. The workspace may refuse, or hold it for approval (outcome in task_inbox)."},
	{Name: GitPushTool, Group: GroupTask, Title: "Push this session's branch", Workspace: true, Idempotent: true, OpenWorld: true,
		Args: typeOf[RepoArgs](), Result: typeOf[PushResult](),
		Codes:       []string{CodeRepositoryNotAttached, CodeAmbiguousRepository, CodeNotConnected, CodeCredentialUnavailable, CodeNoWorkspace, CodePushRejected, CodePushFailed},
		Description: "Push the branch of your checkout of a task repository (this session's own, already checked out) to its provider; you need no credential. Commit first; never forced. Then create the pull/merge request."},

	{Name: GitHubPRCreate, Group: GroupGitHub, Counterpart: GitLabMRCreate, Title: "Create pull request", OpenWorld: true,
		Args: typeOf[CreateArgs](), Result: typeOf[ChangeRequest](), Codes: slices.Concat(apiCodes, []string{CodeAlreadyExists}),
		Description: "Open a pull request for a pushed branch of a task repository; it becomes the task's pull request for that repository."},
	{Name: GitHubPRStatus, Group: GroupGitHub, Counterpart: GitLabMRStatus, Title: "pull request status", ReadOnly: true, Idempotent: true, OpenWorld: true,
		Args: typeOf[RepoArgs](), Result: typeOf[ChangeStatus](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Status of the task's pull request: state, checks, reviews and approvals, mergeability, requested reviewers, unresolved threads."},
	{Name: GitHubPRComments, Group: GroupGitHub, Counterpart: GitLabMRDiscussions, Title: "pull request comments", ReadOnly: true, Idempotent: true, OpenWorld: true,
		Args: typeOf[RepoArgs](), Result: typeOf[Comments](), Codes: slices.Concat(apiCodes, onChange),
		Description: "List the review comments on the task's pull request, with the thread_id to reply to."},
	{Name: GitHubPRReply, Group: GroupGitHub, Counterpart: GitLabMRReply, Title: "Reply on pull request", OpenWorld: true,
		Args: typeOf[ReplyArgs](), Result: typeOf[Comment](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Reply to a review thread on the task's pull request."},
	{Name: GitHubPRRequestReviewers, Group: GroupGitHub, Counterpart: GitLabMRRequestReviewers, Title: "Request pull request reviewers", Idempotent: true, OpenWorld: true,
		Args: typeOf[ReviewersArgs](), Result: typeOf[ReviewersResult](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Request reviews of the task's pull request from people, by username."},
	{Name: GitHubPRAutomation, Group: GroupGitHub, Counterpart: GitLabMRAutomation, Title: "pull request automation", ReadOnly: true, Idempotent: true,
		Args: typeOf[RepoArgs](), Result: typeOf[AutomationResult](), Codes: onChange,
		Description: "Show the task's automation settings for its pull request: auto-merge, prompts on review request, merge, close, and auto-fix of failing checks."},
	{Name: GitHubPRSetAutomation, Group: GroupGitHub, Counterpart: GitLabMRSetAutomation, Title: "Set pull request automation", Idempotent: true,
		Args: typeOf[SetAutomationArgs](), Result: typeOf[AutomationResult](), Codes: onChange,
		Description: "Change the task's automation settings for its pull request; omitted settings keep their value."},

	{Name: GitLabMRCreate, Group: GroupGitLab, Counterpart: GitHubPRCreate, Title: "Create merge request", OpenWorld: true,
		Args: typeOf[CreateArgs](), Result: typeOf[ChangeRequest](), Codes: slices.Concat(apiCodes, []string{CodeAlreadyExists}),
		Description: "Open a merge request for a pushed branch of a task repository; it becomes the task's merge request for that repository."},
	{Name: GitLabMRStatus, Group: GroupGitLab, Counterpart: GitHubPRStatus, Title: "merge request status", ReadOnly: true, Idempotent: true, OpenWorld: true,
		Args: typeOf[RepoArgs](), Result: typeOf[ChangeStatus](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Status of the task's merge request: state, checks, reviews and approvals, mergeability, requested reviewers, unresolved threads."},
	{Name: GitLabMRDiscussions, Group: GroupGitLab, Counterpart: GitHubPRComments, Title: "merge request comments", ReadOnly: true, Idempotent: true, OpenWorld: true,
		Args: typeOf[RepoArgs](), Result: typeOf[Comments](), Codes: slices.Concat(apiCodes, onChange),
		Description: "List the review comments on the task's merge request, with the thread_id to reply to."},
	{Name: GitLabMRReply, Group: GroupGitLab, Counterpart: GitHubPRReply, Title: "Reply on merge request", OpenWorld: true,
		Args: typeOf[ReplyArgs](), Result: typeOf[Comment](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Reply to a review thread on the task's merge request."},
	{Name: GitLabMRRequestReviewers, Group: GroupGitLab, Counterpart: GitHubPRRequestReviewers, Title: "Request merge request reviewers", Idempotent: true, OpenWorld: true,
		Args: typeOf[ReviewersArgs](), Result: typeOf[ReviewersResult](), Codes: slices.Concat(apiCodes, onChange),
		Description: "Request reviews of the task's merge request from people, by username."},
	{Name: GitLabMRAutomation, Group: GroupGitLab, Counterpart: GitHubPRAutomation, Title: "merge request automation", ReadOnly: true, Idempotent: true,
		Args: typeOf[RepoArgs](), Result: typeOf[AutomationResult](), Codes: onChange,
		Description: "Show the task's automation settings for its merge request: auto-merge, prompts on review request, merge, close, and auto-fix of failing checks."},
	{Name: GitLabMRSetAutomation, Group: GroupGitLab, Counterpart: GitHubPRSetAutomation, Title: "Set merge request automation", Idempotent: true,
		Args: typeOf[SetAutomationArgs](), Result: typeOf[AutomationResult](), Codes: onChange,
		Description: "Change the task's automation settings for its merge request; omitted settings keep their value."},
}

// ParityExemptions gives, for a provider tool without a counterpart, the
// reason none exists. The parity test fails on a provider tool with
// neither.
var ParityExemptions = map[string]string{}

var byName = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, t := range table {
		if _, dup := m[t.Name]; dup {
			panic("toolapi: tool " + t.Name + " is in the table twice")
		}
		m[t.Name] = i
	}
	return m
}()

// Tools returns the table: every built-in tool, task tools first, then
// GitHub's, then GitLab's. The slice is a copy.
func Tools() []Tool { return slices.Clone(table) }

// Lookup returns the built-in tool named name.
func Lookup(name string) (Tool, bool) {
	i, ok := byName[name]
	if !ok {
		return Tool{}, false
	}
	return table[i], true
}

// Like returns the tool of group g that does what the provider tool name
// does: name itself, or its counterpart. It is "" when g has none.
func (g Group) Like(name string) string {
	t, ok := Lookup(name)
	switch {
	case !ok:
		return ""
	case t.Group == g:
		return t.Name
	}
	if c, ok := Lookup(t.Counterpart); ok && c.Group == g {
		return c.Name
	}
	return ""
}

// Names returns the names of g's tools, in the table's order.
func (g Group) Names() []string {
	var out []string
	for _, t := range table {
		if t.Group == g {
			out = append(out, t.Name)
		}
	}
	return out
}

// Shown reports whether a task-mode session with the provider set, and
// a workspace or not, shows t: a task tool always (a workspace tool with
// a workspace), a provider tool when its provider is in the set.
func (t Tool) Shown(set providers.Set, workspace bool) bool {
	if t.Workspace && !workspace {
		return false
	}
	p, ok := t.Group.Provider()
	return !ok || set.Has(p)
}

// Surface returns, sorted, the tools a task-mode session without a
// workspace shows for the given providers ("github", "gitlab"). Tests use
// it to say what an agent should see.
func Surface(raw ...string) []string { return surface(false, raw...) }

// WorkspaceSurface is Surface for a session with a workspace.
func WorkspaceSurface(raw ...string) []string { return surface(true, raw...) }

func surface(workspace bool, raw ...string) []string {
	set := providers.Of(raw...)
	var out []string
	for _, t := range table {
		if t.Shown(set, workspace) {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ReadOnly reports whether the built-in tool name only reads, and so may
// be called by a plan-mode session. Unknown names are not read-only.
func ReadOnly(name string) bool {
	t, ok := Lookup(name)
	return ok && t.ReadOnly
}

// ReadOnlyTools returns the read-only built-in tools, sorted.
func ReadOnlyTools() []string {
	var out []string
	for _, t := range table {
		if t.ReadOnly {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ownPkg is this package's path: the generated schemas are its types'.
var ownPkg = reflect.TypeFor[Tool]().PkgPath()

// noArgs is the input schema of a tool that takes no arguments.
var noArgs = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// InputSchema returns the JSON Schema of t's arguments: computed at build
// time (schemas_gen.go), by reflection only for a type added since.
func (t Tool) InputSchema() json.RawMessage {
	if t.Args == nil {
		return slices.Clone(noArgs)
	}
	return schemaOf(t.Args)
}

// OutputSchema returns the JSON Schema of t's structured result.
func (t Tool) OutputSchema() json.RawMessage { return schemaOf(t.Result) }

// SchemaTypes returns, sorted by name and once each, the argument and
// result types of the table, and the arguments of agentctl's own
// call_tool: the schemas go generate computes.
func SchemaTypes() []reflect.Type {
	seen := map[reflect.Type]bool{}
	var out []reflect.Type
	for _, t := range table {
		for _, typ := range []reflect.Type{t.Args, t.Result} {
			if typ != nil && !seen[typ] {
				seen[typ] = true
				out = append(out, typ)
			}
		}
	}
	out = append(out, reflect.TypeFor[CallToolArgs]())
	slices.SortFunc(out, func(a, b reflect.Type) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

func schemaOf(typ reflect.Type) json.RawMessage {
	if s, ok := generatedSchemas[typ.Name()]; ok && typ.PkgPath() == ownPkg {
		return json.RawMessage(s)
	}
	return ReflectSchema(typ)
}
