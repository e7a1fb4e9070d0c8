package toolcalls

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// matrixTools enumerates every tool the dispatcher answers, from its own
// dispatch (not from a list kept by the test), and checks them against the
// surface an agent can be shown, so a new tool cannot escape the matrix.
func matrixTools(t *testing.T) []string {
	t.Helper()
	var taskTools, provTools []string
	for name, b := range builtins {
		if b.task != nil {
			taskTools = append(taskTools, name)
		} else {
			provTools = append(provTools, name)
		}
	}
	require.Len(t, taskTools, 5, "task tools answered by the dispatcher: %v", taskTools)
	require.Len(t, provTools, 14, "provider tools answered by the dispatcher: %v", provTools)
	all := slices.Sorted(slices.Values(append(taskTools, provTools...)))
	require.Equal(t, toolapi.WorkspaceSurface("github", "gitlab"), all,
		"the dispatcher answers exactly the tools an agent with both providers is shown")
	return all
}

// TestAuthorizationMatrix: every tool × {right task, other task, no
// session, revoked session, provider not on task} is allowed — and
// answered — only for the right task; every refusal carries its stable
// code and makes no request to GitHub or GitLab.
//
// "Provider not on task" applies to the 14 provider tools only: the 4
// task tools (task_info, session_info, task_inbox, task_add_sources) need
// no provider, so there is no refusal to expect of them in that column.
// The "wrong token" column lives at agentctl's MCP endpoint, where the
// token is checked; see agentctl/internal/daemon's TestWrongTokenMatrix.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	all := matrixTools(t)

	// task_add_sources goes through the store, as the orchestrator's own
	// AddSources does after its checks.
	f.d.SetSourceAdder(func(ctx context.Context, sessionID, taskID string, repoIDs []string) (SourceOutcome, error) {
		out, err := f.st.AgentAddSources(ctx, taskID, sessionID, repoIDs)
		return SourceOutcome{Providers: out.Task.Providers, Request: out.Request}, err
	})
	// git_push reaches the session's agentctl through the Controller (a
	// real one in cmd/toolscope's TestTheAgentDeliversItsBranchWithoutACredential);
	// here, what the dispatcher hands it.
	type delivery struct {
		session, key string
		cred         executors.GitCredential
	}
	var delivered []delivery
	f.d.SetDeliverer(func(_ context.Context, sess model.Session, key string, cred executors.GitCredential) (executors.Delivery, error) {
		delivered = append(delivered, delivery{sess.ID, key, cred})
		return executors.Delivery{Ref: "refs/heads/" + executors.SessionBranch(sess.TaskID, sess.ID), Commit: "0123456789abcdef"}, nil
	})
	extra, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "github.com", Path: "acme/docs"})
	require.NoError(t, err)

	running := func(task model.Task) model.Session {
		s, err := f.st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask,
			State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude"}})
		require.NoError(t, err)
		return s
	}
	ended := func(state model.SessionState) model.Session {
		s := running(f.task)
		s, err := f.st.UpdateSession(ctx, s.ID, func(s *model.Session) ([]model.Event, error) {
			s.State = state
			return nil, nil
		})
		require.NoError(t, err)
		return s
	}
	// Another task of the same workspace, on the same repositories, with
	// its own running session.
	otherTask, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "other"}, f.github.ID)
	require.NoError(t, err)
	otherTask, err = f.st.AddSources(ctx, otherTask.ID, []string{f.gitlab.ID}, testActor)
	require.NoError(t, err)
	otherSession := running(otherTask)
	stopped, failed := ended(model.SessionStopped), ended(model.SessionFailed)
	// Tasks without one of the providers, each with a running session.
	ghOnly, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "github only"}, f.github.ID)
	require.NoError(t, err)
	glOnly, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "gitlab only"}, f.gitlab.ID)
	require.NoError(t, err)
	ghOnlySession, glOnlySession := running(ghOnly), running(glOnly)

	// Valid arguments for each tool on the right task: with them the call
	// succeeds against the fake forges. Provider tools name their
	// repository, as task_add_sources attaches a second GitHub one.
	thread := map[string]string{}
	right := map[string]func() map[string]any{
		"task_info":        func() map[string]any { return nil },
		"session_info":     func() map[string]any { return nil },
		"task_inbox":       func() map[string]any { return map[string]any{} },
		"task_add_sources": func() map[string]any { return map[string]any{"repository_ids": []string{extra.ID}} },
		"git_push":         func() map[string]any { return map[string]any{"repository_id": f.github.ID} },
	}
	for _, p := range []struct {
		group    toolapi.Group
		repo     model.Repository
		reviewer string
	}{{toolapi.GroupGitHub, f.github, "carol"}, {toolapi.GroupGitLab, f.gitlab, "erin"}} {
		repo := p.repo.ID
		with := func(kv ...any) func() map[string]any {
			return func() map[string]any {
				m := map[string]any{"repository_id": repo}
				for i := 0; i < len(kv); i += 2 {
					v := kv[i+1]
					if fn, ok := v.(func() string); ok {
						v = fn()
					}
					m[kv[i].(string)] = v
				}
				return m
			}
		}
		right[p.group.Like(toolapi.GitHubPRCreate)] = with("branch", "fix-login", "title", "Fix login")
		right[p.group.Like(toolapi.GitHubPRStatus)] = with()
		right[p.group.Like(toolapi.GitHubPRComments)] = with()
		right[p.group.Like(toolapi.GitHubPRReply)] = with("thread_id", func() string { return thread[repo] }, "body", "fixed")
		right[p.group.Like(toolapi.GitHubPRRequestReviewers)] = with("reviewers", []string{p.reviewer})
		right[p.group.Like(toolapi.GitHubPRAutomation)] = with()
		right[p.group.Like(toolapi.GitHubPRSetAutomation)] = with("auto_merge", true)
	}
	require.ElementsMatch(t, all, slices.Collect(maps.Keys(right)), "every tool has valid arguments for the right task")

	// The refusal columns. For each: the session and task the call
	// carries, and the code it must get.
	type column struct {
		name            string
		session, task   string
		code            string
		providerOnly    bool // applies to provider tools only
		withoutRepoArgs bool
		offLink         bool // the call came on an agentctl link that does not carry the session
	}
	columns := []column{
		{name: "not on link (the right session, on another agentctl's link)", session: f.session.ID, task: f.task.ID,
			code: toolapi.CodeSessionNotOnLink, offLink: true},
		{name: "other task (task_id of another task)", session: f.session.ID, task: otherTask.ID, code: toolapi.CodePermissionDenied},
		{name: "other task (session of another task)", session: otherSession.ID, task: f.task.ID, code: toolapi.CodePermissionDenied},
		{name: "no session", session: "sess_doesnotexist", task: f.task.ID, code: toolapi.CodeUnknownSession},
		{name: "no session (empty id)", session: "", task: f.task.ID, code: toolapi.CodeUnknownSession},
		{name: "revoked session (stopped)", session: stopped.ID, task: f.task.ID, code: toolapi.CodeSessionEnded},
		{name: "revoked session (failed)", session: failed.ID, task: f.task.ID, code: toolapi.CodeSessionEnded},
		{name: "provider not on task", code: toolapi.CodeProviderNotAttached, providerOnly: true, withoutRepoArgs: true},
	}

	requests := func() int { return len(f.gh.Requests()) + len(f.gl.Requests()) }
	refused, allowed := 0, 0
	for _, tool := range all {
		isProvider := builtins[tool].task == nil
		for _, col := range columns {
			if col.providerOnly && !isProvider {
				continue // a task tool needs no provider: nothing to refuse
			}
			session, task := col.session, col.task
			args := right[tool]()
			if col.name == "provider not on task" {
				// The session of a task that lacks the tool's provider.
				session, task = ghOnlySession.ID, ghOnly.ID
				if builtins[tool].provider.provider == "github" {
					session, task = glOnlySession.ID, glOnly.ID
				}
			}
			if col.withoutRepoArgs {
				delete(args, "repository_id")
			}
			b, err := json.Marshal(args)
			require.NoError(t, err)
			before := requests()
			var res Result
			if col.offLink {
				res = f.callOffLink(session, task, tool, b, otherSession.ID)
			} else {
				res = f.callAs(session, task, tool, b)
			}
			assert.True(t, res.IsError, "%s × %s was allowed: %s", tool, col.name, res.Text)
			assert.Equal(t, col.code, res.Code, "%s × %s: %s", tool, col.name, res.Text)
			assert.Equal(t, before, requests(), "%s × %s reached a provider", tool, col.name)
			refused++
		}
	}
	assert.Empty(t, f.gh.Requests(), "no refused call reached GitHub")
	assert.Empty(t, f.gl.Requests(), "no refused call reached GitLab")

	// The right task: allowed and answered, in an order where each tool
	// has what it needs (a change request before its status).
	// The table's order: task tools, GitHub's, then GitLab's.
	var order []string
	// The tools that must call the provider's API to answer: the table
	// says they can be refused with its answers.
	callsAPI := map[string]bool{}
	for _, tool := range toolapi.Tools() {
		order = append(order, tool.Name)
		callsAPI[tool.Name] = slices.Contains(tool.Codes, toolapi.CodeProviderUnauthorized)
	}
	require.ElementsMatch(t, all, order)
	for _, tool := range order {
		switch tool {
		case toolapi.GitHubPRReply:
			thread[f.github.ID] = strconv.FormatInt(f.gh.AddComment("acme/api", 1, "alice", "nit", "login.go", 3), 10)
		case toolapi.GitLabMRReply:
			thread[f.gitlab.ID] = f.gl.AddDiscussion("acme/web", 1, "frank", "nit", "login.go", 3)
		}
		b, err := json.Marshal(right[tool]())
		require.NoError(t, err)
		before := requests()
		res := f.callAs(f.session.ID, f.task.ID, tool, b)
		if assert.False(t, res.IsError, "%s × right task was refused: %s %s", tool, res.Code, res.Text) {
			allowed++
		}
		assert.NotEmpty(t, res.Text, "%s answered", tool)
		assert.NotNil(t, res.Structured, "%s answered with a structured result", tool)
		if callsAPI[tool] {
			assert.Greater(t, requests(), before, "%s was answered by the provider", tool)
		}
	}
	task, err := f.st.GetTask(ctx, f.task.ID)
	require.NoError(t, err)
	assert.Len(t, task.Repositories, 3, "task_add_sources attached the repository")
	clone, err := forge.CloneOf(f.gh.URL, "acme/api")
	require.NoError(t, err)
	assert.Equal(t, []delivery{{f.session.ID, clone.Key, executors.GitCredential{User: "x-access-token", Token: githubToken}}}, delivered,
		"only the right task's push reached agentctl, for the session's own checkout, with the connection's credential")

	// The mode column: a plan session of the same task, driven directly
	// with forged calls as a buggy agentctl would send them (agentctl
	// shows it only read-only tools). The orchestrator itself refuses
	// every tool that writes, from toolapi's table, before any provider
	// request, and answers every read-only one.
	plan, err := f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModePlan,
		State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude"}})
	require.NoError(t, err)
	planRefused, planAllowed := 0, 0
	for _, tool := range order {
		b, err := json.Marshal(right[tool]())
		require.NoError(t, err)
		before := requests()
		res := f.callAs(plan.ID, f.task.ID, tool, b)
		if toolapi.ReadOnly(tool) {
			if assert.False(t, res.IsError, "%s × plan mode (read-only tool) was refused: %s %s", tool, res.Code, res.Text) {
				planAllowed++
			}
			continue
		}
		assert.True(t, res.IsError, "%s × plan mode was allowed: %s", tool, res.Text)
		assert.Equal(t, toolapi.CodeReadOnlySession, res.Code, "%s × plan mode: %s", tool, res.Text)
		assert.Equal(t, before, requests(), "%s × plan mode reached a provider", tool)
		planRefused++
	}
	assert.Equal(t, len(toolapi.ReadOnlyTools()), planAllowed, "plan mode answers exactly toolapi's read-only tools")

	testutil.Figure(t, "authz matrix", "%d tools × %d cases (right task; not on the call's link; other task's task_id or session; "+
		"unknown or empty session; stopped or failed session; provider not on task, for the %d provider tools only; plan mode): "+
		"%d allowed and answered, %d refused with their codes, 0 refused calls reached a provider; "+
		"plan mode: %d write tools refused read_only_session by the orchestrator, %d read-only tools answered",
		len(all), 2+len(columns), len(toolapi.Surface("github", "gitlab"))-len(toolapi.Surface()), allowed+planAllowed, refused+planRefused, planRefused, planAllowed)
}
