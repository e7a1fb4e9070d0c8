package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// TestLaunchChecksRefuseBeforeSpawning: an incompatible profile/model
// pair, an agent binary missing from the PATH the local executor gives
// agentctl, and a credential variable the user named but the executor's
// environment lacks are refused before a session is recorded: the error
// names what the user typed, and no session (nor its event) is left.
func TestLaunchChecksRefuseBeforeSpawning(t *testing.T) {
	t.Parallel()
	l := newLive(t, 0)
	task := l.task(t, "local0")
	ctx := context.Background()
	const unset = "ORIENT_TEST_KEY_NEVER_SET"
	cases := []struct {
		name  string
		in    service.SessionInput
		is    error
		typed string
	}{
		{"codex given a Claude model", service.SessionInput{AgentProfile: profiles.Codex, AgentModel: "claude-sonnet-4-5"},
			errdefs.ErrInvalidArgument, `"claude-sonnet-4-5"`},
		{"claude-code given an OpenAI model", service.SessionInput{AgentProfile: profiles.ClaudeCode, AgentModel: "gpt-5"},
			errdefs.ErrInvalidArgument, `"gpt-5"`},
		{"agent binary not on the PATH", service.SessionInput{AgentArgv: []string{"/nowhere/agent"}},
			profiles.ErrAgentNotFound, "`/nowhere/agent`"},
		{"credential variable unset", service.SessionInput{AgentProfile: profiles.Command, AgentArgv: []string{"/bin/sh", "-c", "true"}, AgentCredentialEnv: unset},
			profiles.ErrCredentialUnset, `"` + unset + `"`},
	}
	before := lastSeq(t, l.st, task.ID)
	for _, c := range cases {
		c.in.TaskID, c.in.Executor = task.ID, "local"
		_, err := l.svc.LaunchSession(ctx, c.in, nil)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, c.is, c.name)
		assert.Contains(t, err.Error(), c.typed, "%s: the error names what the user typed", c.name)
	}
	list, err := l.svc.ListSessions(ctx, task.ID)
	require.NoError(t, err)
	assert.Empty(t, list, "a refused launch leaves no session record")
	assert.Equal(t, before, lastSeq(t, l.st, task.ID), "a launch refused before spawning records nothing at all")
}
