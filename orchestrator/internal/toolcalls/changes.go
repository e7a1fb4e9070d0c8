package toolcalls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// providerTool is how the dispatcher answers a provider tool (a GitHub or
// GitLab tool of toolapi's table), derived from its table entry.
type providerTool struct {
	// provider is the tool's group's.
	provider providers.Provider
	// needsChange: the tool acts on the task's existing change request
	// (the table says it can refuse no_change_request).
	needsChange bool
	// repoOnly: repository_id is the tool's only argument (its argument
	// type is RepoArgs); anything else is refused, as agentctl's schema
	// does.
	repoOnly bool
	handle   changeHandler
}

// changeHandler answers a provider tool on its target repository.
type changeHandler func(ctx context.Context, c *changeCall, args json.RawMessage) Result

// changeCall is an authorized provider call: the repository it targets,
// the API client with the resolved credential, the task's change request
// on that repository if the tool needs one.
type changeCall struct {
	d      *Dispatcher
	scope  scope
	repo   model.Repository
	client forge.Client
	change model.ChangeRequest
}

// changeHandlers answers the provider tools, by the GitHub tool's name:
// its GitLab counterpart (toolapi's table says which) is answered by the
// same handler on its own provider.
var changeHandlers = map[string]changeHandler{
	toolapi.GitHubPRCreate:           createChange,
	toolapi.GitHubPRStatus:           changeStatus,
	toolapi.GitHubPRComments:         listComments,
	toolapi.GitHubPRReply:            reply,
	toolapi.GitHubPRRequestReviewers: requestReviewers,
	toolapi.GitHubPRAutomation:       automation,
	toolapi.GitHubPRSetAutomation:    setAutomation,
}

// handleProvider runs the provider checks in order — the repository is
// attached to the task and has the tool's provider, the workspace is
// connected to it, its credential resolves, it is not rate limited, it
// has a place among the connection's calls in flight (waiting in its
// queue if need be) — and only then lets the handler reach the provider's
// API.
func (d *Dispatcher) handleProvider(ctx context.Context, call Call, s scope, t providerTool, args json.RawMessage) Result {
	var sel toolapi.RepoArgs
	if t.repoOnly {
		if err := decode(args, &sel); err != nil {
			return fail(toolapi.CodeInvalidArguments, "%v", err)
		}
	} else if err := json.Unmarshal(args, &sel); err != nil {
		return fail(toolapi.CodeInvalidArguments, "repository_id must be a string")
	}
	repo, res, ok := d.targetRepository(s.task, t.provider, sel.RepositoryID)
	if !ok {
		return res
	}
	tracing.Stage(ctx, "repository: attached, of the tool's provider")
	res = d.onRepository(ctx, call, s, t, repo, args)
	res.repository = repo.ID
	return res
}

// onRepository answers a provider tool on its target repository.
func (d *Dispatcher) onRepository(ctx context.Context, call Call, s scope, t providerTool, repo model.Repository, args json.RawMessage) Result {
	conn, err := d.conns.Lookup(ctx, s.task.WorkspaceID, t.provider)
	if errors.Is(err, connections.ErrNotConnected) {
		return fail(toolapi.CodeNotConnected, "the workspace is not connected to %s; ask the operator to run "+
			"'toolscope workspace connect %s --provider %s'", t.provider, s.task.WorkspaceID, t.provider)
	} else if err != nil {
		return d.internal(ctx, call, err)
	}
	tracing.Stage(ctx, "connection: the workspace is connected to the provider")
	lease, err := d.conns.Open(ctx, s.task.WorkspaceID, conn)
	var ce *connections.CredentialError
	var fe *forge.Error
	switch {
	case errors.As(err, &ce):
		return fail(toolapi.CodeCredentialUnavailable, "%v; ask the operator to fix the connection", ce)
	case errors.As(err, &fe):
		return fail(fe.Code, "%s", fe.Message)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fail(toolapi.CodeProviderUnavailable, "the call ended while it waited for a place among the connection's calls in flight (%v); retry", err)
	case err != nil:
		return d.internal(ctx, call, err)
	}
	defer lease.Release()
	c := &changeCall{d: d, scope: s, repo: repo, client: lease.Client}
	if t.needsChange {
		c.change, err = d.store.ChangeRequest(ctx, s.task.ID, repo.ID)
		if errors.Is(err, errdefs.ErrNotFound) {
			return fail(toolapi.CodeNoChangeRequest, "the task has no %s on %s/%s yet; create one first", kind(t.provider), repo.Host, repo.Path)
		} else if err != nil {
			return d.internal(ctx, call, err)
		}
	}
	return t.handle(ctx, c, args)
}

