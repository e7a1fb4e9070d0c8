package main

// Real agents end to end (issue 18): Claude Code and Codex, as shipped on
// npm (testdata/agents/package-lock.json), launched by `toolscope session
// launch --agent claude-code|codex` on the local executor, against scripted
// model endpoints (internal/modeltest). They live here, next to the rest of
// the binary's end-to-end tests, because they drive the same real server
// process, agentctl and fake forges with the same harness; docs/agents.md
// shows the commands they run.

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/modeltest"
	"github.com/toolscope/toolscope/internal/procs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

const agentsDir = "testdata/agents"

var (
	agentsOnce sync.Once
	agentsErr  error
	agentsOut  []byte
)

// agentCLIs installs the locked agent CLIs (npm ci, once per test binary)
// and returns the directory of their commands.
func agentCLIs(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		testutil.SkipOrFailUnderCI(t, "npm is not installed, so the real agent CLIs cannot be installed; install Node.js 18+ and npm (.ci/run installs nodejs)")
	}
	bin, err := filepath.Abs(filepath.Join(agentsDir, "node_modules", ".bin"))
	require.NoError(t, err)
	agentsOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(bin, "claude")); err == nil {
			if _, err := os.Stat(filepath.Join(bin, "codex")); err == nil {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = agentsDir
		agentsOut, agentsErr = cmd.CombinedOutput()
	})
	require.NoError(t, agentsErr, "npm ci in %s: %s", agentsDir, agentsOut)
	return bin
}

const (
	agentGitLabToken = "glpat-AGENTSECRETGITLABTOKEN0011"
	agentModelKey    = "sk-scripted-model-key-not-a-provider-secret"
)

// agentWorld is a workspace with a connected GitLab (a fake) and an
// unconnected GitHub, and a task on the GitHub repository, on a server
// whose environment holds the GitLab token and the model endpoint.
type agentWorld struct {
	srv                           *orchestrator
	dataDir, ws, task, ghID, glID string
	otherID                       string // a repository of no review provider (a source outside the allowlist)
	workdir                       string
}

func newAgentWorld(t testing.TB, env ...string) *agentWorld {
	t.Helper()
	bin := agentCLIs(t)
	gl := forgetest.NewGitLab(t, agentGitLabToken, "gl-bot")
	gl.AddProject("acme/web", "main", "fix-login")
	w := &agentWorld{dataDir: filepath.Join(t.TempDir(), "data")}
	// Run as a user (no uids of their own), the agents would read and
	// write their configuration under HOME: never the developer's.
	home := t.TempDir()
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+home, "E2E_GL_TOKEN="+agentGitLabToken)
	agentctl := executortest.Agentctl(t)
	// Codex, under the agent's own uid, spawns `agentctl mcp`: the binary
	// must be reachable by that uid, as it is once installed.
	require.NoError(t, os.Chmod(filepath.Dir(agentctl), 0o755))
	w.srv = startServerEnv(t, w.dataDir, env, "--agentctl", agentctl)
	w.ws = w.srv.id(t, "workspace", "workspace", "create", "acme")
	w.srv.ok(t, "workspace", "connect", w.ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-env", "E2E_GL_TOKEN")
	w.ghID = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	w.glID = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	w.otherID = w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "bitbucket", "--host", "bitbucket.org", "--path", "acme/notes")
	w.task = w.srv.id(t, "task", "task", "create", "--workspace", w.ws, "--title", "fix login", "--repo", w.ghID)
	// The agent may run under a uid of its own: its working directory is
	// one it can enter.
	dir, err := os.MkdirTemp("", "toolscope-agent-work-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	w.workdir = dir
	return w
}

// startWith makes the world's task one with the repositories of start
// ("github", "gitlab": the world's two), or, for none, one repository of
// no review provider.
func (w *agentWorld) startWith(t testing.TB, start []string) {
	t.Helper()
	args := []string{"task", "create", "--workspace", w.ws, "--title", "fix login"}
	if len(start) == 0 {
		args = append(args, "--repo", w.otherID)
	}
	for _, id := range w.repos(start) {
		args = append(args, "--repo", id)
	}
	w.task = w.srv.id(t, "task", args...)
}

// repos returns the ids of the world's repositories of providers.
func (w *agentWorld) repos(providers []string) []string {
	ids := map[string]string{"github": w.ghID, "gitlab": w.glID}
	var out []string
	for _, p := range providers {
		out = append(out, ids[p])
	}
	return out
}

