package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
)

type plan struct {
	Argv    []string          `json:"argv"`
	Env     map[string]string `json:"env"`
	PassEnv []string          `json:"pass_env"`
	Files   []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"files"`
}

// TestDryRunPinsTheAgentConfigurations: --dry-run prints, through the same
// rendering agentctl runs at launch, exactly what would be started for
// Claude Code and for Codex; nothing is started or recorded.
func TestDryRunPinsTheAgentConfigurations(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "--agent-env", "MY_OPENAI_KEY,GOPROXY,NPM_CONFIG_REGISTRY")
	task := newTask(t, srv)

	var claude plan
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--agent", "claude-code",
		"--model", "claude-sonnet-4", "--dry-run", "--", "-p", "fix the login bug")), &claude))
	assert.Equal(t, []string{"claude", "--allowedTools", "mcp__toolscope", "--mcp-config", "<session dir>/claude-mcp.json", "--strict-mcp-config",
		"--model", "claude-sonnet-4", "-p", "fix the login bug"}, claude.Argv)
	assert.Equal(t, []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
		"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}, claude.PassEnv, "the whole allowlist, names only")
	require.Len(t, claude.Files, 1)
	assert.Equal(t, "<session dir>/claude-mcp.json", claude.Files[0].Path)
	assert.Equal(t, `{
  "mcpServers": {
    "toolscope": {
      "headers": {
        "Authorization": "Bearer <session token>"
      },
      "type": "http",
      "url": "http://127.0.0.1:<port>/mcp"
    }
  }
}
`, claude.Files[0].Content)

	var codex plan
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--agent", "codex",
		"--credential-env", "MY_OPENAI_KEY", "--env", "GOPROXY", "--env", "NPM_CONFIG_REGISTRY", "--dry-run", "--", "exec", "fix the login bug")), &codex))
	assert.Equal(t, []string{"codex",
		"-c", `mcp_servers.toolscope.command="<agentctl>"`,
		"-c", `mcp_servers.toolscope.args=["mcp", "--config", "<session dir>/bridge.json"]`,
		"-c", `mcp_servers.toolscope.default_tools_approval_mode="approve"`,
		"exec", "fix the login bug"}, codex.Argv)
	assert.Empty(t, codex.Env, "no CODEX_HOME: the user's Codex home stays usable")
	assert.Equal(t, []string{"GOPROXY", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "MY_OPENAI_KEY", "NPM_CONFIG_REGISTRY",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}, codex.PassEnv)
	assert.Empty(t, codex.Files, "-c overrides, no file of its own")

	// docs/agents.md shows the first line of both dry runs.
	for _, args := range [][]string{{"--agent", "claude-code", "--", "-p", "Fix the login bug."},
		{"--agent", "codex", "--", "exec", "--skip-git-repo-check", "Fix the login bug."}} {
		out := srv.ok(t, append([]string{"session", "launch", task, "--dry-run"}, args...)...)
		guideShows(t, strings.SplitN(out, "\n", 2)[0])
	}

	human := srv.ok(t, "session", "launch", task, "--agent", "codex", "--dry-run")
	assert.Regexp(t, `would start\s+codex`, human)
	assert.Contains(t, human, "names only")
	assert.NotContains(t, srv.ok(t, "session", "list", task), "sess_", "a dry run records nothing")

	r := srv.run(t, "session", "launch", task, "--agent", "aider", "--dry-run")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `unknown --agent "aider": not a profile (claude-code, codex, command)`)

	// --env takes names: a value, a reserved name or a bad name is
	// refused, naming what was typed and nothing else.
	for _, bad := range []string{"GH_TOKEN=ghp_abc", "TOOLSCOPE_AGENTCTL_SECRET", "1BAD", "ghp_0123456789abcdefghijklmnopqrstuvwxyz"} {
		r := srv.run(t, "session", "launch", task, "--env", bad, "--dry-run", "--", "/bin/agent")
		assert.Equal(t, 2, r.code, "--env %s: %s", bad, r.stderr)
		assert.Contains(t, r.stderr, "invalid --env #1: ")
		assert.NotContains(t, r.stderr, "ghp_", "a value is never echoed")
	}
}

// TestDryRunReportsThePreflightRefusal: the dry run of a launch the
// executor's preflight would refuse shows the plan and the refusal, in
// text and in --json, records nothing and exits 0 (issue 19).
func TestDryRunReportsThePreflightRefusal(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)
	out := srv.ok(t, "session", "launch", task, "--executor", "local", "--dry-run", "--", "/nowhere/agent", "go")
	assert.Regexp(t, `would start\s+/nowhere/agent go`, out)
	assert.Regexp(t, "would be refused\\s+launch refused on the local executor, no session would be kept: agent command `/nowhere/agent` not found", out)
	var plan struct {
		Refused string `json:"refused"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "local", "--dry-run", "--", "/nowhere/agent")), &plan))
	assert.Contains(t, plan.Refused, "agent command `/nowhere/agent` not found")
	ok := srv.ok(t, "session", "launch", task, "--executor", "local", "--dry-run", "--", "/bin/sh", "-c", "true")
	assert.NotContains(t, ok, "would be refused")
	assert.NotContains(t, srv.ok(t, "session", "list", task), "sess_", "a dry run records nothing")
}