// targetRepository picks the repository a provider tool acts on: the one
// named (which must be attached to the task and have the tool's provider,
// now — not as it was at launch), or the task's only repository of that
// provider.
func (d *Dispatcher) targetRepository(task model.Task, p providers.Provider, id string) (model.Repository, Result, bool) {
	if id != "" {
		for _, r := range task.Repositories {
			if r.ID != id {
				continue
			}
			if got, ok := providers.Normalize(r.Provider); !ok || got != p {
				return model.Repository{}, fail(toolapi.CodeProviderMismatch, "repository %s is a %q repository, not %s; use the tools of its provider",
					id, r.Provider, p), false
			}
			return r.Repository, Result{}, true
		}
		return model.Repository{}, fail(toolapi.CodeRepositoryNotAttached, "repository %q is not attached to this task; task_info lists its repositories", id), false
	}
	var matches []model.Repository
	for _, r := range task.Repositories {
		if got, ok := providers.Normalize(r.Provider); ok && got == p {
			matches = append(matches, r.Repository)
		}
	}
	switch len(matches) {
	case 0:
		return model.Repository{}, fail(toolapi.CodeProviderNotAttached, "no %s repository is attached to this task (its providers: %s); "+
			"attach one with task_add_sources or use the tools of an attached provider", p, describe(task.Providers.Set)), false
	case 1:
		return matches[0], Result{}, true
	}
	var ids []string
	for _, m := range matches {
		ids = append(ids, m.ID)
	}
	return model.Repository{}, fail(toolapi.CodeAmbiguousRepository, "the task has %d %s repositories; pass repository_id (one of %s)",
		len(matches), p, strings.Join(ids, ", ")), false
}

// textArg is a free-text argument and the kind of text it is.
type textArg struct {
	kind         textlimit.Kind
	field, value string
}

// checkText returns the invalid_arguments result of the first argument
// its kind refuses.
func checkText(args ...textArg) (Result, bool) {
	for _, a := range args {
		if err := a.kind.Check(a.field, a.value); err != nil {
			return fail(toolapi.CodeInvalidArguments, "%v", err), true
		}
	}
	return Result{}, false
}

// decode reads a tool's arguments strictly: unknown fields are refused.
func decode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// providerFailure turns an API failure into a result (the lease's client
// has already recorded a rate limit for the connection).
func (c *changeCall) providerFailure(err error) Result {
	var fe *forge.Error
	if errors.As(err, &fe) {
		return fail(fe.Code, "%s", fe.Message)
	}
	c.d.log.Error("provider call failed", "repository_id", c.repo.ID, "error", err.Error())
	return fail(toolapi.CodeInternal, "the provider call failed; retry later")
}

func kind(p providers.Provider) string {
	if p == providers.GitLab {
		return "merge request"
	}
	return "pull request"
}

func (c *changeCall) summary(n int64, url, title, state string, draft bool, source, target string) toolapi.ChangeRequest {
	return toolapi.ChangeRequest{
		Provider: string(mustProvider(c.repo.Provider)), RepositoryID: c.repo.ID, Number: n, URL: url, Title: title, State: state,
		Draft: draft, SourceBranch: source, TargetBranch: target,
	}
}