// story is the path every agent test takes (issue 32): the task starts
// with the providers of start, the agent calls task_info, then attaches
// the repositories of gains in one task_add_sources call, and its very
// next turn calls a tool of each provider it gained.
type story struct {
	name         string
	start, gains []string
}

var stories = []story{
	{"gains-gitlab", []string{"github"}, []string{"gitlab"}},
	{"gains-both", nil, []string{"github", "gitlab"}},
}

// gainedCalls are the calls of the turn after task_add_sources: one tool
// of each gained provider, and the result each must bring back from the
// orchestrator (GitHub is not connected in the world, GitLab has no merge
// request for the session's branch).
func (s story) gainedCalls() map[string]string {
	out := map[string]string{}
	for _, p := range s.gains {
		switch p {
		case "github":
			out["github_pr_status"] = "provider_not_connected: "
		case "gitlab":
			out["gitlab_mr_automation"] = "no_change_request: "
		}
	}
	return out
}

// launch starts the agent with `session launch TASK args...` (on the local
// executor, in the world's working directory), with agentArgs inserted
// after "--", and returns the session's id once the agent exited. The
// command, without agentArgs, must be shown in docs/agents.md.
func (w *agentWorld) launch(t testing.TB, args []string, agentArgs ...string) string {
	t.Helper()
	guideShows(t, "toolscope session launch TASK "+shellJoin(args))
	if i := slices.Index(args, "--"); i >= 0 {
		args = slices.Concat(args[:i+1], agentArgs, args[i+1:])
	}
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(w.srv.ok(t, append([]string{"--json", "session", "launch", w.task, "--executor", "local",
		"--workdir", w.workdir}, args...)...)), &launched))
	sid := launched["id"].(string)
	ev := waitEvent(t, w.srv, w.task, pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED)
	t.Logf("agent exited: %s", ev.GetMessage())
	return sid
}

// guideShows checks that docs/agents.md shows text.
func guideShows(t testing.TB, text string) {
	t.Helper()
	guide, err := os.ReadFile("../../../docs/agents.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(guide), text), "docs/agents.md does not show what the agent tests run: %s", text)
}

// shellJoin renders args as a shell command line, quoting those with
// spaces.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.ContainsAny(a, " '") {
			out[i] = `"` + a + `"`
		}
	}
	return strings.Join(out, " ")
}

// agentEnvClean checks, while the agent runs, that no process of the
// task's agent holds a provider secret in its environment, and returns how
// many it read.
func (w *agentWorld) agentEnvClean(t *testing.T) int {
	list, err := procs.List()
	require.NoError(t, err)
	agents := 0
	for _, p := range list {
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		if err != nil || !strings.Contains(string(environ), "TOOLSCOPE_TASK_ID="+w.task) {
			continue
		}
		agents++
		assert.NotContains(t, string(environ), agentGitLabToken, "process %d (%s)", p.PID, p.Args)
		assert.NotContains(t, p.Args, agentGitLabToken, "process %d's command line", p.PID)
		assert.Contains(t, string(environ), agentModelKey, "control: the model key is passed by name")
	}
	return agents
}

// secretsOutOfReach checks that no file of the session holds a provider
// secret, and that no model request carried one.
func (w *agentWorld) secretsOutOfReach(t *testing.T, sid string, model *modeltest.Server) {
	t.Helper()
	dir := sessionDir(t, w.dataDir, sid)
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil {
			files++
			assert.NotContains(t, string(b), agentGitLabToken, path)
		}
		return nil
	}))
	assert.NotZero(t, files, "the session's files were read")
	for _, turn := range model.Turns() {
		assert.NotContains(t, string(turn.Body), agentGitLabToken, "model request %d", turn.N)
	}
}

// surface is the session's tools a turn offers, as toolscope names them.
func surface(turn *modeltest.Turn) []string { return turn.ServerTools("toolscope") }

func readOnly(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !toolapi.ReadOnly(n) })
}

func noDuplicates(t *testing.T, turn *modeltest.Turn) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range turn.Tools {
		assert.False(t, seen[n], "turn %d offers %s twice", turn.N, n)
		seen[n] = true
	}
}

