package service

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// checkouts are the repositories a session's workspace holds (ADR 0038):
// every GitHub or GitLab repository of the task whose provider the
// workspace is connected to with a credential that resolves now, cloned
// from that connection's instance and fetched with its credential. A
// repository without one is left out, as its tools are (task_info's
// orientation says why); local and unknown sources are not checked out.
// Each is on the session's branch (made from the task's open pull or merge
// request's branch when there is one), in a directory named after it. repos
// maps each checkout's key to its repository's id.
func (s *Service) checkouts(ctx context.Context, task model.Task, sessionID string) (_ []executors.Checkout, repos map[string]string, err error) {
	ws, err := s.store.GetWorkspace(ctx, task.WorkspaceID)
	if err != nil {
		return nil, nil, err
	}
	repos = map[string]string{}
	conns := map[providers.Provider]model.Connection{}
	for _, c := range ws.Connections {
		conns[c.Provider] = c
	}
	var out []executors.Checkout
	used := map[string]bool{}
	for _, r := range task.Repositories {
		p, ok := forgeOf(r)
		if !ok {
			continue
		}
		conn, ok := conns[p]
		if !ok {
			continue
		}
		user, token, err := s.conns.GitCredential(conn)
		if err != nil {
			continue
		}
		clone, err := forge.CloneOf(conn.APIBaseURL, r.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("repository %s/%s: %w", r.Host, r.Path, err)
		}
		base, err := s.openChangeBranch(ctx, task.ID, r.ID)
		if err != nil {
			return nil, nil, err
		}
		repos[clone.Key] = r.ID
		out = append(out, executors.Checkout{Key: clone.Key, URL: clone.URL, Branch: executors.SessionBranch(task.ID, sessionID),
			Base: base, Path: checkoutDir(r.Path, used), Fetch: executors.GitCredential{User: user, Token: token}})
	}
	return out, repos, nil
}

// forgeOf is the provider of a repository a workspace checks out: GitHub
// or GitLab; local and unknown sources are not checked out.
func forgeOf(r model.TaskRepository) (providers.Provider, bool) {
	p, ok := providers.Normalize(r.Provider)
	return p, ok && (p == providers.GitHub || p == providers.GitLab)
}

// CheckoutTimeout bounds a push that brings a running session checkouts
// of repositories attached since its workspace was made (the download of
// a repository no mirror on the host has yet), in place of the push
// timeout.
const CheckoutTimeout = 10 * time.Minute

// freshCheckouts are the checkouts of the session's task that its
// workspace has not recorded (repositories attached while it runs), and
// the repositories of every checkout of the task by key.
func (s *Service) freshCheckouts(ctx context.Context, sess model.Session) ([]executors.Checkout, map[string]string, error) {
	task, err := s.store.GetTask(ctx, sess.TaskID)
	if err != nil {
		return nil, nil, err
	}
	if !slices.ContainsFunc(task.Repositories, func(r model.TaskRepository) bool {
		_, recorded := sess.Checkouts.OfRepository(r.ID)
		_, forge := forgeOf(r)
		return forge && !recorded
	}) {
		return nil, nil, nil // the usual push: nothing attached since
	}
	all, repos, err := s.checkouts(ctx, task, sess.ID)
	if err != nil {
		return nil, nil, err
	}
	var fresh []executors.Checkout
	for _, c := range all {
		if _, ok := sess.Checkouts.Checkout(c.Key); !ok {
			fresh = append(fresh, c)
		}
	}
	return fresh, repos, nil
}

// recordCheckouts is a session's workspace as a launch's status reports
// it: each checkout where agentctl made it (or why it did not), with the
// delivery recorded before, which a relaunch on the same branch keeps.
func recordCheckouts(before model.Checkouts, st executors.Status, repos map[string]string) model.Checkouts {
	out := model.Checkouts{Dir: st.WorkspaceDir}
	for _, c := range st.Checkouts {
		rec := model.Checkout{RepositoryID: repos[c.Key], Key: c.Key, Branch: c.Branch, Error: c.Error}
		if old, ok := before.Checkout(c.Key); ok && rec.RepositoryID == "" {
			rec.RepositoryID = old.RepositoryID // its credential does not resolve now
		}
		if c.Error == "" && st.WorkspaceDir != "" {
			rec.Path = path.Join(st.WorkspaceDir, c.Path)
		}
		if old, ok := before.Checkout(c.Key); ok && old.Branch == c.Branch {
			rec.Delivered, rec.Work = old.Delivered, old.Work
		}
		out.Repositories = append(out.Repositories, rec)
	}
	return out
}

