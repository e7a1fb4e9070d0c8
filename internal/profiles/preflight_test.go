package profiles_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
)

// TestValidateRefusesAModelOfTheOtherVendor: a Codex launch given an
// Anthropic model name (or Claude Code given an OpenAI one) is refused
// before anything starts, naming the model the user typed; names of
// neither family (local or proxied models) are left to the harness.
func TestValidateRefusesAModelOfTheOtherVendor(t *testing.T) {
	refused := []profiles.Spec{
		{Profile: profiles.Codex, Model: "claude-sonnet-4-5"},
		{Profile: profiles.Codex, Model: "opus"},
		{Profile: profiles.Codex, Model: "us.anthropic.claude-3-7-sonnet"},
		{Profile: profiles.ClaudeCode, Model: "gpt-5"},
		{Profile: profiles.ClaudeCode, Model: "o3"},
		{Profile: profiles.ClaudeCode, Model: "codex-mini-latest"},
	}
	for _, s := range refused {
		err := s.Validate()
		require.Error(t, err, "%s with %s", s.Profile, s.Model)
		assert.Contains(t, err.Error(), `"`+s.Model+`"`, "the error names what the user typed")
		assert.Contains(t, err.Error(), `"`+s.Profile+`"`)
	}
	accepted := []profiles.Spec{
		{Profile: profiles.Codex, Model: "gpt-5-codex"},
		{Profile: profiles.Codex, Model: "o4-mini"},
		{Profile: profiles.Codex, Model: "llama3.1"},
		{Profile: profiles.ClaudeCode, Model: "claude-opus-4-1"},
		{Profile: profiles.ClaudeCode, Model: "sonnet"},
		{Profile: profiles.ClaudeCode, Model: "anthropic.claude-3-5-sonnet"},
		{Profile: profiles.ClaudeCode, Model: "operator-proxy-model"},
		{Profile: profiles.Command, Args: []string{"x"}, Model: "gpt-5"},
	}
	for _, s := range accepted {
		assert.NoError(t, s.Validate(), "%s with %s", s.Profile, s.Model)
	}
}

// TestPreflight: the agent binary is looked up on the PATH of the
// environment agentctl will get, not the caller's; a credential variable
// the user named must be set there; the error names what the user typed
// and never a value.
func TestPreflight(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "codex"), []byte("not executable"), 0o644))
	env := []string{"PATH=" + bin, "MY_KEY=sk-secret-value"}

	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode, CredentialEnv: "MY_KEY"}, "", env))
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode}, "", env),
		"no credential_env typed: the profile may log in otherwise")
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.Command, Args: []string{filepath.Join(bin, "claude")}}, "", env))
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.Command, Args: []string{"./claude"}}, bin, env),
		"a relative command is taken from the work dir")

	err := profiles.Preflight(profiles.Spec{Profile: profiles.Codex}, "", env)
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound, "a non-executable file is not the agent")
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), `"codex"`)

	err = profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode}, "", []string{"PATH=/nowhere"})
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound, "the caller's own PATH is not consulted")

	err = profiles.Preflight(profiles.Spec{Profile: profiles.Command, Args: []string{"/nowhere/agent"}}, "", env)
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound)
	assert.Contains(t, err.Error(), "agent command `/nowhere/agent` not found on the executor")

	err = profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode, CredentialEnv: "MISSING_KEY"}, "", env)
	assert.ErrorIs(t, err, profiles.ErrCredentialUnset)
	assert.Contains(t, err.Error(), `"MISSING_KEY"`)
	assert.NotContains(t, err.Error(), "sk-secret-value")
	assert.False(t, errors.Is(err, profiles.ErrAgentNotFound))
}
