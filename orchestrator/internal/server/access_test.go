package server

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/access"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
)

// TestEveryMethodHasARole walks every method of every service the server
// registers: each is in the access table (or open: health checking), and
// the table names no method the server does not serve.
func TestEveryMethodHasARole(t *testing.T) {
	methods := Methods()
	require.NotEmpty(t, methods)
	served := map[string]bool{}
	open := 0
	for _, m := range methods {
		served[m.Name] = true
		_, inTable := access.Table[m.Name]
		if access.Open[m.Name] {
			open++
			assert.False(t, inTable, "%s is both open and in the table", m.Name)
			continue
		}
		assert.True(t, inTable, "%s has no role in access.Table: nobody could call it (fail-closed); add it", m.Name)
	}
	for name := range access.Table {
		assert.True(t, served[name], "access.Table names %s, which the server does not serve", name)
	}
	for name := range access.Open {
		assert.True(t, served[name], "access.Open names %s, which the server does not serve", name)
	}
	assert.Equal(t, 3, open, "only health checking is open")
	testutil.Figure(t, "api access: methods with a role", "%d of %d registered methods in the role table, %d open (health)", len(methods)-open, len(methods), open)
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		listen string
		ok     bool
	}{
		{"", true}, {"127.0.0.1:0", true}, {"[::1]:7733", true}, {"localhost:7733", true},
		{"0.0.0.0:0", false}, {":7733", false}, {"[::]:0", false}, {"192.168.1.5:7733", false}, {"example.com:7733", false},
		{"nonsense", false},
	} {
		_, err := checkListen(Config{Listen: c.listen})
		if c.ok {
			assert.NoError(t, err, c.listen)
		} else if assert.Error(t, err, c.listen) {
			assert.Contains(t, err.Error(), c.listen)
		}
	}
}

// TestSocketIsReplacedOnlyWhenStale: a socket left by a crash is replaced;
// a live one (another orchestrator on the same data directory) is an
// error, and so is a file that is not a socket.
func TestSocketIsReplacedOnlyWhenStale(t *testing.T) {
	dir := t.TempDir()
	path := paths.Socket(dir)
	stale, err := net.Listen("unix", path)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())

	live, err := listenSocket(path)
	require.NoError(t, err, "a stale socket is replaced")
	info, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	_, err = listenSocket(path)
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), fmt.Sprintf("another orchestrator (pid %d) serves on %s", os.Getpid(), path), "the holder is named by its pid")
	require.NoError(t, live.Close())
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "closing the listener removes the socket")

	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	_, err = listenSocket(path)
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "is not a socket")

	_, err = listenSocket("/" + strings.Repeat("d", 120) + "/toolscope.sock")
	assert.Equal(t, "data_dir", errdefs.FieldOf(err))
}