// TestClaudeCodeUsesTheSessionsTools runs the real Claude Code through the
// claude-code profile, along each story: its model sees exactly the
// session's tools, calls reach the orchestrator, a refusal reaches the
// model as its code, and after task_add_sources the very next turn finds
// every new tool with its tool search and calls one of each new provider.
func TestClaudeCodeUsesTheSessionsTools(t *testing.T) {
	t.Parallel()
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			claudeStory(t, s)
		})
	}
}

func claudeStory(t *testing.T, s story) {
	const mcp = "mcp__toolscope__"
	var world atomic.Pointer[agentWorld] // set before the agent starts
	var envRead atomic.Int64
	fail := func(turn *modeltest.Turn, format string, args ...any) modeltest.Reply {
		t.Errorf("turn %d: "+format, append([]any{turn.N}, args...)...)
		return modeltest.Reply{Text: "giving up"}
	}
	gained := s.gainedCalls()
	var names []string
	for name := range gained {
		names = append(names, mcp+name)
	}
	slices.Sort(names)
	first := mcp + "task_info," + mcp + "task_add_sources"
	if slices.Contains(s.start, "github") {
		first += "," + mcp + "github_pr_status"
	}
	addSources := func() modeltest.Reply {
		return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "task_add_sources", Input: map[string]any{"repository_ids": world.Load().repos(s.gains)}}}}
	}
	steps := []modeltest.Script{
		func(turn *modeltest.Turn) modeltest.Reply {
			assert.Equal(t, toolapi.Surface(s.start...), surface(turn), "the task's providers only")
			noDuplicates(t, turn)
			envRead.Store(int64(world.Load().agentEnvClean(t)))
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "ToolSearch", Input: map[string]any{"query": "select:" + first}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "task_info", Input: map[string]any{}}}}
		},
	}
	if slices.Contains(s.start, "github") {
		steps = append(steps,
			func(turn *modeltest.Turn) modeltest.Reply {
				if !strings.Contains(turn.LastResult(), world.Load().task) {
					return fail(turn, "task_info's result does not name the task: %q", turn.LastResult())
				}
				return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "github_pr_status", Input: map[string]any{}}}}
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.True(t, strings.HasPrefix(turn.LastResult(), "provider_not_connected: "), "the refusal's stable code: %q", turn.LastResult())
				return addSources()
			})
	} else {
		steps = append(steps, func(turn *modeltest.Turn) modeltest.Reply {
			if !strings.Contains(turn.LastResult(), world.Load().task) {
				return fail(turn, "task_info's result does not name the task: %q", turn.LastResult())
			}
			return addSources()
		})
	}
	steps = append(steps,
		func(turn *modeltest.Turn) modeltest.Reply {
			// The result names the new tools, and the very next turn's
			// tool search finds them: Claude Code re-listed before the
			// result was released (ADR 0019).
			for name := range gained {
				assert.Contains(t, turn.LastResult(), `"`+name+`"`, "the result names the new tools")
			}
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "ToolSearch", Input: map[string]any{"query": "select:" + strings.Join(names, ",")}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			for _, name := range names {
				if !strings.Contains(turn.LastResult(), "tool_reference:"+name) {
					return fail(turn, "the tool search right after task_add_sources did not find %s: %q", name, turn.LastResult())
				}
			}
			assert.Equal(t, toolapi.Surface(slices.Concat(s.start, s.gains)...), surface(turn))
			noDuplicates(t, turn)
			var calls []modeltest.Call
			for _, name := range names {
				calls = append(calls, modeltest.Call{Name: name, Input: map[string]any{}})
			}
			return modeltest.Reply{Calls: calls}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			for name, prefix := range gained {
				assert.True(t, slices.ContainsFunc(turn.Results, func(r string) bool { return strings.HasPrefix(r, prefix) }),
					"%s's call reached the orchestrator (%s): %q", name, prefix, turn.Results)
			}
			return modeltest.Reply{Text: "done"}
		})
	model := modeltest.NewAnthropic(t, "toolscope", modeltest.Steps(steps...))
	w := newAgentWorld(t, "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY="+agentModelKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	w.startWith(t, s.start)
	world.Store(w)
	sid := w.launch(t, []string{"--agent", "claude-code", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
		"--", "-p", "Fix the login bug.", "--output-format", "json"})
	turns := model.Turns()
	if dir := os.Getenv("TOOLSCOPE_DUMP_TURNS"); dir != "" {
		for _, turn := range turns {
			_ = os.WriteFile(filepath.Join(dir, "claude-"+s.name+"-"+strconv.Itoa(turn.N)+".json"), turn.Body, 0o600)
		}
	}
	for _, turn := range turns {
		t.Logf("turn %d: tools %v; results %q", turn.N, turn.ServerTools("toolscope"), turn.Results)
	}
	require.Len(t, turns, len(steps), "every scripted turn ran")
	assert.NotZero(t, envRead.Load(), "the agent's environment was read while it ran")
	w.secretsOutOfReach(t, sid, model)
	if s.name == "gains-gitlab" {
		testutil.Figure(t, "context cost at the model boundary, Claude Code",
			"github: %d bytes (11 tool names, no schema); with 3 schemas loaded: %d; github+gitlab, 4 loaded: %d (tools/list: see mcpserver.ContextCost)",
			turns[0].ToolDefinitionBytes, turns[1].ToolDefinitionBytes, turns[5].ToolDefinitionBytes)
	}
}

