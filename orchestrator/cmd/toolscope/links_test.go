package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
)

// TestARestoredCopyDoesNotTakeOverTheOriginalsSessions is the issue's
// case: an orchestrator started on a copy of the database in another
// directory (a restored backup) re-attached every live session of the
// original. Now agentctl refuses it (ADR 0014): the copy records the
// session failed, naming the installation that owns it, and the original
// keeps serving it. The copy cannot stop it either.
func TestARestoredCopyDoesNotTakeOverTheOriginalsSessions(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	w := newTwoProviders(t, agentctl, "restore me")
	sid := w.srv.launchLocal(t, w.task)
	url, token := bridgeConfig(t, w.dataDir, sid)
	client := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	assert.Equal(t, w.task, taskInfo(t, client).TaskID)

	// A backup taken while the original runs, restored elsewhere.
	copyDir := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, os.MkdirAll(copyDir, 0o700))
	db, err := sql.Open("sqlite", filepath.Join(w.dataDir, "toolscope.db"))
	require.NoError(t, err)
	_, err = db.Exec(fmt.Sprintf("VACUUM INTO '%s'", filepath.Join(copyDir, "toolscope.db")))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	restored := startServer(t, copyDir, "--agentctl", agentctl)
	s := restored.session(t, sid)
	assert.Equal(t, "failed", s["state"], "the copy does not hold the original's session")
	assert.Contains(t, s["status_message"], "belong to orchestrator", "%v", s["status_message"])
	assert.Contains(t, s["status_message"], filepath.Join(w.dataDir, "toolscope.db"), "the refusal names the original installation")

	// Nor can it stop it: before, its local executor, not holding the
	// session, ended the agentctl it found by pid and removed the
	// original's session directory.
	r := restored.run(t, "session", "stop", sid)
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Contains(t, r.stderr, "another orchestrator installation")
	assert.FileExists(t, filepath.Join(w.dataDir, "sessions", sid, "secret"), "the original's session directory is untouched")

	assert.Equal(t, "running", w.srv.session(t, sid)["state"])
	start := time.Now()
	assert.Equal(t, w.task, taskInfo(t, client).TaskID, "the original still answers its agent")
	t.Logf("the original answered %s after the copy started", time.Since(start))
	restored.stop(t)
}