func mustProvider(raw string) providers.Provider {
	p, _ := providers.Normalize(raw)
	return p
}

func (c *changeCall) stored() toolapi.ChangeRequest {
	return c.summary(c.change.Number, c.change.URL, c.change.Title, "", false, c.change.SourceBranch, c.change.TargetBranch)
}

func createChange(ctx context.Context, c *changeCall, args json.RawMessage) Result {
	var in toolapi.CreateArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	if strings.TrimSpace(in.Branch) == "" {
		in.Branch = executors.SessionBranch(c.scope.task.ID, c.scope.session.ID) // what git_push pushes
	}
	if strings.TrimSpace(in.Title) == "" {
		return fail(toolapi.CodeInvalidArguments, "title is required")
	}
	if r, bad := checkText(
		textArg{textlimit.Branch, "branch", in.Branch},
		textArg{textlimit.Branch, "base", in.Base},
		textArg{textlimit.Title, "title", in.Title},
		textArg{textlimit.Text, "body", in.Body},
	); bad {
		return r
	}
	p := mustProvider(c.repo.Provider)
	if existing, err := c.d.store.ChangeRequest(ctx, c.scope.task.ID, c.repo.ID); err == nil {
		return fail(toolapi.CodeAlreadyExists, "the task already has %s #%d on this repository (%s)", kind(p), existing.Number, existing.URL)
	}
	ch, err := c.client.Create(ctx, forge.Repo{Path: c.repo.Path}, forge.CreateInput{
		Branch: in.Branch, Base: in.Base, Title: in.Title, Body: in.Body, Draft: in.Draft,
	})
	if err != nil {
		return c.providerFailure(err)
	}
	if _, err := c.d.store.RecordChangeRequest(ctx, model.ChangeRequest{
		TaskID: c.scope.task.ID, RepositoryID: c.repo.ID, Provider: p, Number: ch.Number, URL: ch.URL, Title: ch.Title,
		SourceBranch: ch.Source, TargetBranch: ch.Target, Automation: model.DefaultAutomation,
	}); err != nil {
		c.d.log.Error("record a created change request", "task_id", c.scope.task.ID, "url", ch.URL, "error", err.Error())
		return fail(toolapi.CodeInternal, "the %s was created (%s) but toolscope could not record it", kind(p), ch.URL)
	}
	out := c.summary(ch.Number, ch.URL, ch.Title, ch.State, ch.Draft, ch.Source, ch.Target)
	return Result{Text: fmt.Sprintf("Created %s #%d: %s", kind(p), ch.Number, ch.URL), Structured: out}
}

func changeStatus(ctx context.Context, c *changeCall, _ json.RawMessage) Result {
	st, err := c.client.Status(ctx, forge.Repo{Path: c.repo.Path}, c.change.Number)
	if err != nil {
		return c.providerFailure(err)
	}
	out := toolapi.ChangeStatus{
		ChangeRequest: c.summary(st.Number, st.URL, st.Title, st.State, st.Draft, st.Source, st.Target),
		Checks:        st.Checks, CheckRuns: st.CheckRuns, Reviews: st.Reviews, Approved: st.Approved, Mergeable: st.Mergeable,
		RequestedReviewers: st.RequestedReviewers, UnresolvedThreads: st.UnresolvedThreads,
	}
	text := fmt.Sprintf("%s #%d is %s; checks %s; approved %v; mergeable %s; %d unresolved threads; reviewers requested: %s",
		kind(mustProvider(c.repo.Provider)), st.Number, st.State, st.Checks, st.Approved, st.Mergeable, st.UnresolvedThreads,
		strings.Join(st.RequestedReviewers, ", "))
	return Result{Text: text, Structured: out}
}

