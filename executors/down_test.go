package executors_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

// TestDownFrom: stopped on request wins over gone; gone is lost with the
// cause its exit was ended with (the first: a process reaped and a
// watcher that saw it disappear may both end it); neither is "" (agentctl
// may answer).
func TestDownFrom(t *testing.T) {
	var stopped bool
	exit := executors.NewExit()
	down := executors.DownFrom(func() bool { return stopped }, exit)

	phase, why := down()
	assert.Equal(t, executors.Phase(""), phase)
	assert.Empty(t, why)
	assert.Empty(t, exit.Cause(), "no cause before the end")

	assert.True(t, exit.End("agentctl (pid 7) exited: signal: killed"))
	assert.False(t, exit.End("agentctl (pid 7) is gone"), "only the first end counts")
	select {
	case <-exit.Done():
	default:
		t.Fatal("Done is not closed after End")
	}
	phase, why = down()
	assert.Equal(t, executors.PhaseLost, phase)
	assert.Equal(t, "agentctl (pid 7) exited: signal: killed", why)

	stopped = true
	phase, why = down()
	assert.Equal(t, executors.PhaseStopped, phase)
	assert.Empty(t, why)
}