// TestClaudeCodeInPlanModeSeesReadOnlyTools: a plan-mode session's model
// is offered the read-only tools of the task's providers, and no others.
func TestClaudeCodeInPlanModeSeesReadOnlyTools(t *testing.T) {
	t.Parallel()
	model := modeltest.NewAnthropic(t, "toolscope", modeltest.Steps(func(turn *modeltest.Turn) modeltest.Reply {
		assert.Equal(t, readOnly(toolapi.Surface("github")), surface(turn), "plan mode: read-only tools only")
		noDuplicates(t, turn)
		return modeltest.Reply{Text: "a plan"}
	}))
	w := newAgentWorld(t, "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY="+agentModelKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	w.launch(t, []string{"--mode", "plan", "--agent", "claude-code", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "--", "-p", "Plan the fix."})
	require.Len(t, model.Turns(), 1)
	testutil.Figure(t, "context cost at the model boundary, Claude Code, plan mode",
		"github: %d bytes (tool names, no schema)", model.Turns()[0].ToolDefinitionBytes)
}

// listTools is the JavaScript a Codex model runs in exec to find the tools
// of a deferred MCP server: Codex tells it the namespace, not the names.
const listTools = `text(JSON.stringify(ALL_TOOLS.map(t => t.name).filter(n => n.startsWith("mcp__toolscope__")).sort()))`

// execNames returns the toolscope tools listTools found, without prefix.
func execNames(t *testing.T, turn *modeltest.Turn) []string {
	t.Helper()
	out := turn.LastResult()
	var names []string
	if !assert.NoError(t, json.Unmarshal([]byte(out[strings.LastIndex(out, "\n")+1:]), &names), "exec's output: %s", out) {
		return nil
	}
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, "mcp__toolscope__")
	}
	return names
}

// TestCodexUsesTheSessionsTools runs the real Codex through the codex
// profile (the stdio bridge, added with -c overrides), along each story.
// Codex 0.169 defers MCP servers: its requests name the namespace once,
// and the model finds the tools with exec's ALL_TOOLS. They are exactly the
// session's tools plus call_tool (offered until a client is seen
// re-listing); calls reach the orchestrator; a refusal reaches the model as
// its code; after task_add_sources Codex still has the old list (it never
// re-lists: its result waited AdoptWait for a re-list that did not come),
// and the very next turn calls a tool of each new provider through
// call_tool, as the result tells it to.
func TestCodexUsesTheSessionsTools(t *testing.T) {
	t.Parallel()
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			codexStory(t, s)
		})
	}
}

