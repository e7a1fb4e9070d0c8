package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/executors/executortest"
)

// TestLaunchChecksAtTheCLI: `session launch` refuses a model of the other
// vendor (usage, exit 2) and an unset --credential-env (precondition,
// exit 5) before anything runs, naming what the user typed, and leaves no
// session record and no session directory (issue 19).
func TestLaunchChecksAtTheCLI(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t), "--agent-env", "ORIENT_KEY_NEVER_SET")
	task := newTask(t, srv)
	cases := []struct {
		args  []string
		code  int
		typed string
	}{
		{[]string{"--agent", "codex", "--model", "claude-sonnet-4-5"}, 2, `"claude-sonnet-4-5"`},
		{[]string{"--agent", "claude-code", "--model", "gpt-5"}, 2, `"gpt-5"`},
		{[]string{"--agent", "command", "--credential-env", "ORIENT_KEY_NEVER_SET", "--", "/bin/sh", "-c", "true"}, 5, `"ORIENT_KEY_NEVER_SET"`},
	}
	for _, c := range cases {
		r := srv.run(t, append([]string{"session", "launch", task, "--executor", "local"}, c.args...)...)
		assert.Equal(t, c.code, r.code, "%v; stderr: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.typed, "%v: names what the user typed", c.args)
	}
	list := srv.ok(t, "--json", "session", "list", task)
	assert.NotContains(t, list, "sess_", "refused launches are not listed")
	_, err := os.Stat(filepath.Join(dataDir, "sessions"))
	if err == nil {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "sessions"))
		assert.Empty(t, entries, "no session directory is left")
	}
}
