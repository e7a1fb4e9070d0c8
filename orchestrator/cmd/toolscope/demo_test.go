package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
)

// demoProc is a running `toolscope demo` that has told its whole story.
type demoProc struct {
	cmd    *exec.Cmd
	lines  []string
	stderr *testutil.SyncBuffer
}

// startDemo runs `toolscope demo` as `make run` does (on its socket), with
// the CLI config file config (never the user's), and returns once it has
// printed its closing hints; the demo keeps serving until stop.
func startDemo(t *testing.T, config string, args ...string) *demoProc {
	t.Helper()
	return startDemoEnv(t, config, []string{}, append([]string{"--data-dir", t.TempDir()}, args...)...)
}

// startDemoEnv is startDemo with extra environment and no --data-dir of
// its own.
func startDemoEnv(t *testing.T, config string, env []string, args ...string) *demoProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := command(ctx, append([]string{"demo", "--agentctl", executortest.Agentctl(t)}, args...)...)
	cmd.Env = append(cmd.Env, "TOOLSCOPE_CONFIG="+config, "TOOLSCOPE_ADDR=", "TOOLSCOPE_CONTEXT=", "TOOLSCOPE_TOKEN=")
	cmd.Env = append(cmd.Env, env...)
	d := &demoProc{cmd: cmd, stderr: &testutil.SyncBuffer{}}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		// With SIGKILL, the demo's session is left running: end it.
		if i := slices.Index(args, "--data-dir"); i >= 0 && i+1 < len(args) {
			endSessions(t, args[i+1])
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		d.lines = append(d.lines, sc.Text())
		if last(sc.Text()) {
			break
		}
	}
	require.NotEmpty(t, d.lines, "no output; stderr: %s", d.stderr.String())
	require.True(t, last(d.lines[len(d.lines)-1]), "the demo did not finish its story; stderr: %s", d.stderr.String())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return d
}

// stop sends SIGTERM, which must end the demo cleanly.
func (d *demoProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, d.cmd.Wait(), "the demo stops cleanly; stderr: %s", d.stderr.String())
	assert.NotContains(t, d.stderr.String(), "GoAway", "no connection trouble")
}

// runDemo runs the demo through its story and stops it, with a config
// file of its own, and returns its output lines.
func runDemo(t *testing.T, args ...string) []string {
	t.Helper()
	d := startDemo(t, filepath.Join(t.TempDir(), "config.json"), args...)
	d.stop(t)
	return d.lines
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
	assert.Equal(t, toolapi.WorkspaceSurface("github"), strs(steps["tools_before"]["tools"]), "with git_push: the session has a checkout")
	after := steps["tools_after"]
	assert.Equal(t, float64(1), after["list_changed"], "exactly one notification")
	assert.Equal(t, []string{"github", "gitlab"}, strs(after["providers"]))
	assert.Equal(t, toolapi.WorkspaceSurface("github", "gitlab"), strs(after["tools"]))
	var gitlabTools []string
	for _, tool := range toolapi.Tools() {
		if tool.Group == toolapi.GroupGitLab {
			gitlabTools = append(gitlabTools, tool.Name)
		}
	}
	assert.Equal(t, sortedCopy(gitlabTools), sortedCopy(strs(after["new_tools"])))
	// The hosted session gets the same surface and the same one change.
	assert.Equal(t, toolapi.Surface("github"), strs(steps["hosted"]["tools"]))
	assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/sessions/.+/mcp$`, steps["hosted"]["url"])
	assert.Equal(t, float64(1), steps["hosted_after"]["list_changed"], "exactly one notification, hosted too")
	assert.Equal(t, toolapi.Surface("github", "gitlab"), strs(steps["hosted_after"]["tools"]))
	work := steps["workspace_work"]
	assert.Regexp(t, `/api$`, work["checkout"])
	assert.Regexp(t, `^toolscope/task_\w+/sess_\w+$`, work["branch"])
	assert.Regexp(t, `^committed [0-9a-f]{7,} Fix the login bug on toolscope/task_\w+/sess_\w+ in /.+/api$`, work["agent"], "the agent committed in its checkout")
	assert.Contains(t, work["git_push"], "Branch "+work["branch"].(string)+" of github.com/acme/api pushed at ", "git_push delivered the session's branch")
	calls := steps["calls"]
	assert.Contains(t, calls["github_pr_create"], "Created pull request #1")
	assert.Contains(t, calls["gitlab_mr_create"], "Created merge request #1")
	assert.NotEmpty(t, steps["next"]["session_id"])
	assert.Regexp(t, `^unix:///.*/toolscope\.sock$`, steps["next"]["server"], "the demo serves on its socket")
	assert.Regexp(t, `^http://127\.0\.0\.1:[0-9]+$`, steps["console"]["console"], "the demo prints its console's URL")
	tokenFile, _ := steps["console"]["token_file"].(string)
	assert.NotEmpty(t, tokenFile, "and where the token to log in with is")

	story := strings.Join(runDemo(t), "\n")
	for _, want := range []string{"no real GitHub or GitLab is contacted", "lists 12 tools", "received 1 notifications/tools/list_changed",
		"now lists 19 tools", "it committed a fix there", "pushed it to the stand-in", "Created pull request #1", "Created merge request #1", "session mcp-config", "Web console: http://127.0.0.1:",
		"Hosted session", "The hosted session's agent received 1 notifications/tools/list_changed too, and now lists 18 tools"} {
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

// steps indexes the demo's JSON lines by step.
func steps(t *testing.T, lines []string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range lines {
		var step map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &step), line)
		out[step["step"].(string)] = step
	}
	return out
}