func codexStory(t *testing.T, s story) {
	const ns = "mcp__toolscope"
	var world atomic.Pointer[agentWorld]
	var envRead atomic.Int64
	call := func(name string, input any) modeltest.Reply {
		return modeltest.Reply{Calls: []modeltest.Call{{Name: name, Namespace: ns, Input: input}}}
	}
	gained := s.gainedCalls()
	addSources := func() modeltest.Reply {
		return call("task_add_sources", map[string]any{"repository_ids": world.Load().repos(s.gains)})
	}
	steps := []modeltest.Script{
		func(turn *modeltest.Turn) modeltest.Reply {
			// Codex defers MCP servers: the model is told the namespace,
			// once, and calls its tools by name.
			assert.Equal(t, []string{ns}, turn.Deferred, "one entry for the session")
			noDuplicates(t, turn)
			envRead.Store(int64(world.Load().agentEnvClean(t)))
			// The model discovers a deferred server's tools from exec's
			// ALL_TOOLS.
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "exec", Code: listTools}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			assert.Equal(t, withTool(toolapi.Surface(s.start...), toolapi.CallTool), execNames(t, turn),
				"the tools the model can find: the task's providers only, and call_tool (Codex was never seen re-listing)")
			return call("task_info", map[string]any{})
		},
	}
	if slices.Contains(s.start, "github") {
		steps = append(steps,
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Contains(t, turn.LastResult(), world.Load().task, "task_info's result")
				return call("github_pr_status", map[string]any{})
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Contains(t, turn.LastResult(), "provider_not_connected: ", "the refusal's stable code")
				return addSources()
			})
	} else {
		steps = append(steps, func(turn *modeltest.Turn) modeltest.Reply {
			assert.Contains(t, turn.LastResult(), world.Load().task, "task_info's result")
			return addSources()
		})
	}
	steps = append(steps,
		func(turn *modeltest.Turn) modeltest.Reply {
			for name := range gained {
				assert.Contains(t, turn.LastResult(), name, "the result names the new tools")
			}
			assert.Contains(t, turn.LastResult(), `"call_with":"call_tool"`, "and tells the agent how to call them")
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "exec", Code: listTools}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			assert.Equal(t, withTool(toolapi.Surface(s.start...), toolapi.CallTool), execNames(t, turn),
				"Codex did not re-list: the new tools are reachable only through call_tool")
			var calls []modeltest.Call
			for _, name := range slices.Sorted(maps.Keys(gained)) {
				calls = append(calls, modeltest.Call{Name: toolapi.CallTool, Namespace: ns,
					Input: map[string]any{"name": name, "arguments": map[string]any{}}})
			}
			return modeltest.Reply{Calls: calls}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			for name, prefix := range gained {
				assert.True(t, slices.ContainsFunc(turn.Results, func(r string) bool { return strings.Contains(r, prefix) }),
					"%s's call reached the orchestrator (%s): %q", name, prefix, turn.Results)
			}
			return modeltest.Reply{Text: "done"}
		})
	model := modeltest.NewResponses(t, "toolscope", modeltest.Steps(steps...))
	w := newAgentWorld(t, "OPENAI_API_KEY="+agentModelKey)
	w.startWith(t, s.start)
	world.Store(w)
	sid := w.launch(t, []string{"--agent", "codex", "--", "exec", "--skip-git-repo-check", "Fix the login bug."}, model.CodexProvider()...)
	guideShows(t, `-c model_provider=gateway -c 'model_providers.gateway={name="gateway", base_url="https://gateway.example/v1", wire_api="responses", env_key="OPENAI_API_KEY"}'`)
	turns := model.Turns()
	if dir := os.Getenv("TOOLSCOPE_DUMP_TURNS"); dir != "" {
		for _, turn := range turns {
			_ = os.WriteFile(filepath.Join(dir, "codex-"+s.name+"-"+strconv.Itoa(turn.N)+".json"), turn.Body, 0o600)
		}
	}
	for _, turn := range turns {
		t.Logf("turn %d: tools %v; results %q", turn.N, turn.ServerTools("toolscope"), turn.Results)
	}
	answered, unknown := model.Other()
	t.Logf("other requests: %v; unknown: %v", answered, unknown)
	require.Len(t, turns, len(steps), "every scripted turn ran")
	assert.NotZero(t, envRead.Load(), "the agent's environment was read while it ran")
	w.secretsOutOfReach(t, sid, model)
	if s.name == "gains-gitlab" {
		testutil.Figure(t, "context cost at the model boundary, Codex",
			"github: %d bytes (the deferred namespace's name); github+gitlab: %d; the names reach the model only through exec (ALL_TOOLS: %d bytes)",
			turns[0].ToolDefinitionBytes, turns[4].ToolDefinitionBytes, len(turns[1].LastResult()))
	}
}

// userDir makes a directory the agent (under a uid of its own, or not)
// can read and write, holding file name with content.
func userDir(t *testing.T, name, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toolscope-agent-user-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	return dir
}

