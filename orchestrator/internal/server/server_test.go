package server_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

// TestTheServersLogIsScrubbed: the server wraps whatever logger it is
// given in the scrubber. Its data directory's path holds a token-shaped
// name, and every line that names the database shows it redacted.
func TestTheServersLogIsScrubbed(t *testing.T) {
	t.Parallel()
	const token = "ghp_DataDirNamedLikeAToken0123456789"
	logs := &testutil.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), token)
	// No session is launched: any existing file will do as agentctl.
	self, err := os.Executable()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Listen: "127.0.0.1:0", DataDir: dataDir, Agentctl: self,
			Logger: slog.New(slog.NewTextHandler(logs, nil))}, func(server.Ready) { cancel() })
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the server did not start and stop")
	}
	out := logs.String()
	assert.Contains(t, out, "toolscope serving")
	assert.Contains(t, out, "ghp_[redacted]")
	assert.NotContains(t, out, token[4:4+12])
	for _, line := range strings.Split(out, "\n") {
		assert.NotContains(t, line, token)
	}
}
