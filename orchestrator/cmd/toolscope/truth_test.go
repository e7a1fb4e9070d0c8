package main

// Session truth (issue 16): what happens to a session's agent reaches the
// orchestrator's record, and a launch that cannot start its agent says why.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/procs"
	"github.com/toolscope/toolscope/internal/testutil"
)

// stopAndCount stops a session and counts the agent.exited events of its
// task up to the session's end, returning the last one.
func stopAndCount(t *testing.T, srv *orchestrator, task, sid string) (int, *pb.TaskEvent) {
	t.Helper()
	assert.Contains(t, srv.ok(t, "--json", "session", "stop", sid), "stopped")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
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
	assert.Equal(t, "running", got["state"], "agentctl still serves the session's MCP endpoint")
	assert.Contains(t, got["status_message"], "agent exited with code 3")
	assert.EqualValues(t, 3, got["agent_exit_code"])
	assert.Contains(t, srv.ok(t, "session", "get", sid), "agent exited with code 3", "the text output shows it too")

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
	}, 2*time.Minute, 20*time.Millisecond, "the agent exits")

	srv = startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	require.Eventually(t, func() bool {
		return strings.Contains(fmt.Sprint(srv.session(t, sid)["status_message"]), "agent exited with code 7")
	}, 2*time.Minute, 20*time.Millisecond)
	assert.Equal(t, "running", srv.session(t, sid)["state"])
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

// liveAgentctls returns the pids of the live (not zombie) agentctl
// processes of a local session.
func liveAgentctls(dataDir, sessionID string) []int {
	secret := filepath.Join(dataDir, "sessions", sessionID, "secret")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if slices.Contains(strings.Split(string(cmdline), "\x00"), secret) && procs.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestAZombieAgentctlIsLostAndResumable: on a machine whose init reaps
// orphans slowly, a killed agentctl that an earlier orchestrator started
// stays a zombie, on which kill(pid, 0) succeeds. It is still recorded
// lost, and resume relaunches the session.
func TestAZombieAgentctlIsLostAndResumable(t *testing.T) {
	// Not parallel: the test process is, meanwhile, the subreaper of the
	// orphans made (the first orchestrator's agentctl) and reaps it only
	// at the end, as a slow init would.
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0, 0, 0, 0)
	require.Zero(t, errno)
	t.Cleanup(func() { _, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0, 0, 0, 0) })

	agentctl := executortest.Agentctl(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", agentctl)
	task := newTask(t, srv)
	sid := srv.launchLocal(t, task)
	pid := agentctlPID(t, dataDir, sid)
	srv.stop(t)
	srv = startServer(t, dataDir, "--agentctl", agentctl) // re-attaches the orphan
	require.Equal(t, "running", srv.session(t, sid)["state"])

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	t.Cleanup(func() { _, _ = syscall.Wait4(pid, nil, 0, nil) })
	killed := time.Now()
	require.Eventually(t, func() bool {
		s, err := procs.State(pid)
		return err == nil && s == 'Z'
	}, 2*time.Minute, 5*time.Millisecond, "the killed agentctl is a zombie nobody reaps")
	require.NoError(t, syscall.Kill(pid, 0), "signal 0 is fooled by the zombie")

	require.Eventually(t, func() bool { return srv.session(t, sid)["state"] == "failed" }, 2*time.Minute, 20*time.Millisecond)
	lostAfter := time.Since(killed)
	r := srv.run(t, "--json", "session", "resume", sid)
	require.Equal(t, 0, r.code, "resume: %s", r.stderr)
	assert.Contains(t, r.stdout, "running")
	assert.Len(t, liveAgentctls(dataDir, sid), 1, "one agentctl for the session")

	assert.Contains(t, srv.ok(t, "--json", "session", "stop", sid), "stopped")
	assert.Empty(t, liveAgentctls(dataDir, sid), "stop ends the session's agentctl")
	testutil.Figure(t, "zombie agentctl", "a killed, unreaped agentctl recorded lost %s after the kill; resume then relaunched it (exit 0)",
		lostAfter.Round(time.Millisecond))
}

