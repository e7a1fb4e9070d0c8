package procs

import (
	"os/exec"
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
	}, 10*time.Second, time.Millisecond, "the killed child is a zombie until reaped")
	assert.NoError(t, syscall.Kill(pid, 0), "signal 0 is fooled by the zombie")
	assert.False(t, Alive(pid), "a zombie is not alive")

	_ = cmd.Wait()
	assert.False(t, Alive(pid), "a reaped process is not alive")
	assert.False(t, Alive(0))
	assert.False(t, Alive(-1))
	assert.True(t, Alive(syscall.Getpid()))
}
