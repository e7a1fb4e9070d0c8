package daemon_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
)

func (h *harness) apply(t testing.TB, id string, sf *agentctlv1.Surface) *agentctlv1.ApplySurfaceResponse {
	t.Helper()
	resp, err := h.client.ApplySurface(context.Background(), &agentctlv1.ApplySurfaceRequest{SessionId: id, Surface: sf})
	require.NoError(t, err)
	return resp
}

// TestApplySurfaceChangesBothPartsWithOneNotification: one surface that
// changes the provider set and the external tools is one rebuild and one
// list_changed; each part has its one stale check, an absent part is
// kept, and the mode is the launch's.
func TestApplySurfaceChangesBothPartsWithOneNotification(t *testing.T) {
	t.Parallel()
	for _, version := range mcptest.ProtocolVersions {
		t.Run(mcptest.VersionName(version), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
			sp.ExternalTools = extSet(1, docsSearch)
			st := h.create(t, sp)
			c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			github, both := toolapi.Surface("github"), toolapi.Surface("github", "gitlab")
			assert.Equal(t, withTools(github, "docs__search"), c.Names(t))
			gen := uint64(1)
			toggle := []string{"github", "gitlab"}
			c.Subscribe(t, func() {
				gen++
				h.push(t, "s1", gen, toggle[gen%2])
			})
			gen++

			resp := h.apply(t, "s1", &agentctlv1.Surface{Mode: agentctlv1.SessionMode_SESSION_MODE_TASK,
				ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github", "gitlab"}, Generation: gen}, ExternalTools: extSet(2, docsSearch, ticketsCreate)})
			assert.True(t, resp.GetAccepted())
			assert.True(t, resp.GetToolsChanged())
			assert.Equal(t, gen, resp.GetAppliedProviderSet().GetGeneration())
			assert.Equal(t, uint64(2), resp.GetAppliedExternalToolsGeneration())
			changedOnce(t, c, "both parts changed in one push")
			assert.Equal(t, withTools(both, "docs__search", "tickets__create"), c.Names(t))

			// A stale provider part is ignored while a newer external part
			// applies; the answer says the push was not wholly accepted.
			resp = h.apply(t, "s1", &agentctlv1.Surface{
				ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: gen - 1}, ExternalTools: extSet(3, docsSearch)})
			assert.False(t, resp.GetAccepted(), "the provider part was stale")
			assert.True(t, resp.GetToolsChanged())
			assert.Equal(t, []string{"github", "gitlab"}, resp.GetAppliedProviderSet().GetProviders())
			assert.Equal(t, uint64(3), resp.GetAppliedExternalToolsGeneration())
			changedOnce(t, c, "tickets__create disappeared")
			assert.Equal(t, withTools(both, "docs__search"), c.Names(t))

			// An absent part is kept; an identical surface changes nothing.
			resp = h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"gitlab", "github"}, Generation: gen}})
			assert.True(t, resp.GetAccepted())
			assert.False(t, resp.GetToolsChanged())
			assert.Equal(t, uint64(3), resp.GetAppliedExternalToolsGeneration(), "the external part is kept")
			c.ExpectNone(t, "an identical surface must not notify")

			_, err := h.client.ApplySurface(context.Background(), &agentctlv1.ApplySurfaceRequest{SessionId: "s1",
				Surface: &agentctlv1.Surface{Mode: agentctlv1.SessionMode_SESSION_MODE_PLAN}})
			require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "the mode is fixed at launch")
			assert.ErrorContains(t, err, "surface.mode")
			_, err = h.client.ApplySurface(context.Background(), &agentctlv1.ApplySurfaceRequest{SessionId: "s1",
				Surface: &agentctlv1.Surface{ExternalTools: extSet(9, extTool("bad name", true, openSchema))}})
			require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "an invalid external part is refused whole")
			assert.ErrorContains(t, err, "surface.external_tools.tools[0]")
			state := h.state(t, "s1")
			assert.Equal(t, uint64(3), state.GetExternalToolsGeneration(), "a refused surface changes nothing")
			assert.Equal(t, agentctlv1.SessionMode_SESSION_MODE_TASK, state.GetMode())
		})
	}
}
