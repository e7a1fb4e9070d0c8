package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// TestBatchLimitIsAClearError: a batch of MaxBatch repositories is
// attached; one more is refused before anything is read or written, with
// an error that names the field and the limit.
func TestBatchLimitIsAClearError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	var ids []string
	for i := range service.MaxBatch + 1 {
		r, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab", Host: "gitlab.com",
			Path: fmt.Sprintf("acme/r%d", i)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}

	_, err := w.svc.AddSources(ctx, w.task.ID, ids)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "repository_ids", errdefs.FieldOf(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("%d repositories in one batch; the limit is %d", service.MaxBatch+1, service.MaxBatch))
	task, err := w.svc.GetTask(ctx, w.task.ID)
	require.NoError(t, err)
	assert.Len(t, task.Repositories, 1, "the refused batch attached nothing")

	res, err := w.svc.AddSources(ctx, w.task.ID, ids[:service.MaxBatch])
	require.NoError(t, err)
	assert.Len(t, res.Task.Repositories, 1+service.MaxBatch)
	testutil.Figure(t, "limit: batch size", "a batch of %d attached in one generation; %d refused as invalid repository_ids, nothing attached", service.MaxBatch, service.MaxBatch+1)
}

// TestFreeTextIsBounded: each free-text field a person types is refused
// over its limit or with a control character, with an error naming the
// field and the limit, and nothing is stored. Three descriptions of 1.3
// MB each (together over gRPC's 4 MiB reply) once made the workspace's
// task list unreadable for good.
func TestFreeTextIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	huge := strings.Repeat("d", 1<<20+300_000)
	for range 3 {
		_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "big", Description: huge, RepositoryID: w.github.ID})
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Equal(t, "description", errdefs.FieldOf(err))
		assert.ErrorContains(t, err, fmt.Sprintf("is %d bytes long; the limit is %d bytes", len(huge), textlimit.Text.Max))
	}
	for _, c := range []struct {
		field string
		call  func() error
	}{
		{"title", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "fix \x1b[2Jlogin", RepositoryID: w.github.ID})
			return err
		}},
		{"title", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: strings.Repeat("t", textlimit.Title.Max+1), RepositoryID: w.github.ID})
			return err
		}},
		{"description", func() error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "t", Description: "a\x00b", RepositoryID: w.github.ID})
			return err
		}},
		{"name", func() error { _, err := w.svc.CreateWorkspace(ctx, "tab\tname"); return err }},
		{"path", func() error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local",
				Path: "/" + strings.Repeat("p", textlimit.Path.Max)})
			return err
		}},
	} {
		err := c.call()
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
	}
	tasks, err := w.svc.ListTasks(ctx, w.ws.ID)
	require.NoError(t, err)
	assert.Len(t, tasks, 1, "no refused task was stored")

	atLimit := strings.Repeat("d", textlimit.Text.Max-1) + "\n"
	_, err = w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "at the limit", Description: atLimit, RepositoryID: w.github.ID})
	require.NoError(t, err)
	testutil.Figure(t, "limit: free text", "3 descriptions of %d bytes refused as invalid description (limit %d bytes); one of %d stored",
		len(huge), textlimit.Text.Max, textlimit.Text.Max)
}

// TestAgentArgumentsAreBounded: a launch's agent arguments are free text
// stored with the session and listed with it: each is bounded and holds no
// control character but line feeds, carriage returns and tabs, and all of
// them together are bounded too. Checked before anything is recorded (a
// dry run checks the same).
func TestAgentArgumentsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	half := strings.Repeat("p", textlimit.Text.Max/2+1)
	for _, c := range []struct {
		argv  []string
		field string
		want  string
	}{
		{[]string{"sh", "-c", "echo \x1b[2J"}, "agent.argv[2]", "control character (U+001B)"},
		{[]string{"sh", "-c", "a\x00b"}, "agent.argv[2]", "control character (U+0000)"},
		{[]string{"claude", "-p", half, half}, "agent.argv", fmt.Sprintf("the limit is %d", textlimit.Text.Max)},
	} {
		_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: c.argv})
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
		assert.ErrorContains(t, err, c.want)
	}
	_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{"claude", "-p", "line one\n\tline two"}})
	require.NoError(t, err)
}

