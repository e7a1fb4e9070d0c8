package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnectionSettings checks the settings every connection must run
// with: WAL, foreign keys, a busy timeout, one writer, read-only readers.
func TestConnectionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	var mode string
	require.NoError(t, s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)
	for name, db := range map[string]queryer{"writer": s.w, "reader": s.r} {
		var fk, timeout int
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk), name)
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout), name)
		assert.Equal(t, 1, fk, name)
		assert.Equal(t, 5000, timeout, name)
	}
	assert.Equal(t, 1, s.w.Stats().MaxOpenConnections)
	_, err = s.r.ExecContext(ctx, `INSERT INTO workspaces (id, name, created_at) VALUES ('ws_x', 'x', '')`)
	assert.Error(t, err, "readers must not write")
}