// TestNamedAgentsAndExplicitAuth (issue 32): a named agent of the config
// file (profile, model, auth, credential variable) is launched by its
// name, flags overriding its fields; --auth subscription passes no key
// variable; a model the profile does not know is refused with the names
// it knows, unless --model-unchecked; an unknown name is refused naming
// the config file and its agents.
func TestNamedAgentsAndExplicitAuth(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "--agent-env", "WORK_OPENAI_KEY,MY_KEY")
	task := newTask(t, srv)
	config := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"agents": {
		"sub": {"profile": "claude-code", "model": "sonnet", "auth": "subscription"},
		"work": {"profile": "codex", "model": "gpt-5", "credential_env": "WORK_OPENAI_KEY"},
		"typo": {"profile": "claude-code", "model": "sonet"}}}`), 0o600))
	run := func(args ...string) result {
		return runEnv(t, []string{"TOOLSCOPE_CONFIG=" + config}, append([]string{"--server", srv.addr, "session", "launch", task, "--dry-run"}, args...)...)
	}
	dry := func(args ...string) plan {
		r := run(append([]string{"--json"}, args...)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		var p plan
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &p))
		return p
	}

	sub := dry("--agent", "sub", "--", "-p", "hi")
	assert.Equal(t, []string{"--model", "sonnet"}, sub.Argv[6:8], "the named agent's model")
	assert.NotContains(t, sub.PassEnv, "ANTHROPIC_API_KEY", "subscription: no key variable")
	assert.NotContains(t, sub.PassEnv, "ANTHROPIC_AUTH_TOKEN")
	assert.Contains(t, sub.PassEnv, "ANTHROPIC_BASE_URL", "the endpoint still passes")
	assert.Equal(t, []string{"--model", "opus"}, dry("--agent", "sub", "--model", "opus").Argv[6:8], "a flag overrides the named agent")
	assert.Contains(t, dry("--agent", "sub", "--auth", "api-key").PassEnv, "ANTHROPIC_API_KEY")

	work := dry("--agent", "work", "--", "exec", "hi")
	assert.Contains(t, work.Argv, `model="gpt-5"`)
	assert.Contains(t, work.PassEnv, "WORK_OPENAI_KEY")
	assert.Contains(t, work.PassEnv, "OPENAI_API_KEY", "api-key, the default")

	r := run("--agent", "typo")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `model "sonet" is not one profile "claude-code" knows (default, sonnet, opus`)
	assert.Contains(t, r.stderr, "--model-unchecked")
	assert.Contains(t, dry("--agent", "typo", "--model-unchecked").Argv, "sonet", "passed as it is when asked")
	r = run("--agent", "claude-code", "--model", "gpt-5", "--model-unchecked")
	assert.Equal(t, 2, r.code, "the other vendor's model stays refused")

	r = run("--agent", "nosuch")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `unknown --agent "nosuch": not a profile (claude-code, codex, command) nor a named agent of `+config+" (sub, typo, work)")

	for _, bad := range [][]string{
		{"--agent", "claude-code", "--auth", "subscription", "--credential-env", "MY_KEY"},
		{"--agent", "codex", "--auth", "subscription", "--env", "OPENAI_API_KEY"},
		{"--agent", "codex", "--auth", "oauth"},
		{"--auth", "subscription", "--", "/bin/agent"},
	} {
		r := run(bad...)
		assert.Equal(t, 2, r.code, "%v: %s", bad, r.stderr)
		assert.Contains(t, r.stderr, "--auth", "%v", bad)
	}
}

// TestAgentsGetOnlyTheVariablesTheAdministratorAllows (issue 33, item 2):
// a launch naming a connection's credential variable (GH_TOKEN,
// GITLAB_TOKEN) with --env or --credential-env, to read it back from the
// agent's output, is refused, even when the administrator's list would
// allow every name; so is a name the list does not hold, naming the list
// and the flag that extends it; nothing is recorded. A listed name passes.
func TestAgentsGetOnlyTheVariablesTheAdministratorAllows(t *testing.T) {
	t.Parallel()
	env := []string{"GH_TOKEN=ghp_" + strings.Repeat("a", 36), "GITLAB_TOKEN=glpat-" + strings.Repeat("b", 20), "DEPLOY_REGION=eu"}
	for _, list := range [][]string{{"DEPLOY_REGION"}, {"*"}} {
		t.Run(strings.Join(list, ","), func(t *testing.T) {
			t.Parallel()
			srv := startServerEnv(t, t.TempDir(), env, "--agent-env", strings.Join(list, ","))
			task := newTask(t, srv)
			ws := srv.id(t, "workspace", "workspace", "create", "other")
			srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--token-env", "GH_TOKEN", "--no-validate")
			srv.ok(t, "workspace", "connect", ws, "--provider", "gitlab", "--token-env", "GITLAB_TOKEN", "--no-validate")
			for _, attack := range [][]string{
				{"--env", "GH_TOKEN", "--", "sh", "-c", "echo $GH_TOKEN | rev"},
				{"--credential-env", "GITLAB_TOKEN", "--", "sh", "-c", "echo $GITLAB_TOKEN | rev"},
				{"--env", "OTEL_EXPORTER_OTLP_HEADERS", "--", "sh", "-c", "env"},
			} {
				for _, dry := range []bool{true, false} {
					args := append([]string{"session", "launch", task}, attack...)
					if dry {
						args = append([]string{"session", "launch", task, "--dry-run"}, attack...)
					}
					r := srv.run(t, args...)
					assert.Equal(t, 2, r.code, "%v: %s", attack, r.stderr)
					assert.Contains(t, r.stderr, "a variable the orchestrator reads itself", "%v", attack)
					assert.NotContains(t, r.stderr, "ghp_")
				}
			}
			r := srv.run(t, "session", "launch", task, "--dry-run", "--env", "NPM_TOKEN", "--", "sh")
			if list[0] == "*" {
				assert.Equal(t, 0, r.code, r.stderr)
			} else {
				assert.Equal(t, 2, r.code)
				assert.Contains(t, r.stderr, "NPM_TOKEN is not a variable this orchestrator lets agents have (DEPLOY_REGION); an administrator adds it with toolscope serve --agent-env NPM_TOKEN")
			}
			assert.Equal(t, 0, srv.run(t, "session", "launch", task, "--dry-run", "--env", "DEPLOY_REGION", "--", "sh").code, "a listed name passes")
			assert.NotContains(t, srv.ok(t, "session", "list", task), "sess_", "nothing recorded")
		})
	}
}
