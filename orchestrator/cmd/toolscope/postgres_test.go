package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// TestServeOnPostgres: `toolscope serve --database` keeps its records in
// PostgreSQL, not in the data directory: a server on another data
// directory and the same database finds them, and the password comes from
// its reference (the test cluster trusts local users, so any value works;
// a missing one is refused, TestCLIErrorsNameTheCauseAndSetTheExitCode).
func TestServeOnPostgres(t *testing.T) {
	dbURL := pgtest.Shared(t).NewDatabase(t)
	first := t.TempDir()
	require.NoError(t, os.Chmod(first, 0o700))
	srv := startServerEnv(t, first, []string{"PGPASS_TEST=unused"}, "--database", dbURL, "--database-password-env", "PGPASS_TEST")
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	srv.stop(t)
	_, err := os.Stat(filepath.Join(first, "toolscope.db"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no SQLite database beside the socket")

	second := t.TempDir()
	require.NoError(t, os.Chmod(second, 0o700))
	srv = startServer(t, second, "--database", dbURL)
	assert.Contains(t, srv.ok(t, "workspace", "list"), ws, "the records are in the database, not the data directory")
}