// withWork is c with the work st measured (at) for each checkout it
// holds; a checkout st did not measure keeps what it had.
func withWork(c model.Checkouts, st executors.Status, at time.Time) model.Checkouts {
	out := model.Checkouts{Dir: c.Dir, Repositories: slices.Clone(c.Repositories)}
	for _, m := range st.Checkouts {
		if m.Work == nil {
			continue
		}
		for i := range out.Repositories {
			if r := &out.Repositories[i]; r.Key == m.Key && r.Branch == m.Branch {
				r.Work = &model.Work{Head: m.Work.Head, Uncommitted: m.Work.Uncommitted, Unpushed: m.Work.Unpushed, Error: m.Work.Error, At: at}
			}
		}
	}
	return out
}

// openChangeBranch is the source branch of the task's pull or merge
// request on a repository while it is open (not seen merged or closed):
// a new session's branch starts there, on the work under review. Empty
// without one: the default branch.
func (s *Service) openChangeBranch(ctx context.Context, taskID, repoID string) (string, error) {
	cr, cp, err := s.store.Evaluation(ctx, taskID, repoID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case cp.Merged || cp.Closed:
		return "", nil
	}
	return cr.SourceBranch, nil
}

// checkoutDir is the directory a repository gets in a workspace: its
// name ("api" of acme/api), or its whole path joined with '-' when
// another repository of the task has that name, then a number if need
// be. A name never starts with '.'.
func checkoutDir(repoPath string, used map[string]bool) string {
	name := strings.TrimLeft(path.Base(repoPath), ".")
	if name == "" || used[name] {
		name = strings.TrimLeft(strings.ReplaceAll(strings.Trim(repoPath, "/"), "/", "-"), ".")
	}
	base := name
	for i := 2; used[name] || name == ""; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	used[name] = true
	return name
}

// Deliver pushes a session's own branch of one of its checkouts through
// its agentctl (toolcalls' git_push, after its checks) and records the
// commit delivered with the session's checkout.
func (s *Service) Deliver(ctx context.Context, sess model.Session, key string, cred executors.GitCredential) (executors.Delivery, error) {
	d, err := s.ctl.Deliver(ctx, handleOf(sess), key, cred)
	if err != nil {
		return d, err
	}
	// Recorded even if the caller went away: the branch was pushed.
	_, err = s.store.UpdateSession(context.WithoutCancel(ctx), sess.ID, func(m *model.Session) ([]model.Event, error) {
		for i, c := range m.Checkouts.Repositories {
			if c.Key == key {
				m.Checkouts.Repositories[i].Delivered = &model.Delivered{Commit: d.Commit, At: time.Now().UTC()}
			}
		}
		return nil, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "record a delivery", "session_id", sess.ID, "repository", key, "error", err)
	}
	return d, nil
}

// describeWorkspace says, for a session.started event and the launch's
// progress, where the session's workspace is and each checkout that could
// not be made, with why: "" for a session without one.
func describeWorkspace(st executors.Status) string {
	if len(st.Checkouts) == 0 {
		return ""
	}
	made, failed := 0, []string{}
	for _, c := range st.Checkouts {
		if c.Error == "" {
			made++
		} else {
			failed = append(failed, fmt.Sprintf("%s not checked out: %s", c.Key, c.Error))
		}
	}
	out := fmt.Sprintf("; workspace %s: %d of %d repositories checked out on branch %s", st.WorkspaceDir, made, len(st.Checkouts), st.Checkouts[0].Branch)
	if len(failed) > 0 {
		out += " (" + strings.Join(failed, "; ") + ")"
	}
	return out
}
