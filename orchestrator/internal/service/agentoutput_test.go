package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// printedSecret is a line an agent printed that no scrubber rule knows:
// only the role rule keeps it from a reader.
const printedSecret = "cat notes/prod.txt: the vault unseal phrase is ZEBRA-OCTOPUS-4471"

// printedOutput is what the agent printed, its last line the secret.
const printedOutput = "reading the notes\n" + printedSecret

// printing is the fake backend whose sessions' agent log holds output,
// as a real agentctl's would after the agent printed it.
func printing(output string) *fake.Executor {
	e := fake.New("local")
	e.AgentOutput = output
	return e
}

// as is ctx carrying a person of role, as the access layer leaves it.
func as(role model.Role) context.Context {
	return model.WithActor(context.Background(), model.Actor{Kind: model.ActorPerson, Name: string(role) + "-1", Role: role})
}

// agentExited watches a task's stored events as ctx's caller and returns
// the messages of the agent.exited events of session sid.
func agentExited(ctx context.Context, t *testing.T, l *live, taskID, sid string) []string {
	t.Helper()
	last := lastSeq(t, l.st, taskID)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var msgs []string
	require.NoError(t, l.svc.WatchTaskEvents(ctx, taskID, 0, func(e model.Event) error {
		if e.Kind == model.EventAgentExited && e.SessionID == sid {
			msgs = append(msgs, e.Message)
		}
		if e.Seq >= last {
			cancel()
		}
		return nil
	}))
	require.NotEmpty(t, msgs)
	return msgs
}

// TestViewersReadThatTheAgentExitedNeverItsOutput replays the attack on
// the service every event reader goes through: a session's agent printed
// a secret line and exited. A viewer watching the task's events reads
// that the agent exited and its code, never the line; a caller ctx does
// not name reads the same (fail-closed). A member and an admin read the
// recorded tail, and a member reads the whole output in the session's log.
// An agent.exited event stored in another form (an older release's) keeps
// nothing after its first clause for a viewer either.
func TestViewersReadThatTheAgentExitedNeverItsOutput(t *testing.T) {
	t.Parallel()
	exec := printing(printedOutput)
	l := newLiveOn(t, exec, service.Options{})
	task := l.task(t, "github")
	sess := l.launch(t, task.ID)
	l.svc.SessionEvent(executors.SessionEvent{SessionID: sess.ID, Kind: executors.EventAgentExited, AgentExitCode: 3, AgentOutput: printedOutput})

	stored, err := l.st.Events(context.Background(), task.ID, 0, 1000)
	require.NoError(t, err)
	var recorded string
	for _, e := range stored {
		if e.Kind == model.EventAgentExited {
			recorded = e.Message
		}
	}
	require.Contains(t, recorded, printedSecret, "the store keeps the tail (scrubbed): members read it")

	for name, ctx := range map[string]context.Context{"viewer": as(model.RoleViewer), "no caller": context.Background(), "unknown role": as("guest")} {
		msgs := agentExited(ctx, t, l, task.ID, sess.ID)
		require.Len(t, msgs, 1, name)
		assert.NotContains(t, msgs[0], "ZEBRA-OCTOPUS", name)
		assert.NotContains(t, msgs[0], "reading the notes", name)
		assert.Equal(t, "agent exited with code 3; its output is withheld: reading it (toolscope session logs) needs role member", msgs[0], name)
	}
	for _, role := range []model.Role{model.RoleMember, model.RoleAdmin} {
		assert.Equal(t, []string{recorded}, agentExited(as(role), t, l, task.ID, sess.ID), role)
	}

	var log strings.Builder
	require.NoError(t, l.svc.ReadSessionLog(as(model.RoleMember), sess.ID, service.LogAgent, false, func(s string) error {
		log.WriteString(s)
		return nil
	}))
	assert.Contains(t, log.String(), printedSecret, "a member reads the output in the session's log")

	// An agent.exited event recorded in a form this release never writes.
	other := l.launch(t, task.ID)
	_, err = l.st.UpdateSession(context.Background(), other.ID, func(*model.Session) ([]model.Event, error) {
		return []model.Event{{Kind: model.EventAgentExited, Message: "agent exited with code 1\n" + printedSecret}}, nil
	})
	require.NoError(t, err)
	msgs := agentExited(as(model.RoleViewer), t, l, task.ID, other.ID)
	assert.Equal(t, []string{"agent exited with code 1; its output is withheld: reading it (toolscope session logs) needs role member"}, msgs)
	assert.Equal(t, []string{"agent exited with code 1\n" + printedSecret}, agentExited(as(model.RoleMember), t, l, task.ID, other.ID))
}