// TestProfilesKeepTheUsersConfiguration: the profiles add the session's
// server to the user's own agent configuration instead of replacing it.
// Codex keeps the user's CODEX_HOME, whose config.toml names the model
// provider (no -c for it); Claude Code keeps the user's settings, whose
// deny rule still refuses a tool of the session's server.
func TestProfilesKeepTheUsersConfiguration(t *testing.T) {
	t.Parallel()
	t.Run("codex", func(t *testing.T) {
		t.Parallel()
		model := modeltest.NewResponses(t, "toolscope", modeltest.Steps(
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Equal(t, []string{"mcp__toolscope"}, turn.Deferred, "the profile's server, added to the user's configuration")
				return modeltest.Reply{Calls: []modeltest.Call{{Name: "session_info", Namespace: "mcp__toolscope", Input: map[string]any{}}}}
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Contains(t, turn.LastResult(), `"session_id"`, "the call reached the orchestrator")
				return modeltest.Reply{Text: "done"}
			},
		))
		codexHome := userDir(t, "config.toml", "model_provider = \"mine\"\n\n[model_providers.mine]\nname = \"mine\"\n"+
			"base_url = \""+model.URL+"/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n")
		w := newAgentWorld(t, "OPENAI_API_KEY="+agentModelKey, "CODEX_HOME="+codexHome)
		w.launch(t, []string{"--agent", "codex", "--env", "CODEX_HOME", "--", "exec", "--skip-git-repo-check", "Show the session."})
		require.Len(t, model.Turns(), 2, "Codex used the user's model provider")
	})
	t.Run("claude-code", func(t *testing.T) {
		t.Parallel()
		const denied = "mcp__toolscope__session_info"
		model := modeltest.NewAnthropic(t, "toolscope", modeltest.Steps(
			func(turn *modeltest.Turn) modeltest.Reply {
				return modeltest.Reply{Calls: []modeltest.Call{{Name: "ToolSearch", Input: map[string]any{"query": "select:" + denied + ",mcp__toolscope__task_info"}}}}
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				return modeltest.Reply{Calls: []modeltest.Call{{Name: denied, Input: map[string]any{}}}}
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Contains(t, turn.LastResult(), "No such tool available: "+denied, "the user's deny rule still holds")
				return modeltest.Reply{Calls: []modeltest.Call{{Name: "mcp__toolscope__task_info", Input: map[string]any{}}}}
			},
			func(turn *modeltest.Turn) modeltest.Reply {
				assert.Contains(t, turn.LastResult(), `"task_id"`, "the profile's grant covers the rest of the server")
				return modeltest.Reply{Text: "done"}
			},
		))
		config := userDir(t, "settings.json", `{"permissions": {"deny": ["`+denied+`"]}}`)
		w := newAgentWorld(t, "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY="+agentModelKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CONFIG_DIR="+config)
		w.launch(t, []string{"--agent", "claude-code", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "--env", "CLAUDE_CONFIG_DIR",
			"--", "-p", "Show the session."})
		require.Len(t, model.Turns(), 4)
	})
}