func listComments(ctx context.Context, c *changeCall, _ json.RawMessage) Result {
	comments, err := c.client.Comments(ctx, forge.Repo{Path: c.repo.Path}, c.change.Number)
	if err != nil {
		return c.providerFailure(err)
	}
	return Result{Text: fmt.Sprintf("%d review comments", len(comments)), Structured: toolapi.Comments{Comments: comments}}
}

func reply(ctx context.Context, c *changeCall, args json.RawMessage) Result {
	var in toolapi.ReplyArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	if strings.TrimSpace(in.ThreadID) == "" || strings.TrimSpace(in.Body) == "" {
		return fail(toolapi.CodeInvalidArguments, "thread_id and body are required")
	}
	if r, bad := checkText(textArg{textlimit.Name, "thread_id", in.ThreadID}, textArg{textlimit.Text, "body", in.Body}); bad {
		return r
	}
	cm, err := c.client.Reply(ctx, forge.Repo{Path: c.repo.Path}, c.change.Number, in.ThreadID, in.Body)
	if err != nil {
		return c.providerFailure(err)
	}
	return Result{Text: "Replied in thread " + cm.ThreadID, Structured: cm}
}

func requestReviewers(ctx context.Context, c *changeCall, args json.RawMessage) Result {
	var in toolapi.ReviewersArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	if len(in.Reviewers) == 0 {
		return fail(toolapi.CodeInvalidArguments, "reviewers: name at least one username")
	}
	for i, r := range in.Reviewers {
		if strings.TrimSpace(r) == "" {
			return fail(toolapi.CodeInvalidArguments, "reviewers[%d]: is blank; name a username", i)
		}
		if r, bad := checkText(textArg{textlimit.Name, fmt.Sprintf("reviewers[%d]", i), r}); bad {
			return r
		}
	}
	got, err := c.client.RequestReviewers(ctx, forge.Repo{Path: c.repo.Path}, c.change.Number, in.Reviewers)
	if err != nil {
		return c.providerFailure(err)
	}
	return Result{Text: "Reviewers requested: " + strings.Join(got, ", "), Structured: toolapi.ReviewersResult{RequestedReviewers: got}}
}

func automationResult(c *changeCall, cr model.ChangeRequest) Result {
	a := cr.Automation
	out := toolapi.AutomationResult{ChangeRequest: c.stored(), Automation: toolapi.Automation{
		AutoMerge: a.AutoMerge, PromptOnReviewRequested: a.PromptOnReviewRequested, PromptOnMerged: a.PromptOnMerged,
		PromptOnClosed: a.PromptOnClosed, AutoFixChecks: a.AutoFixChecks,
	}}
	text := fmt.Sprintf("auto_merge=%v prompt_on_review_requested=%v prompt_on_merged=%v prompt_on_closed=%v auto_fix_checks=%v",
		a.AutoMerge, a.PromptOnReviewRequested, a.PromptOnMerged, a.PromptOnClosed, a.AutoFixChecks)
	return Result{Text: text, Structured: out}
}

func automation(_ context.Context, c *changeCall, _ json.RawMessage) Result {
	return automationResult(c, c.change)
}

func setAutomation(ctx context.Context, c *changeCall, args json.RawMessage) Result {
	var in toolapi.SetAutomationArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	cr, err := c.d.store.UpdateAutomation(ctx, c.scope.task.ID, c.repo.ID, func(a *model.Automation) {
		set := func(dst *bool, v *bool) {
			if v != nil {
				*dst = *v
			}
		}
		set(&a.AutoMerge, in.AutoMerge)
		set(&a.PromptOnReviewRequested, in.PromptOnReviewRequested)
		set(&a.PromptOnMerged, in.PromptOnMerged)
		set(&a.PromptOnClosed, in.PromptOnClosed)
		set(&a.AutoFixChecks, in.AutoFixChecks)
	})
	if err != nil {
		return fail(toolapi.CodeInternal, "the settings could not be saved; retry")
	}
	return automationResult(c, cr)
}