type configView struct {
	Current  string `json:"current-context"`
	Contexts []struct {
		Name   string `json:"name"`
		Server string `json:"server"`
	} `json:"contexts"`
}

func listContexts(t *testing.T, env []string) configView {
	t.Helper()
	r := runEnv(t, env, "--json", "context", "list")
	require.Equal(t, 0, r.code, r.stderr)
	var v configView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	return v
}

// TestDemoContext: the demo makes a "demo" context current while it runs,
// so a plain command with no flags and no environment reaches it, and on
// SIGTERM removes it and makes the previous context current again, leaving
// the config file as it was.
func TestDemoContext(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "cfg", "config.json")
	env := []string{"TOOLSCOPE_CONFIG=" + config}
	r := runEnv(t, env, "context", "set", "mine", "--server", "127.0.0.1:9")
	require.Equal(t, 0, r.code, r.stderr)
	before, err := os.ReadFile(config)
	require.NoError(t, err)

	d := startDemo(t, config, "--json")
	s := steps(t, d.lines)
	assert.Equal(t, "demo", s["context"]["context"])
	assert.Equal(t, "mine", s["context"]["previous"])
	assert.Equal(t, config, s["context"]["config"])
	assert.Equal(t, "demo", s["next"]["context"])
	server := s["next"]["server"].(string)
	v := listContexts(t, env)
	assert.Equal(t, "demo", v.Current)
	require.Len(t, v.Contexts, 2)
	assert.Equal(t, server, v.Contexts[1].Server)

	// No flag, no TOOLSCOPE_ADDR, no TOOLSCOPE_CONTEXT (runEnv clears them).
	r = runEnv(t, env, "--json", "workspace", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, s["next"]["workspace_id"].(string), "the demo's workspace")

	d.stop(t)
	v = listContexts(t, env)
	assert.Equal(t, "mine", v.Current, "the previous context is current again")
	require.Len(t, v.Contexts, 1, "the demo context is gone")
	after, err := os.ReadFile(config)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the config file is as it was")
}

