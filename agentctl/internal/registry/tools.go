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
		ReadOnly:     true,
		Idempotent:   true,
	},
	{
		Name:         "session_info",
		Title:        "Session info",
		Description:  "Show who this session acts as: task, workspace, agent, providers, and the username authenticated with each provider. Never includes credentials.",
		InputSchema:  noArgs,
		OutputSchema: toolapi.OutputSchema[toolapi.SessionInfo](),
		ReadOnly:     true,
		Idempotent:   true,
	},
}

// repoArg selects one of the task's repositories of a provider; it may be
// omitted when the task has only one.
const repoArg = `"repository_id":{"type":"string","description":"Repository id from task_info; omit when the task has one repository of this provider."}`

var githubTools = []Tool{
	{
		Name:        "github_pr_status",
		Title:       "GitHub PR status",
		Description: "Status of this task's GitHub pull request: state, checks, reviews, mergeability, requested reviewers and unresolved threads.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + repoArg + `},"additionalProperties":false}`),
		ReadOnly:    true,
		Idempotent:  true,
		OpenWorld:   true,
	},
}

var gitlabTools = []Tool{
	{
		Name:        "gitlab_mr_status",
		Title:       "GitLab MR status",
		Description: "Status of this task's GitLab merge request: state, pipeline, approvals, mergeability, reviewers and unresolved discussions.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + repoArg + `},"additionalProperties":false}`),
		ReadOnly:    true,
		Idempotent:  true,
		OpenWorld:   true,
	},
}
