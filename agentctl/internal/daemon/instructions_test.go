package daemon_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestInstructionsPointAtTheOrientation: the server instructions a client
// gets at initialize name the task and send it to task_info, whose
// orientation explains missing tools and failing calls (issue 19).
func TestInstructionsPointAtTheOrientation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("instr", agentctlv1.SessionMode_SESSION_MODE_PLAN, 1))
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "instr")), "")
	init := c.Session.InitializeResult()
	require.NotNil(t, init)
	for _, want := range []string{"task_instr", "task_info", "orientation", "plan mode", "workspace not connected", "what to do"} {
		assert.Contains(t, init.Instructions, want)
	}
}

// TestInstructionsFollowTheSurfaceAndOrientation: the instructions are
// built at each initialize from the session's surface as served and the
// orchestrator's orientation as of its last launch or push (issue 19). A
// connected client keeps those it read (MCP has no notification that they
// changed); a client that initializes after the change reads the new
// ones. Without an orientation from the orchestrator they state what the
// surface alone shows.
func TestInstructionsFollowTheSurfaceAndOrientation(t *testing.T) {
	t.Parallel()
	notConnected := &agentctlv1.Orientation{State: toolapi.OrientNotConnected, Provider: "github",
		Message: "The workspace is not connected to github: ask the operator to run 'toolscope workspace connect ws_1 --provider github'."}
	unresolved := &agentctlv1.Orientation{State: toolapi.OrientCredentialUnresolved, Provider: "gitlab",
		Message: "The workspace's gitlab credential does not resolve: ask the operator to fix the connection's credential reference."}
	for _, version := range mcptest.ProtocolVersions {
		t.Run(mcptest.VersionName(version), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
			sp.Orientation = &agentctlv1.OrientationSet{Entries: []*agentctlv1.Orientation{notConnected}}
			st := h.create(t, sp)
			first := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			before := first.Session.InitializeResult().Instructions
			for _, want := range []string{"task_s1", "task mode", "Review providers: github.", toolapi.GitHubPRCreate, notConnected.Message, "call task_info again"} {
				assert.Contains(t, before, want)
			}
			assert.NotContains(t, before, toolapi.GitLabMRCreate)
			assert.NotContains(t, before, "[no_repository]", "the orchestrator's orientation is the word once it sent one")

			h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github", "gitlab"}, Generation: 2},
				Orientation: &agentctlv1.OrientationSet{Entries: []*agentctlv1.Orientation{unresolved}}})
			first.WaitChanged(t)
			second := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			after := second.Session.InitializeResult().Instructions
			for _, want := range []string{"Review providers: github, gitlab.", toolapi.GitLabMRCreate, unresolved.Message} {
				assert.Contains(t, after, want)
			}
			assert.NotContains(t, after, notConnected.Message, "the push replaced the orientation")
			assert.Equal(t, before, first.Session.InitializeResult().Instructions, "a connected client keeps what it read")

			// A push without an orientation keeps the last one.
			h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"gitlab"}, Generation: 3}})
			first.WaitChanged(t)
			third := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			assert.Contains(t, third.Session.InitializeResult().Instructions, unresolved.Message)
			assert.NotContains(t, third.Session.InitializeResult().Instructions, toolapi.GitHubPRCreate)

			// No orientation from the orchestrator: what the surface shows.
			plain := h.create(t, spec("s2", agentctlv1.SessionMode_SESSION_MODE_PLAN, 1, "gitlab"))
			c := mcptest.Connect(t, mcptest.HTTP(plain.GetMcpUrl(), h.token(t, "s2")), version)
			got := c.Session.InitializeResult().Instructions
			assert.Contains(t, got, toolapi.NoRepository("github").Message)
			assert.Contains(t, got, toolapi.PlanMode(providers.Of("gitlab")).Message)
			assert.NotContains(t, got, toolapi.NoRepository("gitlab").Message)
		})
	}
}

// TestAgentctlServesTheColocatedSurface pins agentctl's transport (issue
// 32): it serves next to the agent's files, so task_info's schema has
// local_path and the instructions say where the tools are served. Switched
// to the hosted surface, both change and this test fails.
func TestAgentctlServesTheColocatedSurface(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("colo", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "colo")), "")
	assert.Contains(t, c.Session.InitializeResult().Instructions, "served next to your files")
	res, err := c.Session.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var schema []byte
	for _, tool := range res.Tools {
		if tool.Name == toolapi.TaskInfoTool {
			schema, err = json.Marshal(tool.OutputSchema)
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, schema, "task_info is listed")
	assert.Contains(t, string(schema), `"local_path"`, "the colocated task_info schema names the checkout's path")
}
