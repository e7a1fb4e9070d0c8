package main

// Session truth (issue 16): what happens to a session's agent reaches the
// orchestrator's record, and a launch that cannot start its agent says why.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/testutil"
)

// stopAndCount stops a session and counts the agent.exited events of its
// task up to the session's end, returning the last one.
func stopAndCount(t *testing.T, srv *orchestrator, task, sid string) (int, *pb.TaskEvent) {
	t.Helper()
	assert.Contains(t, srv.ok(t, "--json", "session", "stop", sid), "SESSION_STATE_STOPPED")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := pb.NewEventServiceClient(dial(t, srv.addr)).WatchTaskEvents(ctx, &pb.WatchTaskEventsRequest{TaskId: task})
	require.NoError(t, err)
	n, last := 0, (*pb.TaskEvent)(nil)
	for {
		resp, err := stream.Recv()
		require.NoError(t, err)
		e := resp.GetEvent()
		switch {
		case e.GetSessionId() != sid:
		case e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED:
			n, last = n+1, e
		case e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_SESSION_ENDED:
			return n, last
		}
	}
}

// TestAnAgentThatExitsIsRecorded: an agent that exits on its own is
// recorded at once with its exit code and the last lines of its output
// (bounded, scrubbed) as a agent.exited event, and the session's
// status says so; it stays running, serving MCP, until it is stopped. The
// exit is recorded once, however often the session is read, and across an
// orchestrator restart.
func TestAnAgentThatExitsIsRecorded(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)

	token := "ghp_" + strings.Repeat("Ab1", 12)
	script := fmt.Sprintf(`for i in $(seq 1 30); do echo "line $i"; done; echo "token %s"; exit 3`, token)
	start := time.Now()
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "local",
		"--agent", "command", "--", "sh", "-c", script)), &launched))
	sid := launched["id"].(string)
	ev := waitEvent(t, srv, task, pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED)
	elapsed := time.Since(start)
	assert.Equal(t, sid, ev.GetSessionId())
	msg := ev.GetMessage()
	assert.Contains(t, msg, "agent exited with code 3")
	assert.Contains(t, msg, "line 30\n")
	assert.NotContains(t, msg, "line 10\n", "only the last 20 lines")
	assert.Contains(t, msg, "token ghp_[redacted]")
	assert.NotContains(t, msg, token, "the output is scrubbed")

	got := srv.session(t, sid)
	assert.Equal(t, "SESSION_STATE_RUNNING", got["state"], "agentctl still serves the session's MCP endpoint")
	assert.Contains(t, got["status_message"], "agent exited with code 3")

	srv.stop(t)
	srv = startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	assert.Contains(t, srv.session(t, sid)["status_message"], "agent exited with code 3")
	n, _ := stopAndCount(t, srv, task, sid)
	assert.Equal(t, 1, n, "recorded once")
	testutil.Figure(t, "agent exit recorded", "%s from launch to the agent.exited event (exit code 3, last 20 of 31 lines)",
		elapsed.Round(time.Millisecond))
}

// TestAnAgentThatExitsWhileTheOrchestratorIsDownIsRecorded: agentctl's
// event has no orchestrator to go to; the next look at the session finds
// the agent gone and records the exit, with its output, once.
func TestAnAgentThatExitsWhileTheOrchestratorIsDownIsRecorded(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)
	// The agent may run under a uid of its own: its gate is where it can look.
	gateDir, err := os.MkdirTemp("", "toolscope-gate-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(gateDir) })
	require.NoError(t, os.Chmod(gateDir, 0o755))
	gate := filepath.Join(gateDir, "go")
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "local",
		"--agent", "command", "--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done; echo bye; exit 7`, gate)), &launched))
	sid := launched["id"].(string)
	log := filepath.Join(sessionDir(t, dataDir, sid), "agent.log")

	srv.stop(t)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "bye")
	}, 30*time.Second, 20*time.Millisecond, "the agent exits")

	srv = startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	require.Eventually(t, func() bool {
		return strings.Contains(fmt.Sprint(srv.session(t, sid)["status_message"]), "agent exited with code 7")
	}, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, "SESSION_STATE_RUNNING", srv.session(t, sid)["state"])
	n, exited := stopAndCount(t, srv, task, sid)
	assert.Equal(t, 1, n, "recorded once")
	assert.Contains(t, exited.GetMessage(), "agent exited with code 7; last output:\nbye")
}

// TestALaunchWhoseAgentCannotStartSaysWhy: the cause of a launch whose
// agent command cannot be started reaches the CLI, with the precondition
// exit code, instead of "internal error".
func TestALaunchWhoseAgentCannotStartSaysWhy(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	// agentctl inherits this PATH, on which there is no claude.
	srv := startServerEnv(t, dataDir, []string{"PATH=/usr/bin:/bin"}, "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "claude-code"}, "agent command `claude` not found on the executor's PATH"},
		{[]string{"--agent", "command", "--", "no-such-agent", "--flag"}, "agent command `no-such-agent` not found on the executor's PATH"},
		{[]string{"--agent", "command", "--", "/nowhere/agent"}, "agent command `/nowhere/agent` not found on the executor"},
	} {
		r := srv.run(t, append([]string{"session", "launch", task, "--executor", "local"}, c.args...)...)
		assert.Equal(t, 5, r.code, "%v: the precondition exit code; stderr: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.args)
		assert.NotContains(t, r.stderr, "internal error", c.args)
	}
}
