package toolcalls

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// orientation calls task_info and returns its orientation by state and
// provider or tool, with the result text.
func (f *fixture) orientation(t *testing.T, session model.Session) (map[string]toolapi.Orientation, string) {
	t.Helper()
	r := f.callAs(session.ID, session.TaskID, toolapi.TaskInfoTool, nil)
	info := structured[toolapi.TaskInfo](t, r)
	out := map[string]toolapi.Orientation{}
	for _, o := range info.Orientation {
		out[o.State+":"+o.Provider+o.Tool] = o
		assert.Contains(t, r.Text, o.Message, "the text says it too")
	}
	return out, r.Text
}

// TestTaskInfoOrientation: task_info says, per state, why tools are not
// shown or cannot succeed, and what to do (issue 19); a task with
// everything in place says nothing of the kind.
func TestTaskInfoOrientation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	all, text := f.orientation(t, f.session)
	assert.Empty(t, all, "connected, credentials resolve, task mode: nothing to explain")
	assert.NotContains(t, text, "Why some tools")

	t.Run("no repository of the provider", func(t *testing.T) {
		local, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "local", Path: "/src/app"})
		require.NoError(t, err)
		task, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "local only"}, local.ID)
		require.NoError(t, err)
		sess, err := f.st.CreateSession(ctx, model.Session{TaskID: task.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionRunning})
		require.NoError(t, err)
		got, text := f.orientation(t, sess)
		require.Len(t, got, 2, text)
		for _, p := range []string{"github", "gitlab"} {
			o := got[toolapi.OrientNoRepository+":"+p]
			assert.Contains(t, o.Message, "task_add_sources", "says what to do")
			assert.Contains(t, o.Message, "no "+p+" repository")
		}
	})

	t.Run("plan mode", func(t *testing.T) {
		sess, err := f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModePlan, State: model.SessionRunning})
		require.NoError(t, err)
		got, _ := f.orientation(t, sess)
		o, ok := got[toolapi.OrientPlanMode+":"]
		require.True(t, ok)
		assert.Contains(t, o.Message, toolapi.GitHubPRCreate, "names a tool plan mode refuses")
		assert.NotContains(t, o.Message, toolapi.GitHubPRStatus, "not a read-only one")
		assert.Contains(t, o.Message, "task-mode session")
	})

	t.Run("credential does not resolve", func(t *testing.T) {
		// A second dispatcher over the same store, whose environment lacks
		// the GitLab token: the fixture's stays as it is.
		f2 := *f
		f2.env = map[string]string{"GH_TOKEN": githubToken}
		d := New(f.st, nil)
		d.conns = f2.connections(nil)
		r := d.Handle(ctx, Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: toolapi.TaskInfoTool, OnLink: true})
		f.results = append(f.results, r)
		info := structured[toolapi.TaskInfo](t, r)
		require.Len(t, info.Orientation, 1, r.Text)
		o := info.Orientation[0]
		assert.Equal(t, toolapi.OrientCredentialUnresolved, o.State)
		assert.Equal(t, "gitlab", o.Provider)
		assert.Contains(t, o.Message, "Ask the operator", "says what to do")
	})

	t.Run("workspace not connected", func(t *testing.T) {
		require.NoError(t, f.st.RemoveConnection(ctx, f.ws.ID, providers.GitLab))
		got, _ := f.orientation(t, f.session)
		o, ok := got[toolapi.OrientNotConnected+":gitlab"]
		require.True(t, ok, "%v", got)
		assert.Contains(t, o.Message, "toolscope workspace connect "+f.ws.ID+" --provider gitlab")
		assert.Len(t, got, 1, "GitHub is connected: nothing said of it")
	})

	t.Run("catalog tool disabled, unavailable, unassigned", func(t *testing.T) {
		pool := catalog.New(catalog.Options{Timeout: 10 * time.Second, WorkDir: t.TempDir()})
		t.Cleanup(func() { _ = pool.Close() })
		f.d.SetExternalCaller(pool)
		server, err := f.st.CreateMCPServer(ctx, model.MCPServer{Name: "kb", Transport: model.TransportHTTP,
			HTTP: &model.HTTPTransport{URL: "http://127.0.0.1:1/mcp"}})
		require.NoError(t, err)
		schema := json.RawMessage(`{"type":"object"}`)
		discover := func(names ...string) {
			var tools []model.DiscoveredTool
			for _, n := range names {
				tools = append(tools, model.DiscoveredTool{Name: n, InputSchema: schema, SchemaHash: n})
			}
			_, err := f.st.ApplyDiscovery(ctx, server.ID, tools, time.Now())
			require.NoError(t, err)
		}
		discover("lookup", "search", "secret")
		_, _, err = f.st.SetMCPServerEnabled(ctx, "kb", true)
		require.NoError(t, err)
		for _, n := range []string{"kb__lookup", "kb__search"} {
			_, _, err = f.st.AssignCatalogTool(ctx, n, f.ws.ID, true)
			require.NoError(t, err)
		}
		_, _, err = f.st.SetCatalogToolEnabled(ctx, "kb__search", true)
		require.NoError(t, err)
		discover("lookup", "secret") // search is no longer offered

		got, text := f.orientation(t, f.session)
		assert.Contains(t, got[toolapi.OrientCatalogToolDisabled+":kb__lookup"].Message, "Ask the operator to enable it")
		assert.Contains(t, got[toolapi.OrientCatalogToolUnavailable+":kb__search"].Message, "no longer offers it")
		assert.NotContains(t, text, "kb__secret", "an unassigned catalog tool is not named to the agent")
		r := f.call("kb__secret", map[string]any{})
		assert.Equal(t, string(model.BlockNotAssigned), r.Code, "a call of it is refused with its own orientation")
		assert.Contains(t, r.Text, "ask the operator to assign it")

		_, _, err = f.st.SetMCPServerEnabled(ctx, "kb", false)
		require.NoError(t, err)
		got, _ = f.orientation(t, f.session)
		assert.Contains(t, got[toolapi.OrientCatalogToolDisabled+":kb__lookup"].Message, `MCP server "kb" is disabled`)
	})
}