// TestEveryFreeTextIsBoundedInBytes: each free-text field a listing
// carries is bounded in bytes (UTF-8), not characters, and refused over
// its bound naming the field and the limit in bytes: 4-byte characters
// once carried four times the bytes a bound meant (17 descriptions of
// 65,536 '𝕏' made a 4.46 MB task listing); and the fields that had no
// bound at all (a repository's provider, host and clone URL, a
// connection's API URL and credential file, a launch's image, working
// directory, model and variable names) are bounded too.
func TestEveryFreeTextIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	const wide = "𝕏" // U+1D54F: 4 bytes
	over := func(k textlimit.Kind) string { return strings.Repeat(wide, k.Max/len(wide)+1) }
	atLimit := func(k textlimit.Kind) string { return strings.Repeat(wide, k.Max/len(wide)) }
	env := model.CredentialRef{Kind: model.CredentialEnv, Ref: "T"}
	for _, c := range []struct {
		field string
		kind  textlimit.Kind
		call  func(string) error
	}{
		{"title", textlimit.Title, func(v string) error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: v, RepositoryID: w.github.ID})
			return err
		}},
		{"description", textlimit.Text, func(v string) error {
			_, err := w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "t", Description: v, RepositoryID: w.github.ID})
			return err
		}},
		{"name", textlimit.Name, func(v string) error { _, err := w.svc.CreateWorkspace(ctx, v); return err }},
		{"provider", textlimit.Name, func(v string) error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: v, Path: "/src/" + v[:8]})
			return err
		}},
		{"path", textlimit.Path, func(v string) error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/" + v[4:]})
			return err
		}},
		{"remote_url", textlimit.URL, func(v string) error {
			_, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/" + v[:12], RemoteURL: v})
			return err
		}},
		{"api_base_url", textlimit.URL, func(v string) error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github",
				APIBaseURL: "https://ghe.example/" + v[20:], Credential: env, SkipValidation: true})
			return err
		}},
		{"credential.file_path", textlimit.Path, func(v string) error {
			_, err := w.svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: w.ws.ID, Provider: "github",
				Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: "/" + v[4:]}, SkipValidation: true})
			return err
		}},
		{"image", textlimit.Path, func(v string) error {
			_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "docker", Image: v})
			return err
		}},
		{"agent.working_dir", textlimit.Path, func(v string) error {
			_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{"a"}, AgentWorkDir: v})
			return err
		}},
		{"agent.model", textlimit.Title, func(v string) error {
			_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentProfile: "claude-code", AgentModel: v, ModelUnchecked: true})
			return err
		}},
	} {
		err := c.call(over(c.kind))
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
		assert.ErrorContains(t, err, fmt.Sprintf("bytes long; the limit is %d bytes", c.kind.Max), c.field)
		if c.field != "provider" && c.field != "remote_url" && c.field != "api_base_url" && c.field != "credential.file_path" {
			// (Those are checked again by the rules of their kind:
			// a URL, a file, a unique repository.)
			err = c.call(atLimit(c.kind))
			assert.NotEqual(t, c.field, errdefs.FieldOf(err), "%s at its limit in bytes passes its bound: %v", c.field, err)
		}
	}

	long := strings.Repeat("n", textlimit.Title.Max+1)
	for _, in := range []service.SessionInput{
		{TaskID: w.task.ID, Executor: "local", AgentProfile: "claude-code", AgentCredentialEnv: long},
		{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{"a"}, AgentPassEnv: []string{"OK", long}},
	} {
		_, err := w.svc.DryRun(ctx, in)
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Contains(t, []string{"agent.credential_env", "agent.pass_env[1]"}, errdefs.FieldOf(err), "%v", err)
		assert.ErrorContains(t, err, fmt.Sprintf("the limit is %d bytes", textlimit.Title.Max))
	}

	quarter := strings.Repeat(wide, textlimit.Text.Max/4/len(wide))
	_, err := w.svc.DryRun(ctx, service.SessionInput{TaskID: w.task.ID, Executor: "local", AgentArgv: []string{quarter, quarter, quarter, quarter, "x"}})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "agent.argv", errdefs.FieldOf(err))
	assert.ErrorContains(t, err, fmt.Sprintf("is %d bytes in all; the limit is %d bytes", textlimit.Text.Max+1, textlimit.Text.Max))
}

// TestTaskRepositoriesAreBounded: a task holds at most
// store.MaxTaskRepositories repositories, whoever attaches them; a
// batch that would pass the bound is refused whole, naming
// repository_ids, the count and the limit. A task is listed with every
// repository it has, so this bounds its bytes in a listing.
func TestTaskRepositoriesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	var ids []string
	for i := range store.MaxTaskRepositories {
		r, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "gitlab", Host: "gitlab.com",
			Path: fmt.Sprintf("acme/r%d", i)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	// The task has its primary repository: room for MaxTaskRepositories-1.
	_, err := w.svc.AddSources(ctx, w.task.ID, ids[:service.MaxBatch])
	require.NoError(t, err)
	_, err = w.svc.AddSources(ctx, w.task.ID, ids[service.MaxBatch:])
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.Equal(t, "repository_ids", errdefs.FieldOf(err))
	assert.ErrorContains(t, err, fmt.Sprintf("has %d repositories; %d more would make %d, and the limit is %d",
		1+service.MaxBatch, store.MaxTaskRepositories-service.MaxBatch, store.MaxTaskRepositories+1, store.MaxTaskRepositories))
	res, err := w.svc.AddSources(ctx, w.task.ID, ids[service.MaxBatch:len(ids)-1])
	require.NoError(t, err)
	assert.Len(t, res.Task.Repositories, store.MaxTaskRepositories)
}
