package procs

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAZombieIsNotAlive: a killed child that is not reaped yet is a
// zombie; signal 0 still succeeds on it, Alive does not.
func TestAZombieIsNotAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	assert.True(t, Alive(pid), "a running child")

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		s, err := State(pid)
		return err == nil && s == 'Z'
	}, 2*time.Minute, time.Millisecond, "the killed child is a zombie until reaped")
	assert.NoError(t, syscall.Kill(pid, 0), "signal 0 is fooled by the zombie")
	assert.False(t, Alive(pid), "a zombie is not alive")

	_ = cmd.Wait()
	assert.False(t, Alive(pid), "a reaped process is not alive")
	assert.False(t, Alive(0))
	assert.False(t, Alive(-1))
	assert.True(t, Alive(syscall.Getpid()))
}

// TestListHasThisProcess: List holds this process, with its parent and
// its command line.
func TestListHasThisProcess(t *testing.T) {
	ps, err := List()
	require.NoError(t, err)
	for _, p := range ps {
		if p.PID == os.Getpid() {
			assert.Equal(t, os.Getppid(), p.PPID)
			assert.Equal(t, strings.Join(os.Args, " "), p.Args)
			assert.NotEqual(t, byte('Z'), p.State)
			return
		}
	}
	t.Fatalf("this process (pid %d) is not in the list of %d", os.Getpid(), len(ps))
}
