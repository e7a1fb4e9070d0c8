package daemon_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
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
