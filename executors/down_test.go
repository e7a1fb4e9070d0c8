package executors_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

// TestDownFrom: stopped on request wins over gone; gone is lost with its
// cause, which is not asked before (a backend sets it just before it
// marks the session gone); neither is "" (agentctl may answer).
func TestDownFrom(t *testing.T) {
	var stopped, gone bool
	asked := 0
	down := executors.DownFrom(func() bool { return stopped }, func() bool { return gone },
		func() string { asked++; return "agentctl (pid 7) exited: signal: killed" })

	phase, why := down()
	assert.Equal(t, executors.Phase(""), phase)
	assert.Empty(t, why)
	assert.Zero(t, asked, "the cause is not read before the session is gone")

	gone = true
	phase, why = down()
	assert.Equal(t, executors.PhaseLost, phase)
	assert.Equal(t, "agentctl (pid 7) exited: signal: killed", why)

	stopped = true
	phase, why = down()
	assert.Equal(t, executors.PhaseStopped, phase)
	assert.Empty(t, why)
}
