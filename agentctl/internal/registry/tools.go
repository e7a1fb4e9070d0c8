package registry

import (
	"encoding/json"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// The built-in tool definitions. They are part of every agent's context
// window, so each is kept lean: a short description that says when to use
// the tool, and an input schema with only the arguments it needs. Identity
// (task, session) is never an argument: agentctl binds it from the session.

var noArgs = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

var taskTools = []Tool{
	{
		Name:         "task_info",
		Title:        "Task info",
		Description:  "Show this task: title, description, attached repositories (provider, host, path) and the review providers whose tools you have.",
		InputSchema:  noArgs,
		OutputSchema: toolapi.OutputSchema[toolapi.TaskInfo](),
		Idempotent:   true,
	},
	{
		Name:         "session_info",
		Title:        "Session info",
		Description:  "Show who this session acts as: task, workspace, agent, providers, and the username authenticated with each provider. Never includes credentials.",
		InputSchema:  noArgs,
		OutputSchema: toolapi.OutputSchema[toolapi.SessionInfo](),
		Idempotent:   true,
	},
	{
		Name:         "task_inbox",
		Title:        "Task inbox",
		Description:  "Read the messages toolscope left for you (review requested, merged, closed, checks failed), once; call it when notified.",
		InputSchema:  noArgs,
		OutputSchema: toolapi.OutputSchema[toolapi.Inbox](),
	},
	{
		Name:         "task_add_sources",
		Title:        "Attach repositories",
		Description:  "Attach workspace repositories to this task in one batch (all or none); their providers' tools then appear. The workspace may refuse, or hold it for approval (outcome in task_inbox).",
		InputSchema:  toolapi.InputSchema[toolapi.AddSourcesArgs](),
		OutputSchema: toolapi.OutputSchema[toolapi.AddSourcesResult](),
	},
}

// providerTools builds one provider's group: the same seven tools on
// GitHub pull requests and GitLab merge requests. Input schemas come from
// the argument types the orchestrator decodes with (package toolapi).
func providerTools(names [7]string, pr, prs string) []Tool {
	repo := toolapi.InputSchema[toolapi.RepoArgs]()
	return []Tool{
		{Name: names[0], Title: "Create " + pr, InputSchema: toolapi.InputSchema[toolapi.CreateArgs](),
			OutputSchema: toolapi.OutputSchema[toolapi.ChangeRequest](), OpenWorld: true,
			Description: "Open a " + pr + " for a pushed branch of a task repository; it becomes the task's " + pr + " for that repository."},
		{Name: names[1], Title: pr + " status", InputSchema: repo, OutputSchema: toolapi.OutputSchema[toolapi.ChangeStatus](),
			Idempotent: true, OpenWorld: true,
			Description: "Status of the task's " + pr + ": state, checks, reviews and approvals, mergeability, requested reviewers, unresolved threads."},
		{Name: names[2], Title: pr + " comments", InputSchema: repo, OutputSchema: toolapi.OutputSchema[toolapi.Comments](),
			Idempotent: true, OpenWorld: true,
			Description: "List the review comments on the task's " + pr + ", with the thread_id to reply to."},
		{Name: names[3], Title: "Reply on " + pr, InputSchema: toolapi.InputSchema[toolapi.ReplyArgs](),
			OutputSchema: toolapi.OutputSchema[toolapi.Comment](), OpenWorld: true,
			Description: "Reply to a review thread on the task's " + pr + "."},
		{Name: names[4], Title: "Request " + pr + " reviewers", InputSchema: toolapi.InputSchema[toolapi.ReviewersArgs](),
			OutputSchema: toolapi.OutputSchema[toolapi.ReviewersResult](), Idempotent: true, OpenWorld: true,
			Description: "Request reviews of the task's " + pr + " from people, by username."},
		{Name: names[5], Title: pr + " automation", InputSchema: repo, OutputSchema: toolapi.OutputSchema[toolapi.AutomationResult](),
			Idempotent:  true,
			Description: "Show the task's automation settings for its " + pr + ": auto-merge, prompts on review request, merge, close, and auto-fix of failing checks."},
		{Name: names[6], Title: "Set " + pr + " automation", InputSchema: toolapi.InputSchema[toolapi.SetAutomationArgs](),
			OutputSchema: toolapi.OutputSchema[toolapi.AutomationResult](), Idempotent: true,
			Description: "Change the task's automation settings for its " + pr + "; omitted settings keep their value."},
	}
}

var (
	githubTools = providerTools(toolapi.GitHubTools, "pull request", "pull requests")
	gitlabTools = providerTools(toolapi.GitLabTools, "merge request", "merge requests")
)

// Parity maps every GitHub tool to its GitLab counterpart, or to "" with a
// reason in ParityGaps. TestParity fails on any provider tool missing here.
var Parity = map[string]string{
	toolapi.GitHubPRCreate:           toolapi.GitLabMRCreate,
	toolapi.GitHubPRStatus:           toolapi.GitLabMRStatus,
	toolapi.GitHubPRComments:         toolapi.GitLabMRDiscussions,
	toolapi.GitHubPRReply:            toolapi.GitLabMRReply,
	toolapi.GitHubPRRequestReviewers: toolapi.GitLabMRRequestReviewers,
	toolapi.GitHubPRAutomation:       toolapi.GitLabMRAutomation,
	toolapi.GitHubPRSetAutomation:    toolapi.GitLabMRSetAutomation,
}

// ParityGaps gives, for a tool of one provider without a counterpart, the
// reason why none exists.
var ParityGaps = map[string]string{}
