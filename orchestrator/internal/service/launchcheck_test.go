package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
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
	exec, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), OrchestratorID: t.Name()})
	require.NoError(t, err)
	l := newLiveOn(t, exec, service.Options{AgentEnv: []string{"ORIENT_TEST_KEY_NEVER_SET"}})
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

// TestDryRunReportsWhatPreflightWouldRefuse: a dry run shows the plan and
// what the executor's preflight would refuse (or that the executor is not
// there), and records nothing (issue 19).
func TestDryRunReportsWhatPreflightWouldRefuse(t *testing.T) {
	t.Parallel()
	l := newLive(t, 0)
	task := l.task(t, "local0")
	ctx := context.Background()
	before := lastSeq(t, l.st, task.ID)

	plan, err := l.svc.DryRun(ctx, service.SessionInput{TaskID: task.ID, Executor: "local", AgentArgv: []string{"/nowhere/agent"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"/nowhere/agent"}, plan.Argv, "the plan is shown")
	assert.Contains(t, plan.Refused, "launch refused on the local executor")
	assert.Contains(t, plan.Refused, "agent command `/nowhere/agent` not found")

	plan, err = l.svc.DryRun(ctx, service.SessionInput{TaskID: task.ID, Executor: "local", AgentArgv: []string{"/bin/sh", "-c", "true"}})
	require.NoError(t, err)
	assert.Empty(t, plan.Refused, "a launch that would pass")

	plan, err = l.svc.DryRun(ctx, service.SessionInput{TaskID: task.ID, Executor: "docker", Image: "busybox"})
	require.NoError(t, err)
	assert.Contains(t, plan.Refused, `executor "docker"`, "an executor this orchestrator does not run")

	list, err := l.svc.ListSessions(ctx, task.ID)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Equal(t, before, lastSeq(t, l.st, task.ID), "a dry run records nothing")
}

// TestResumePreflights: a resume that would start an agent the executor
// can no longer start is refused before anything happens, and the session
// is left as it was (issue 19).
func TestResumePreflights(t *testing.T) {
	t.Parallel()
	l := newLive(t, 0)
	task := l.task(t, "local0")
	ctx := context.Background()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		require.NoError(t, os.Chmod(d, 0o755)) // the agent runs under a uid of its own
	}
	agent := filepath.Join(dir, "agent")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755))
	sess, err := l.svc.LaunchSession(ctx, service.SessionInput{TaskID: task.ID, Executor: "local", AgentArgv: []string{agent}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = l.svc.StopSession(context.Background(), sess.ID, false) })
	stopped, err := l.svc.StopSession(ctx, sess.ID, false)
	require.NoError(t, err)
	require.NoError(t, os.Remove(agent))
	before := lastSeq(t, l.st, task.ID)

	_, err = l.svc.ResumeSession(ctx, sess.ID)
	require.Error(t, err)
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound)
	assert.Contains(t, err.Error(), "resume refused on the local executor, session "+sess.ID+" left as it was")
	now, err := l.svc.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, stopped.State, now.State)
	assert.Equal(t, before, lastSeq(t, l.st, task.ID), "a refused resume records nothing")
}
