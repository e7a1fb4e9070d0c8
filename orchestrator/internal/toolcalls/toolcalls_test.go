package toolcalls

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

const secretValue = "ghp_THISISTHESECRETVALUE0123456789"

type fixture struct {
	d       *Dispatcher
	st      *store.Store
	ws      model.Workspace
	task    model.Task
	session model.Session
	gitlab  model.Repository
	env     map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{st: st, env: map[string]string{}}
	f.d = New(st, nil)
	f.d.env = func(k string) (string, bool) { v, ok := f.env[k]; return v, ok }

	f.ws, err = st.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	_, err = st.SetConnection(ctx, f.ws.ID, model.Connection{Provider: providers.GitHub, APIBaseURL: "https://api.github.com",
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}, Username: "octo-bot"})
	require.NoError(t, err)
	gh, err := st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	f.gitlab, err = st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"})
	require.NoError(t, err)
	f.task, err = st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "fix login"}, gh.ID)
	require.NoError(t, err)
	f.session, err = st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude", "--print"}})
	require.NoError(t, err)
	return f
}

func (f *fixture) call(tool string, args string) Result {
	return f.d.Handle(context.Background(), Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: tool, Arguments: json.RawMessage(args)})
}

// TestEveryCallIsAuthorized walks the checks in order: each refusal has
// its stable code, whatever tools the agent was shown.
func TestEveryCallIsAuthorized(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	res := f.d.Handle(ctx, Call{SessionID: "sess_nope", TaskID: f.task.ID, Tool: "task_info"})
	assert.Equal(t, CodeUnknownSession, res.Code)
	res = f.d.Handle(ctx, Call{SessionID: f.session.ID, TaskID: "task_other", Tool: "task_info"})
	assert.Equal(t, CodePermissionDenied, res.Code, "a call may not claim another task")
	assert.Equal(t, CodeUnknownTool, f.call("delete_everything", `{}`).Code)
	assert.Equal(t, CodeInvalidArguments, f.call("task_info", `[1]`).Code)
	assert.Equal(t, CodeInvalidArguments, f.call("task_info", `{"a":`).Code)

	// The agent was never shown gitlab tools, but may call one anyway.
	res = f.call("gitlab_mr_status", `{}`)
	assert.Equal(t, CodeProviderNotAttached, res.Code)
	assert.Contains(t, res.Text, "its providers: github")

	res = f.call("github_pr_status", `{}`)
	assert.Equal(t, CodeCredentialUnavailable, res.Code)
	assert.Contains(t, res.Text, "GH_TOKEN", "the reference is named")
	f.env["GH_TOKEN"] = secretValue
	res = f.call("github_pr_status", `{}`)
	assert.Equal(t, CodeNotAvailable, res.Code, "all checks pass; this build has no PR handler yet")
	assert.NotContains(t, res.Text, secretValue)

	_, err := f.st.AddSources(ctx, f.task.ID, []string{f.gitlab.ID})
	require.NoError(t, err)
	res = f.call("gitlab_mr_status", `{}`)
	assert.Equal(t, CodeNotConnected, res.Code, "attached but the workspace has no gitlab connection")

	file := filepath.Join(t.TempDir(), "gitlab-token")
	_, err = f.st.SetConnection(ctx, f.ws.ID, model.Connection{Provider: providers.GitLab, APIBaseURL: "https://gitlab.com/api/v4",
		Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: file}})
	require.NoError(t, err)
	assert.Equal(t, CodeCredentialUnavailable, f.call("gitlab_mr_status", `{}`).Code, "the file does not exist")
	require.NoError(t, os.WriteFile(file, []byte("glpat-secret\n"), 0o600))
	assert.Equal(t, CodeNotAvailable, f.call("gitlab_mr_status", `{}`).Code)

	_, err = f.st.UpdateSession(ctx, f.session.ID, func(s *model.Session) ([]model.Event, error) {
		s.State = model.SessionStopped
		return nil, nil
	})
	require.NoError(t, err)
	assert.Equal(t, CodeSessionEnded, f.call("task_info", `{}`).Code)
}

func TestTaskAndSessionInfo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.env["GH_TOKEN"] = secretValue

	res := f.call("task_info", ``)
	require.False(t, res.IsError, res.Text)
	info := res.Structured.(toolapi.TaskInfo)
	assert.Equal(t, f.task.ID, info.TaskID)
	assert.Equal(t, []string{"github"}, info.Providers)
	require.Len(t, info.Repositories, 1)
	assert.Equal(t, "acme/api", info.Repositories[0].Path)
	assert.True(t, info.Repositories[0].Primary)
	assert.Contains(t, res.Text, "Providers: github")

	res = f.call("session_info", `{}`)
	require.False(t, res.IsError, res.Text)
	si := res.Structured.(toolapi.SessionInfo)
	assert.Equal(t, "claude", si.Agent)
	assert.Equal(t, "task", si.Mode)
	assert.Equal(t, []toolapi.Account{{Provider: "github", Username: "octo-bot"}}, si.Accounts)
	b, err := json.Marshal(si)
	require.NoError(t, err)
	assert.NotContains(t, string(b), secretValue)
	assert.NotContains(t, string(b), "GH_TOKEN", "not even the reference")
}