// TestAFailedSessionWhoseAgentctlRunsIsStoppedAndResumedOnce: agentctl is
// frozen (SIGSTOP) while an orchestrator starts, so re-attaching fails
// and the session is recorded failed; agentctl then runs on. Stop ends it;
// resume after that, or resume at once, leaves exactly one agentctl.
func TestAFailedSessionWhoseAgentctlRunsIsStoppedAndResumedOnce(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", agentctl)
	task := newTask(t, srv)

	freezeAcrossRestart := func(sid string) int {
		pid := agentctlPID(t, dataDir, sid)
		srv.stop(t)
		// Frozen after its orchestrator is gone: stopped when its process
		// group is orphaned, the kernel would send it SIGHUP.
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		srv = startServer(t, dataDir, "--agentctl", agentctl)
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		got := srv.session(t, sid)
		require.Equal(t, "failed", got["state"], "re-attaching a frozen agentctl fails: %v", got["status_message"])
		require.Equal(t, []int{pid}, liveAgentctls(dataDir, sid), "its agentctl runs on")
		return pid
	}

	stopped := srv.launchLocal(t, task)
	freezeAcrossRestart(stopped)
	assert.Contains(t, srv.ok(t, "--json", "session", "stop", stopped), "stopped")
	assert.Empty(t, liveAgentctls(dataDir, stopped), "stop ends a failed session's agentctl")

	resumed := srv.launchLocal(t, task)
	old := freezeAcrossRestart(resumed)
	assert.Contains(t, srv.ok(t, "--json", "session", "resume", resumed), "running")
	live := liveAgentctls(dataDir, resumed)
	assert.Len(t, live, 1, "never two agentctls for one session")
	assert.NotContains(t, live, old, "the frozen one was replaced")
	srv.ok(t, "session", "stop", resumed)
	assert.Empty(t, liveAgentctls(dataDir, resumed))
}

// TestSessionLogsShowTheAgentsOutput: `session logs` prints a running
// session's agent log, scrubbed; `--follow` prints what the agent writes
// next and ends when it exits. A stopped session's log is the copy kept
// in the logs directory.
func TestSessionLogsShowTheAgentsOutput(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)
	gateDir, err := os.MkdirTemp("", "toolscope-gate-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(gateDir) })
	require.NoError(t, os.Chmod(gateDir, 0o755))
	gate := filepath.Join(gateDir, "go")
	token := "ghp_" + strings.Repeat("Zy9", 12)
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "local",
		"--agent", "command", "--", "sh", "-c",
		`echo first; echo "token `+token+`"; while [ ! -e "$0" ]; do sleep 0.02; done; echo second; exit 0`, gate)), &launched))
	sid := launched["id"].(string)

	var out string
	require.Eventually(t, func() bool {
		out = srv.ok(t, "session", "logs", sid)
		return strings.Contains(out, "token ")
	}, 2*time.Minute, 20*time.Millisecond)
	assert.Equal(t, "first\ntoken ghp_[redacted]\n", out, "the log so far, scrubbed")
	assert.NotContains(t, out, token)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	follow := command(ctx, "--server", srv.addr, "session", "logs", "--follow", sid)
	followed := &testutil.SyncBuffer{}
	follow.Stdout, follow.Stderr = followed, followed
	require.NoError(t, follow.Start())
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	require.Eventually(t, func() bool { return strings.Contains(followed.String(), "token ") }, 2*time.Minute, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	released := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err, "follow: %s", followed)
	case <-ctx.Done():
		t.Fatalf("session logs --follow did not end when the agent exited: %s", followed)
	}
	ended := time.Since(released)
	assert.Equal(t, "first\ntoken ghp_[redacted]\nsecond\n", followed.String())

	// agentctl's own log: followed until the session's agentctl ends, and
	// still there after.
	assert.Contains(t, srv.ok(t, "session", "logs", "--agentctl", sid), "session created")
	ctlFollow := command(ctx, "--server", srv.addr, "session", "logs", "--agentctl", "--follow", sid)
	ctlFollowed := &testutil.SyncBuffer{}
	ctlFollow.Stdout, ctlFollow.Stderr = ctlFollowed, ctlFollowed
	require.NoError(t, ctlFollow.Start())
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- ctlFollow.Wait() }()
	require.Eventually(t, func() bool { return strings.Contains(ctlFollowed.String(), "session created") }, 2*time.Minute, 10*time.Millisecond)

	srv.ok(t, "session", "stop", sid)
	select {
	case err := <-ctlDone:
		require.NoError(t, err, "follow --agentctl: %s", ctlFollowed)
	case <-ctx.Done():
		t.Fatalf("session logs --agentctl --follow did not end with agentctl: %s", ctlFollowed)
	}
	assert.Contains(t, ctlFollowed.String(), "session stopped")
	assert.Contains(t, srv.ok(t, "session", "logs", "--agentctl", sid), "session stopped", "kept after the session stopped")
	// The agent's log of the stopped session: the copy kept in the logs
	// directory (before: exit 5, "no longer runs").
	assert.Equal(t, "first\ntoken ghp_[redacted]\nsecond\n", srv.ok(t, "session", "logs", sid), "kept after the session stopped, scrubbed")
	assert.Equal(t, "first\ntoken ghp_[redacted]\nsecond\n", srv.ok(t, "session", "logs", "--follow", sid), "following a stopped session's log ends at once")
	r := srv.run(t, "session", "logs", "--agent", "--agentctl", sid)
	assert.Equal(t, 2, r.code, r.stderr)
	testutil.Figure(t, "session logs --follow", "the agent's last line and the end of the stream %s after the agent was let go",
		ended.Round(time.Millisecond))
}

