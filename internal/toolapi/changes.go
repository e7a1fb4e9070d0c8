package toolapi

// The provider tools' argument and result types: pull requests on GitHub,
// merge requests on GitLab, symmetrical. "Change request" names either.

// RepoArgs selects the task's repository of the tool's provider.
type RepoArgs struct {
	RepositoryID string `json:"repository_id,omitempty" jsonschema:"Repository id from task_info; omit when the task has one repository of this provider."`
}

// CreateArgs opens a change request for a pushed branch.
type CreateArgs struct {
	RepositoryID string `json:"repository_id,omitempty" jsonschema:"Repository id from task_info; omit when the task has one repository of this provider."`
	Branch       string `json:"branch,omitempty" jsonschema:"The pushed branch with the changes; default: this session's branch (git_push)."`
	Base         string `json:"base,omitempty" jsonschema:"Branch to merge into; default: the repository's default branch (main)."`
	Title        string `json:"title"`
	Body         string `json:"body,omitempty" jsonschema:"Description, Markdown."`
	Draft        bool   `json:"draft,omitempty"`
}

// PushResult is what git_push pushed.
type PushResult struct {
	RepositoryID string `json:"repository_id"`
	Branch       string `json:"branch"`
	// Ref is the provider's ref, refs/heads/<branch>; Commit the commit
	// it points at now.
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	// UpToDate: the provider's branch was already at Commit.
	UpToDate bool `json:"up_to_date,omitempty"`
}

// ReplyArgs answers one review thread.
type ReplyArgs struct {
	RepositoryID string `json:"repository_id,omitempty" jsonschema:"Repository id from task_info; omit when the task has one repository of this provider."`
	ThreadID     string `json:"thread_id" jsonschema:"thread_id of a comment listed by the comments tool."`
	Body         string `json:"body" jsonschema:"The reply, Markdown."`
}

// ReviewersArgs asks people to review.
type ReviewersArgs struct {
	RepositoryID string   `json:"repository_id,omitempty" jsonschema:"Repository id from task_info; omit when the task has one repository of this provider."`
	Reviewers    []string `json:"reviewers" jsonschema:"Usernames to request a review from."`
}

// SetAutomationArgs changes the automation settings; omitted fields keep
// their value.
type SetAutomationArgs struct {
	RepositoryID            string `json:"repository_id,omitempty" jsonschema:"Repository id from task_info; omit when the task has one repository of this provider."`
	AutoMerge               *bool  `json:"auto_merge,omitempty" jsonschema:"Merge automatically once checks pass and it is approved."`
	PromptOnReviewRequested *bool  `json:"prompt_on_review_requested,omitempty" jsonschema:"Tell you when a review is requested from the workspace's user."`
	PromptOnMerged          *bool  `json:"prompt_on_merged,omitempty" jsonschema:"Tell you when it is merged."`
	PromptOnClosed          *bool  `json:"prompt_on_closed,omitempty" jsonschema:"Tell you when it is closed without merging."`
	AutoFixChecks           *bool  `json:"auto_fix_checks,omitempty" jsonschema:"Ask you to fix failing checks."`
}

// ChangeRequest is a pull request (GitHub) or merge request (GitLab).
type ChangeRequest struct {
	Provider     string `json:"provider"`
	RepositoryID string `json:"repository_id"`
	// Number is the PR number or the MR iid.
	Number       int64  `json:"number"`
	URL          string `json:"url"`
	Title        string `json:"title"`
	State        string `json:"state"`
	Draft        bool   `json:"draft"`
	SourceBranch string `json:"source_branch"`
	TargetBranch string `json:"target_branch"`
}

// Check is one CI check (GitHub check run, GitLab pipeline).
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Review is one reviewer's verdict.
type Review struct {
	User  string `json:"user"`
	State string `json:"state"`
}

// ChangeStatus is what the status tools report.
type ChangeStatus struct {
	ChangeRequest
	// Checks is "passing", "failing", "pending" or "none".
	Checks    string   `json:"checks"`
	CheckRuns []Check  `json:"check_runs"`
	Reviews   []Review `json:"reviews"`
	Approved  bool     `json:"approved"`
	// Mergeable is the provider's verdict, for example "clean",
	// "blocked", "conflict", "mergeable".
	Mergeable          string   `json:"mergeable"`
	RequestedReviewers []string `json:"requested_reviewers"`
	UnresolvedThreads  int      `json:"unresolved_threads"`
}

// Comment is one review comment or discussion note.
type Comment struct {
	ThreadID string `json:"thread_id"`
	ID       string `json:"id"`
	Author   string `json:"author"`
	Body     string `json:"body"`
	Path     string `json:"path,omitempty"`
	Line     int    `json:"line,omitempty"`
	Resolved bool   `json:"resolved"`
	// Resolvable is false for comments outside review threads (GitLab).
	Resolvable bool `json:"resolvable"`
}

// Comments lists review comments.
type Comments struct {
	Comments []Comment `json:"comments"`
}

// Automation is what toolscope does on its own about a change request.
type Automation struct {
	AutoMerge               bool `json:"auto_merge"`
	PromptOnReviewRequested bool `json:"prompt_on_review_requested"`
	PromptOnMerged          bool `json:"prompt_on_merged"`
	PromptOnClosed          bool `json:"prompt_on_closed"`
	AutoFixChecks           bool `json:"auto_fix_checks"`
}

// AutomationResult is the settings of one change request.
type AutomationResult struct {
	ChangeRequest ChangeRequest `json:"change_request"`
	Automation    Automation    `json:"automation"`
}

// ReviewersResult lists the reviewers now requested.
type ReviewersResult struct {
	RequestedReviewers []string `json:"requested_reviewers"`
}
