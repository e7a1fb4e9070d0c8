package agentuid_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/testutil"
)

// TestReachesAgreesWithTheKernel: for files and directories of every mode
// that matters, Reaches says what a process under that uid then meets
// (cat and test -x run as the uid), and names the component that stops
// it.
func TestReachesAgreesWithTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a probe under another uid")
	}
	const uid = 1_700_000_123
	root := testutil.TraversableDir(t)
	cases := []struct {
		name            string
		dirMode, mode   os.FileMode
		owner           int // the file's and the directory's owner: 0 or uid
		want            agentuid.Access
		reaches         bool
		stoppedAtTheDir bool
	}{
		{"readable", 0o755, 0o644, 0, agentuid.Read, true, false},
		{"private file", 0o755, 0o600, 0, agentuid.Read, false, false},
		{"its own private file", 0o700, 0o600, uid, agentuid.Read, true, false},
		{"directory it may not enter", 0o700, 0o644, 0, agentuid.Read, false, true},
		{"searchable, not listable", 0o711, 0o644, 0, agentuid.Read, true, false},
		{"program", 0o755, 0o755, 0, agentuid.Run, true, false},
		{"program for its owner only", 0o755, 0o700, 0, agentuid.Run, false, false},
		{"program in a private directory", 0o700, 0o755, 0, agentuid.Run, false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, strconv.Itoa(i))
			require.NoError(t, os.Mkdir(dir, c.dirMode))
			require.NoError(t, os.Chmod(dir, c.dirMode))
			file := filepath.Join(dir, "f")
			require.NoError(t, os.WriteFile(file, []byte("#!/bin/sh\n"), c.mode))
			require.NoError(t, os.Chmod(file, c.mode))
			require.NoError(t, os.Chown(dir, c.owner, c.owner))
			require.NoError(t, os.Chown(file, c.owner, c.owner))

			err := agentuid.Reaches(uid, file, c.want)
			probe := exec.Command("/bin/sh", "-c", `test -r "$1"`, "sh", file)
			if c.want == agentuid.Run {
				probe = exec.Command("/bin/sh", "-c", `test -x "$1"`, "sh", file)
			}
			probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
			kernel := probe.Run() == nil
			assert.Equal(t, kernel, err == nil, "Reaches agrees with the kernel (%v)", err)
			assert.Equal(t, c.reaches, err == nil, "%v", err)
			if c.stoppedAtTheDir {
				assert.ErrorContains(t, err, "may not enter "+dir+" ")
			} else if !c.reaches {
				assert.ErrorContains(t, err, file)
			}
		})
	}
	_, err := os.Stat(filepath.Join(root, "missing"))
	require.Error(t, err)
	assert.Error(t, agentuid.Reaches(uid, filepath.Join(root, "missing"), agentuid.Read), "a path that does not exist is not reached")
}