// TestARefusedLaunchLeavesNoSession: a launch refused before its session
// started (agent command not found, locally; an image missing from the
// Docker engine) leaves no session record, so `session list` shows only
// sessions that ran.
func TestARefusedLaunchLeavesNoSession(t *testing.T) {
	t.Parallel()
	executortest.RequireDocker(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t))
	task := newTask(t, srv)

	refused := [][]string{
		{"--executor", "local", "--agent", "command", "--", "/nowhere/agent"},
		{"--executor", "docker", "--image", "toolscope-no-such-image:0"},
	}
	for _, args := range refused {
		r := srv.run(t, append([]string{"session", "launch", task}, args...)...)
		assert.Equal(t, 5, r.code, "%v: refused; stderr: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "no session kept", args)
	}
	list := srv.ok(t, "--json", "session", "list", task)
	assert.NotContains(t, list, "sess_", "refused launches are not listed")
	assert.NotContains(t, list, "failed")
	assert.NotContains(t, list, "pending")
	sessions, err := os.ReadDir(filepath.Join(dataDir, "sessions"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	assert.Empty(t, sessions, "no session directory is left")
	testutil.Figure(t, "refused launches", "%d of %d refused launches (local agent not found, docker image missing) left no session record and no directory", len(refused), len(refused))
}

// TestServeBoundsTheKeptLogs: <data-dir>/logs kept every stopped
// session's logs for ever. `toolscope serve --logs-max-bytes` now removes
// the oldest stopped sessions' logs, at start and after each stop, never
// a session's that is not stopped.
func TestServeBoundsTheKeptLogs(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	logs := filepath.Join(dataDir, "logs")
	require.NoError(t, os.MkdirAll(filepath.Join(logs, "from-last-year"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(logs, "from-last-year", "agent.log"), make([]byte, 4096), 0o600))
	srv := startServer(t, dataDir, "--agentctl", executortest.Agentctl(t), "--logs-max-bytes", "1")
	assert.NoDirExists(t, filepath.Join(logs, "from-last-year"), "removed at start: over the bound")

	task := newTask(t, srv)
	launch := func() string {
		var launched map[string]any
		require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "session", "launch", task, "--executor", "local",
			"--agent", "command", "--", "sh", "-c", "echo working; sleep 60")), &launched))
		return launched["id"].(string)
	}
	live, stopped := launch(), launch()
	require.Eventually(t, func() bool {
		return strings.Contains(srv.ok(t, "session", "logs", stopped), "working")
	}, 2*time.Minute, 20*time.Millisecond)
	srv.ok(t, "session", "stop", stopped)
	assert.NoDirExists(t, filepath.Join(logs, stopped), "a stopped session's logs over the bound are removed at its stop")
	assert.FileExists(t, filepath.Join(logs, live, "agentctl.log"), "a running session's logs stay, whatever the bound")
	r := srv.run(t, "serve", "--logs-max-bytes", "-1")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--logs-max-bytes")
}
