package logdir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/logdir"
)

func TestPruneRemovesTheOldestStoppedSessionsLogsNeverALiveOnes(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(session string, size int, age time.Duration) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, session), 0o700))
		p := filepath.Join(dir, session, "agent.log")
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o600))
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
		require.NoError(t, os.Chtimes(filepath.Join(dir, session), now.Add(-age), now.Add(-age)))
	}
	write("ancient", 10, 40*24*time.Hour)
	write("old", 400, 3*time.Hour)
	write("older", 400, 4*time.Hour)
	write("recent", 400, time.Hour)
	write("live-old", 5000, 90*24*time.Hour)
	live := func(s string) bool { return s == "live-old" }

	removed, err := logdir.Prune(dir, logdir.Bound{MaxBytes: 1000, MaxAge: 30 * 24 * time.Hour}, now, live)
	require.NoError(t, err)
	assert.Equal(t, []string{"ancient", "older"}, removed, "past the age first, then the oldest until 800 bytes fit in 1000")
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"live-old", "old", "recent"}, names, "a live session's logs are kept, whatever their age and size")

	removed, err = logdir.Prune(dir, logdir.Bound{}, now, live)
	require.NoError(t, err)
	assert.Empty(t, removed, "no bound, nothing removed")
	removed, err = logdir.Prune(filepath.Join(dir, "none"), logdir.Bound{MaxBytes: 1}, now, live)
	require.NoError(t, err)
	assert.Empty(t, removed)
}
