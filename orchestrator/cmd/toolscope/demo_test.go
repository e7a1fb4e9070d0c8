package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// runDemo runs `toolscope demo` as `make run` does (on its socket) and
// returns its output lines up to the closing hints; the demo keeps
// serving, and is stopped with SIGTERM, which must end it cleanly.
func runDemo(t *testing.T, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, append([]string{"demo", "--data-dir", t.TempDir(),
		"--agentctl", executortest.Agentctl(t)}, args...)...)
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if last(sc.Text()) {
			break
		}
	}
	require.NotEmpty(t, lines, "no output; stderr: %s", stderr.String())
	require.True(t, last(lines[len(lines)-1]), "the demo did not finish its story; stderr: %s", stderr.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, cmd.Wait(), "the demo stops cleanly; stderr: %s", stderr.String())
	assert.NotContains(t, stderr.String(), "GoAway", "no connection trouble")
	return lines
}

func TestDemoTellsTheWholeStory(t *testing.T) {
	t.Parallel()
	steps := map[string]map[string]any{}
	for _, line := range runDemo(t, "--json") {
		var step map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &step), line)
		steps[step["step"].(string)] = step
	}
	strs := func(v any) []string {
		var out []string
		for _, s := range v.([]any) {
			out = append(out, s.(string))
		}
		return out
	}
	assert.Contains(t, steps["standins"]["github"], "http://127.0.0.1:", "stand-ins on this machine")
	assert.Equal(t, map[string]any{"github": "demo-bot", "gitlab": "demo-bot"}, steps["workspace"]["usernames"])
	assert.Equal(t, []string{"github"}, strs(steps["task"]["providers"]))
	assert.Equal(t, toolapi.Surface("github"), strs(steps["tools_before"]["tools"]))
	after := steps["tools_after"]
	assert.Equal(t, float64(1), after["list_changed"], "exactly one notification")
	assert.Equal(t, []string{"github", "gitlab"}, strs(after["providers"]))
	assert.Equal(t, toolapi.Surface("github", "gitlab"), strs(after["tools"]))
	assert.Equal(t, sortedCopy(toolapi.GitLabTools[:]), sortedCopy(strs(after["new_tools"])))
	calls := steps["calls"]
	assert.Contains(t, calls["github_pr_create"], "Created pull request #1")
	assert.Contains(t, calls["gitlab_mr_create"], "Created merge request #1")
	assert.NotEmpty(t, steps["next"]["session_id"])
	assert.Regexp(t, `^unix:///.*/toolscope\.sock$`, steps["next"]["server"], "the demo serves on its socket")

	story := strings.Join(runDemo(t), "\n")
	for _, want := range []string{"no real GitHub or GitLab is contacted", "lists 11 tools", "received 1 notifications/tools/list_changed",
		"now lists 18 tools", "Created pull request #1", "Created merge request #1", "session mcp-config"} {
		assert.Contains(t, story, want)
	}
}

// last reports the closing line of the story, in text or JSON.
func last(line string) bool {
	return strings.Contains(line, "Ctrl-C") || strings.Contains(line, `"step":"next"`)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
