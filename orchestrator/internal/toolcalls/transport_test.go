package toolcalls

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestTaskInfoOmitsColocatedOnlyFieldsWhenHosted: the calling session's
// transport decides task_info's fields. A colocated session reads a local
// repository's directory as local_path; a hosted session's result names
// no directory of the orchestrator's machine (no local_path, no file:
// remote), and validates against the hosted output schema, which has no
// such field (issue 19).
func TestTaskInfoOmitsColocatedOnlyFieldsWhenHosted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	local, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "local", Path: "/srv/checkouts/app",
		RemoteURL: "file:///srv/mirrors/app.git"})
	require.NoError(t, err)
	task, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "local and github"}, local.ID)
	require.NoError(t, err)
	task, err = f.st.AddSources(ctx, task.ID, []string{f.task.Repositories[0].ID}, model.Actor{})
	require.NoError(t, err)

	call := func(executor string) (toolapi.TaskInfo, Result) {
		sess, err := f.st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: executor, Mode: model.ModeTask, State: model.SessionRunning})
		require.NoError(t, err)
		r := f.callAs(sess.ID, task.ID, toolapi.TaskInfoTool, nil)
		return structured[toolapi.TaskInfo](t, r), r
	}
	byID := func(info toolapi.TaskInfo) map[string]toolapi.Repository {
		m := map[string]toolapi.Repository{}
		for _, r := range info.Repositories {
			m[r.ID] = r
		}
		return m
	}
	github := f.task.Repositories[0]

	for _, executor := range []string{"local", "docker", "remote"} {
		info, r := call(executor)
		repos := byID(info)
		assert.Equal(t, "/srv/checkouts/app", repos[local.ID].LocalPath, "%s: a colocated session reads the directory", executor)
		assert.Empty(t, repos[local.ID].Path, "%s: path is the provider's, and a local repository has none", executor)
		assert.Equal(t, "file:///srv/mirrors/app.git", repos[local.ID].RemoteURL)
		assert.Equal(t, github.Path, repos[github.ID].Path)
		assert.Contains(t, r.Text, "/srv/checkouts/app")
	}

	info, r := call(model.ExecutorHosted)
	repos := byID(info)
	assert.Equal(t, toolapi.Repository{ID: local.ID, Provider: "local", Primary: true}, repos[local.ID])
	assert.Equal(t, github.Path, repos[github.ID].Path, "a provider's path is kept")
	raw, err := json.Marshal(r.Structured)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "/srv/", "no directory of the orchestrator's machine")
	assert.NotContains(t, string(raw), "local_path")
	assert.NotContains(t, r.Text, "/srv/")

	tool, _ := toolapi.Lookup(toolapi.TaskInfoTool)
	_, out := tool.Schemas(toolapi.TransportHosted)
	var schema jsonschema.Schema
	require.NoError(t, json.Unmarshal(out, &schema))
	resolved, err := schema.Resolve(nil)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.NoError(t, resolved.Validate(doc), "the hosted result fits the hosted schema")
}
