package toolcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Deliverer pushes a session's own branch of its checkout of the
// repository key through the session's agentctl, with cred for that one
// push (the service, through the executors' Controller). The agent never
// holds cred: it is resolved here, after the call's checks, and handed to
// agentctl alone.
type Deliverer func(ctx context.Context, sess model.Session, key string, cred executors.GitCredential) (executors.Delivery, error)

// SetDeliverer installs the handler behind git_push.
func (d *Dispatcher) SetDeliverer(deliver Deliverer) { d.deliver = deliver }

// gitPush answers git_push: the repository is attached to the task and
// is a GitHub or GitLab one, the workspace is connected to its provider
// and the connection's credential resolves; then agentctl pushes the
// session's branch (executors.SessionBranch, never one the agent names)
// with that credential, never forced, never the default branch.
func gitPush(ctx context.Context, d *Dispatcher, s scope, args json.RawMessage) Result {
	var in toolapi.RepoArgs
	if err := decode(args, &in); err != nil {
		return fail(toolapi.CodeInvalidArguments, "%v", err)
	}
	repo, res, ok := pushTarget(s.task, in.RepositoryID)
	if !ok {
		return res
	}
	p, _ := providers.Normalize(repo.Provider)
	conn, err := d.conns.Lookup(ctx, s.task.WorkspaceID, p)
	if errors.Is(err, connections.ErrNotConnected) {
		return withRepo(fail(toolapi.CodeNotConnected, "the workspace is not connected to %s, so nothing of %s/%s can be pushed; ask the operator to run "+
			"'toolscope workspace connect %s --provider %s'", p, repo.Host, repo.Path, s.task.WorkspaceID, p), repo)
	} else if err != nil {
		return d.internal(ctx, Call{SessionID: s.session.ID, Tool: toolapi.GitPushTool}, err)
	}
	user, token, err := d.conns.GitCredential(conn)
	var ce *connections.CredentialError
	if errors.As(err, &ce) {
		return withRepo(fail(toolapi.CodeCredentialUnavailable, "%v; ask the operator to fix the connection", ce), repo)
	} else if err != nil {
		return d.internal(ctx, Call{SessionID: s.session.ID, Tool: toolapi.GitPushTool}, err)
	}
	clone, err := forge.CloneOf(conn.APIBaseURL, repo.Path)
	if err != nil {
		return d.internal(ctx, Call{SessionID: s.session.ID, Tool: toolapi.GitPushTool}, err)
	}
	branch := executors.SessionBranch(s.task.ID, s.session.ID)
	if d.deliver == nil {
		return withRepo(fail(toolapi.CodeNoWorkspace, "this orchestrator delivers no branches"), repo)
	}
	out, err := d.deliver(ctx, s.session, clone.Key, executors.GitCredential{User: user, Token: token})
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return withRepo(fail(toolapi.CodeNoWorkspace, "this session has no checkout of %s/%s: its workspace holds the repositories "+
			"attached, and connected, when it was launched; a session launched again checks out the others", repo.Host, repo.Path), repo)
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrPermissionDenied):
		return withRepo(fail(toolapi.CodePushRejected, "branch %s of %s/%s was not pushed: %v", branch, repo.Host, repo.Path, err), repo)
	case err != nil:
		return withRepo(fail(toolapi.CodePushFailed, "branch %s of %s/%s was not pushed: %v; retry later", branch, repo.Host, repo.Path, err), repo)
	}
	state := "pushed"
	if out.UpToDate {
		state = "already up to date"
	}
	return withRepo(Result{
		Text: fmt.Sprintf("Branch %s of %s/%s %s at %s. Open the %s with this branch (the default of its create tool).",
			branch, repo.Host, repo.Path, state, short(out.Commit), kind(p)),
		Structured: toolapi.PushResult{RepositoryID: repo.ID, Branch: branch, Ref: out.Ref, Commit: out.Commit, UpToDate: out.UpToDate},
	}, repo)
}

func withRepo(r Result, repo model.Repository) Result {
	r.repository = repo.ID
	return r
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// pushTarget picks the repository git_push acts on: the one named, which
// must be attached to the task and a GitHub or GitLab one, or the task's
// only such repository.
func pushTarget(task model.Task, id string) (model.Repository, Result, bool) {
	var hosted []model.Repository
	for _, r := range task.Repositories {
		if _, ok := providers.Normalize(r.Provider); ok {
			hosted = append(hosted, r.Repository)
		}
		if id != "" && r.ID == id {
			if _, ok := providers.Normalize(r.Provider); !ok {
				return model.Repository{}, fail(toolapi.CodeRepositoryNotAttached, "repository %s is a %q repository: only GitHub and GitLab "+
					"repositories are checked out and pushed by toolscope", id, r.Provider), false
			}
			return r.Repository, Result{}, true
		}
	}
	if id != "" {
		return model.Repository{}, fail(toolapi.CodeRepositoryNotAttached, "repository %q is not attached to this task; task_info lists its repositories", id), false
	}
	switch len(hosted) {
	case 0:
		return model.Repository{}, fail(toolapi.CodeRepositoryNotAttached, "no GitHub or GitLab repository is attached to this task; "+
			"attach one with task_add_sources"), false
	case 1:
		return hosted[0], Result{}, true
	}
	var ids []string
	for _, r := range hosted {
		ids = append(ids, r.ID)
	}
	return model.Repository{}, fail(toolapi.CodeAmbiguousRepository, "the task has %d repositories; pass repository_id (one of %s)",
		len(hosted), strings.Join(ids, ", ")), false
}
