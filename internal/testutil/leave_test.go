package testutil

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(LeaveNothing(m)) }

// TestStartedFindsAnOrphan: a process whose parent exited (a session's
// agentctl after its server was killed) is still found as started by the
// test process, since LeaveNothing made it a child subreaper; and
// StopProcessesNaming ends it.
func TestStartedFindsAnOrphan(t *testing.T) {
	marker := "leave-nothing-" + strconv.Itoa(os.Getpid())
	// The outer sh starts a looping sh (named by marker) in the background
	// and exits at once: the looping sh is orphaned.
	require.NoError(t, exec.Command("sh", "-c", `sh -c 'while :; do sleep 1; done' "$0" &`, marker).Run())
	var orphan int
	require.Eventually(t, func() bool {
		ps, err := processes()
		require.NoError(t, err)
		for _, p := range started(ps, os.Getpid(), nil) {
			if strings.Contains(p.Args, marker) {
				orphan = p.PID
				assert.Equal(t, os.Getpid(), p.PPID, "reparented to the test process")
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the orphaned sh is found as started by the tests")
	assert.Len(t, ProcessesNaming(t, marker), 1)

	StopProcessesNaming(t, marker)
	assert.Empty(t, ProcessesNaming(t, marker), "ended")
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(orphan, &ws, 0, nil) // reap it: it is the test process's child now
}