// TestClaudeCodeDeliversAPullRequest runs the real Claude Code in its
// session's workspace (issue 31): it learns where its checkout is from
// task_info, edits a file with its own Edit tool, commits, pushes through
// git_push and opens the pull request with github_pr_create. The stand-in
// then holds the branch with the agent's commit and the pull request;
// no process of the agent, no file of its workspace and no model request
// ever held the provider's token.
func TestClaudeCodeDeliversAPullRequest(t *testing.T) {
	t.Parallel()
	const mcp = "mcp__toolscope__"
	bin := agentCLIs(t)
	gh := forgetest.NewGitHub(t, e2eGitHubToken, "octo-bot")
	_, err := gh.SeedRepo("acme/api", map[string]string{"README.md": "hello\n"}, "main")
	require.NoError(t, err)
	var (
		task, checkout string
		envRead        atomic.Int64
	)
	// tokenNowhere checks, while the agent runs, that none of its
	// processes holds the token, and returns how many it read.
	tokenNowhere := func() int64 {
		list, err := procs.List()
		require.NoError(t, err)
		var agents int64
		for _, p := range list {
			environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
			if err != nil || !strings.Contains(string(environ), "TOOLSCOPE_TASK_ID="+task) {
				continue
			}
			agents++
			assert.NotContains(t, string(environ), e2eGitHubToken, "process %d (%s)", p.PID, p.Args)
			assert.NotContains(t, p.Args, e2eGitHubToken, "process %d's command line", p.PID)
		}
		return agents
	}
	fail := func(turn *modeltest.Turn, format string, args ...any) modeltest.Reply {
		t.Errorf("turn %d: "+format, append([]any{turn.N}, args...)...)
		return modeltest.Reply{Text: "giving up"}
	}
	readme := func() string { return filepath.Join(checkout, "README.md") }
	model := modeltest.NewAnthropic(t, "toolscope", modeltest.Steps(
		func(turn *modeltest.Turn) modeltest.Reply {
			assert.Equal(t, toolapi.WorkspaceSurface("github"), surface(turn), "a session with a checkout can push")
			envRead.Store(tokenNowhere())
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "ToolSearch",
				Input: map[string]any{"query": "select:" + mcp + "task_info," + mcp + "git_push," + mcp + "github_pr_create"}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "task_info", Input: map[string]any{}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			m := regexp.MustCompile(`"local_path":"([^"]+)"`).FindStringSubmatch(turn.LastResult())
			if m == nil {
				return fail(turn, "task_info reports no local_path: %q", turn.LastResult())
			}
			checkout = m[1]
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "Read", Input: map[string]any{"file_path": readme()}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			if !strings.Contains(turn.LastResult(), "hello") {
				return fail(turn, "Read did not show the checkout's README.md: %q", turn.LastResult())
			}
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "Edit",
				Input: map[string]any{"file_path": readme(), "old_string": "hello", "new_string": "hello, logged in"}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "Bash", Input: map[string]any{
				"command":     "git -C " + checkout + " -c user.name=agent -c user.email=agent@localhost commit -q -am 'Fix the login bug'",
				"description": "Commit the fix"}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "git_push", Input: map[string]any{}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			if !strings.Contains(turn.LastResult(), `"ref":"refs/heads/toolscope/`) {
				return fail(turn, "git_push did not push: %q", turn.LastResult())
			}
			return modeltest.Reply{Calls: []modeltest.Call{{Name: mcp + "github_pr_create", Input: map[string]any{"title": "Fix the login bug"}}}}
		},
		func(turn *modeltest.Turn) modeltest.Reply {
			if !strings.Contains(turn.LastResult(), `"number":`) {
				return fail(turn, "github_pr_create did not open a pull request: %q", turn.LastResult())
			}
			return modeltest.Reply{Text: "done"}
		},
	))

	home := t.TempDir()
	dataDir := filepath.Join(t.TempDir(), "data")
	workspaces := testutil.TraversableDir(t)
	agentctl := executortest.Agentctl(t)
	require.NoError(t, os.Chmod(filepath.Dir(agentctl), 0o755))
	srv := startServerEnv(t, dataDir, []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "E2E_GH_TOKEN=" + e2eGitHubToken,
		"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=" + agentModelKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		"--agentctl", agentctl, "--workspaces-dir", workspaces)
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_GH_TOKEN")
	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task = srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", repo)

	args := []string{"--agent", "claude-code", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
		"--", "--permission-mode", "acceptEdits", "--allowedTools", "Bash(git:*)"}
	guideShows(t, "toolscope session launch TASK "+shellJoin(args))
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, append([]string{"--json", "session", "launch", task, "--executor", "local"},
		append(args, "-p", "Fix the login bug and open a pull request.", "--output-format", "json")...)...)), &launched))
	sid := launched["id"].(string)
	ev := waitEvent(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED)
	t.Logf("agent exited: %s", ev.GetMessage())
	for _, turn := range model.Turns() {
		t.Logf("turn %d: results %q", turn.N, turn.Results)
	}
	require.Len(t, model.Turns(), 8, "every scripted turn ran")
	assert.NotZero(t, envRead.Load(), "the agent's environment was read while it ran")

	branch := "toolscope/" + task + "/" + sid
	assert.Equal(t, filepath.Join(workspaces, sid, "api"), checkout, "the agent's checkout is in the session's workspace")
	commit := asOwner(t, checkout, "rev-parse", "HEAD")
	assert.Equal(t, "hello, logged in", asOwner(t, checkout, "show", "HEAD:README.md"), "the agent's edit, committed")
	head, ok := gh.Head("acme/api", branch)
	require.True(t, ok, "the session's branch is on the provider")
	assert.Equal(t, commit, head, "with the agent's commit")
	pr, ok := gh.PullRequest("acme/api", 1)
	require.True(t, ok, "the pull request is open")
	assert.Equal(t, branch, pr.Head)

	noTokenIn(t, filepath.Join(workspaces, sid))
	for _, turn := range model.Turns() {
		assert.NotContains(t, string(turn.Body), e2eGitHubToken, "model request %d", turn.N)
	}
}
