package profiles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/profiles"
)

var ep = profiles.Endpoint{URL: "http://127.0.0.1:4242/mcp", Token: "tok", Bridge: "/s/bridge.json", Agentctl: "/bin/agentctl", Dir: "/s"}

func TestClaudeCode(t *testing.T) {
	t.Parallel()
	p, err := profiles.Render(profiles.Spec{Profile: profiles.ClaudeCode, Args: []string{"-p", "fix it"}, Model: "claude-sonnet"}, ep)
	require.NoError(t, err)
	assert.Equal(t, []string{"claude", "--allowedTools", "mcp__toolscope", "--mcp-config", "/s/claude-mcp.json", "--strict-mcp-config", "--model", "claude-sonnet", "-p", "fix it"}, p.Argv)
	assert.Contains(t, p.PassEnv, "ANTHROPIC_API_KEY")
	require.Len(t, p.Files, 1)
	assert.JSONEq(t, `{"mcpServers":{"toolscope":{"type":"http","url":"http://127.0.0.1:4242/mcp","headers":{"Authorization":"Bearer tok"}}}}`, p.Files[0].Content)
}

func TestCodex(t *testing.T) {
	t.Parallel()
	p, err := profiles.Render(profiles.Spec{Profile: profiles.Codex, Args: []string{"exec", "fix it"}, CredentialEnv: "MY_OPENAI_KEY", Model: "gpt-5"}, ep)
	require.NoError(t, err)
	assert.Equal(t, []string{"codex",
		"-c", `mcp_servers.toolscope.command="/bin/agentctl"`,
		"-c", `mcp_servers.toolscope.args=["mcp", "--config", "/s/bridge.json"]`,
		"-c", `mcp_servers.toolscope.default_tools_approval_mode="approve"`,
		"-c", `model="gpt-5"`,
		"exec", "fix it"}, p.Argv)
	assert.Empty(t, p.Env, "no CODEX_HOME: the user's Codex home, login and model provider stay usable")
	assert.Empty(t, p.Files, "the server is added with -c overrides, not a config file of its own")
	assert.Contains(t, p.PassEnv, "MY_OPENAI_KEY")
	assert.NotContains(t, p.Argv, "tok", "no token on Codex's command line: it uses the stdio bridge")
}

func TestBadSpecs(t *testing.T) {
	t.Parallel()
	for _, s := range []profiles.Spec{{Profile: "aider"}, {Profile: profiles.Command}, {Profile: profiles.ClaudeCode, CredentialEnv: "sk-ant-123 456"}} {
		_, err := profiles.Render(s, ep)
		assert.Error(t, err, "%+v", s)
	}
	assert.NotContains(t, func() string {
		_, err := profiles.Render(profiles.Spec{Profile: profiles.ClaudeCode, CredentialEnv: "sk-ant-123 456"}, ep)
		return err.Error()
	}(), "sk-ant")
}

func TestAllowedIsTheWholeList(t *testing.T) {
	t.Parallel()
	p, err := profiles.Render(profiles.Spec{Profile: profiles.ClaudeCode, CredentialEnv: "MY_KEY", PassEnv: []string{"GOPROXY", "PATH"}}, ep)
	require.NoError(t, err)
	assert.Equal(t, profiles.Allowed(profiles.Spec{Profile: profiles.ClaudeCode, CredentialEnv: "MY_KEY", PassEnv: []string{"GOPROXY", "PATH"}}), p.PassEnv)
	assert.Subset(t, p.PassEnv, []string{"PATH", "HOME", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "MY_KEY", "GOPROXY"})
	assert.NotContains(t, p.PassEnv, "OPENAI_API_KEY", "another profile's credential")
	assert.NotContains(t, p.PassEnv, "GH_TOKEN")
	assert.IsNonDecreasing(t, p.PassEnv)

	env := profiles.Filter([]string{"PATH=/bin", "GH_TOKEN=ghp_x", "GOPROXY=off", "TOOLSCOPE_AGENTCTL_SECRET=s", "MY_KEY=k", "BROKEN"}, p.PassEnv)
	assert.Equal(t, []string{"PATH=/bin", "GOPROXY=off", "MY_KEY=k"}, env)
}

func TestPassEnvNamesAreValidated(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "1X", "A-B", "A=B", "TOOLSCOPE_AGENTCTL_SECRET", "toolscope_mcp_token", "ghp_abc def"} {
		err := profiles.Spec{Profile: profiles.Command, Args: []string{"x"}, PassEnv: []string{bad}}.Validate()
		assert.Error(t, err, "%q", bad)
	}
	assert.NoError(t, profiles.Spec{Profile: profiles.Command, Args: []string{"x"}, PassEnv: []string{"GOPROXY", "_X1"}}.Validate())
	many := make([]string, profiles.MaxPassEnv+1)
	for i := range many {
		many[i] = "V"
	}
	assert.Error(t, profiles.Spec{PassEnv: many}.Validate())
}
