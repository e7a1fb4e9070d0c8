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
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode, Auth: profiles.AuthSubscription}, "", env),
		"a subscription launch needs no key: the agent logs in with its own")
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.Command, Args: []string{filepath.Join(bin, "claude")}}, "", env))
	assert.NoError(t, profiles.Preflight(profiles.Spec{Profile: profiles.Command, Args: []string{"./claude"}}, bin, env),
		"a relative command is taken from the work dir")

	err := profiles.Preflight(profiles.Spec{Profile: profiles.Codex, CredentialEnv: "MY_KEY"}, "", env)
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound, "a non-executable file is not the agent")
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), `"codex"`)

	err = profiles.Preflight(profiles.Spec{Profile: profiles.ClaudeCode, Auth: profiles.AuthSubscription}, "", []string{"PATH=/nowhere"})
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

// TestAuthIsExplicit (issue 32): --auth api-key, the default, passes the
// profile's key variables and refuses to start without one set, naming
// them; --auth subscription passes none, even when set (the agent logs in
// with its own), and refuses a key named for it; --auth is for the
// profiles that run a paid model only.
func TestAuthIsExplicit(t *testing.T) {
	bin := t.TempDir()
	for _, agent := range []string{"claude", "codex"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, agent), []byte("#!/bin/sh\n"), 0o755))
	}
	assert.Equal(t, profiles.AuthAPIKey, profiles.DefaultAuth, "the default, as --help and docs/agents.md state it")
	withKeys := []string{"PATH=" + bin, "ANTHROPIC_API_KEY=sk-ant-value", "OPENAI_API_KEY=sk-openai-value", "WORK_KEY=sk-work-value"}

	for profile, keys := range profiles.KeyEnv {
		t.Run(profile, func(t *testing.T) {
			apiKey := profiles.Spec{Profile: profile}
			assert.NoError(t, profiles.Preflight(apiKey, "", withKeys))
			err := profiles.Preflight(apiKey, "", []string{"PATH=" + bin})
			require.ErrorIs(t, err, profiles.ErrCredentialUnset, "an api-key launch with no key set does not start")
			for _, k := range keys {
				assert.Contains(t, err.Error(), k, "the error names the variables it looked for")
			}
			assert.Contains(t, err.Error(), "--auth subscription", "and the way out")
			assert.Subset(t, profiles.Allowed(apiKey), keys)

			sub := profiles.Spec{Profile: profile, Auth: profiles.AuthSubscription}
			require.NoError(t, sub.Validate())
			assert.NoError(t, profiles.Preflight(sub, "", []string{"PATH=" + bin}))
			passed := profiles.Filter(withKeys, profiles.Allowed(sub))
			for _, kv := range passed {
				assert.NotContains(t, kv, "sk-", "a subscription launch passes no key variable, even one that is set")
			}
			assert.Contains(t, passed, "PATH="+bin)

			for _, bad := range []profiles.Spec{
				{Profile: profile, Auth: profiles.AuthSubscription, CredentialEnv: "WORK_KEY"},
				{Profile: profile, Auth: profiles.AuthSubscription, PassEnv: []string{keys[0]}},
				{Profile: profile, Auth: "oauth"},
			} {
				assert.Error(t, bad.Validate(), "%+v", bad)
			}
		})
	}
	err := profiles.Spec{Profile: profiles.Command, Args: []string{"x"}, Auth: profiles.AuthSubscription}.Validate()
	assert.ErrorContains(t, err, "--auth is for the claude-code and codex profiles")
	assert.Equal(t, "", profiles.Spec{Profile: profiles.Command}.AuthOf(), "a command takes no auth")
	assert.Equal(t, profiles.AuthAPIKey, profiles.Spec{Profile: profiles.Codex}.AuthOf())
}

// TestUnknownModelsAreRefusedWithTheKnownNames (issue 32): a model name
// the profile does not know is refused, naming what the user typed and
// the names the profile knows; the aliases and the vendor's ids pass.
func TestUnknownModelsAreRefusedWithTheKnownNames(t *testing.T) {
	for _, ok := range []struct{ profile, model string }{
		{profiles.ClaudeCode, "sonnet"}, {profiles.ClaudeCode, "opus"}, {profiles.ClaudeCode, "claude-opus-4-1"},
		{profiles.ClaudeCode, "claude-sonnet-4-5-20250929"}, {profiles.ClaudeCode, "claude-3-7-sonnet-20250219"}, {profiles.ClaudeCode, ""},
		{profiles.Codex, "gpt-5"}, {profiles.Codex, "gpt-5.1-codex-max"}, {profiles.Codex, "o4-mini"}, {profiles.Codex, "codex-mini-latest"},
		{profiles.Command, "anything"},
	} {
		assert.NoError(t, profiles.CheckModel(ok.profile, ok.model), "%s with %s", ok.profile, ok.model)
	}
	for _, bad := range []struct{ profile, model, names string }{
		{profiles.ClaudeCode, "sonet", "sonnet, opus"},
		{profiles.ClaudeCode, "operator-proxy-model", "claude-<opus|sonnet|haiku>-<version>"},
		{profiles.Codex, "gpt5", "gpt-<version>"},
		{profiles.Codex, "llama3.1", "codex-mini-latest"},
	} {
		err := profiles.CheckModel(bad.profile, bad.model)
		require.ErrorIs(t, err, profiles.ErrUnknownModel, "%s with %s", bad.profile, bad.model)
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Contains(t, err.Error(), `"`+bad.model+`"`)
		assert.Contains(t, err.Error(), bad.names)
		assert.Contains(t, err.Error(), "--model-unchecked")
	}
}