// TestDemoNoContext: --no-context leaves the config file byte-identical
// and prints the export line; an unwritable config file does not stop the
// demo, which prints the export line with the reason.
func TestDemoNoContext(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "config.json")
	env := []string{"TOOLSCOPE_CONFIG=" + config}
	r := runEnv(t, env, "context", "set", "mine", "--server", "127.0.0.1:9")
	require.Equal(t, 0, r.code, r.stderr)
	before, err := os.ReadFile(config)
	require.NoError(t, err)
	stat, err := os.Stat(config)
	require.NoError(t, err)

	d := startDemo(t, config, "--no-context")
	story := strings.Join(d.lines, "\n")
	assert.Contains(t, story, "--no-context: the CLI config is left alone")
	assert.Regexp(t, `export TOOLSCOPE_ADDR=unix:///.*/toolscope\.sock`, story)
	assert.NotContains(t, story, "CLI context \"demo\" is current")
	d.stop(t)
	after, err := os.ReadFile(config)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "byte-identical")
	stat2, err := os.Stat(config)
	require.NoError(t, err)
	assert.Equal(t, stat.ModTime(), stat2.ModTime(), "not even rewritten")

	// A config file that cannot be written: below a regular file.
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	d = startDemo(t, filepath.Join(blocker, "config.json"), "--json")
	s := steps(t, d.lines)
	assert.Equal(t, "", s["context"]["context"])
	assert.Contains(t, s["context"]["error"], "not a directory")
	assert.Equal(t, "export TOOLSCOPE_ADDR="+s["next"]["server"].(string), s["context"]["export"])
	d.stop(t)
}

// TestDemoDeadContext: a current context whose socket is gone (a demo
// killed with SIGKILL leaves one) gives an error that names the context
// and says how to switch or drop it.
func TestDemoDeadContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A socket file nobody listens on, as SIGKILL leaves it; and no file.
	stale := filepath.Join(dir, "toolscope.sock")
	l, err := net.Listen("unix", stale)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	for _, sock := range []string{stale, filepath.Join(dir, "gone", "toolscope.sock")} {
		config := filepath.Join(t.TempDir(), "config.json")
		require.NoError(t, os.WriteFile(config, []byte(`{"current-context":"demo","contexts":[{"name":"demo","server":"unix://`+sock+`"}]}`), 0o600))
		r := runEnv(t, []string{"TOOLSCOPE_CONFIG=" + config}, "workspace", "list")
		assert.Equal(t, cli.ExitUnavailable, r.code, r.stderr)
		for _, want := range []string{`context "demo"`, "current-context of " + config, "toolscope context use NAME", "toolscope context remove demo"} {
			assert.Contains(t, r.stderr, want)
		}
		r = runEnv(t, []string{"TOOLSCOPE_CONFIG=" + config, "TOOLSCOPE_CONTEXT=demo"}, "workspace", "list")
		assert.Contains(t, r.stderr, "unset TOOLSCOPE_CONTEXT")
	}
}

// TestDemoLeavesNothingOnASignal: on Ctrl-C (SIGINT) and on SIGTERM the
// demo stops its session (no agentctl survives it) and removes the data
// directory it made.
func TestDemoLeavesNothingOnASignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := testutil.TraversableDir(t) // as TMPDIR is: the agents' uids reach the demo's workspaces
			d := startDemoEnv(t, filepath.Join(t.TempDir(), "config.json"), []string{"TMPDIR=" + tmp}, "--json")
			made, err := filepath.Glob(filepath.Join(tmp, "toolscope-demo-*"))
			require.NoError(t, err)
			require.Len(t, made, 1, "the demo made its data directory in TMPDIR")
			before := testutil.ProcessesNaming(t, made[0])
			require.NotEmpty(t, before, "the demo's agentctl runs in its data directory")

			start := time.Now()
			require.NoError(t, d.cmd.Process.Signal(sig))
			assert.NoError(t, d.cmd.Wait(), "the demo stops cleanly on %s; stderr: %s", sig, d.stderr.String())
			testutil.Figure(t, "demo on "+sig.String(), "stopped %d agentctl and removed its data directory in %s",
				len(before), time.Since(start).Round(time.Millisecond))
			assert.Empty(t, testutil.ProcessesNaming(t, made[0]), "no process of the demo survives it")
			assert.NoDirExists(t, made[0], "the demo's data directory is removed")
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "the demo leaves nothing in TMPDIR")
		})
	}
}
