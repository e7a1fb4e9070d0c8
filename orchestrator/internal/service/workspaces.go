package service

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/toolscope/toolscope/executors"
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
// Each is on the session's branch, in a directory named after it.
func (s *Service) checkouts(ctx context.Context, task model.Task, sessionID string) ([]executors.Checkout, error) {
	ws, err := s.store.GetWorkspace(ctx, task.WorkspaceID)
	if err != nil {
		return nil, err
	}
	conns := map[providers.Provider]model.Connection{}
	for _, c := range ws.Connections {
		conns[c.Provider] = c
	}
	var out []executors.Checkout
	used := map[string]bool{}
	for _, r := range task.Repositories {
		p, ok := providers.Normalize(r.Provider)
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
			return nil, fmt.Errorf("repository %s/%s: %w", r.Host, r.Path, err)
		}
		out = append(out, executors.Checkout{Key: clone.Key, URL: clone.URL, Branch: executors.SessionBranch(task.ID, sessionID),
			Path: checkoutDir(r.Path, used), Fetch: executors.GitCredential{User: user, Token: token}})
	}
	return out, nil
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
// its agentctl (toolcalls' git_push, after its checks).
func (s *Service) Deliver(ctx context.Context, sess model.Session, key string, cred executors.GitCredential) (executors.Delivery, error) {
	return s.ctl.Deliver(ctx, handleOf(sess), key, cred)
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
