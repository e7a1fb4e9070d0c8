package daemon_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/logdir"
	"github.com/toolscope/toolscope/internal/testutil"
)

// Before: agent.log grew as long as the agent wrote (1.2 MB here, and
// without end for a chatty agent), and the exit tail and the backlog were
// fixed constants. The agent's output now goes through agentctl, which
// rotates the log at half its bound.
func TestAnAgentsLogIsBoundedAndKeepsItsLatestOutput(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	h := newHarnessWith(t, func(o *daemon.Options) {
		o.AgentLogMax, o.ExitTailLines, o.ExitTailBytes, o.LogBacklog = max, 3, 100, 8<<10
	})
	_, events := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{} })
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{os.Args[0]}, Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "flood"}}
	h.create(t, sp)
	var exited *agentctlv1.SessionEvent
	deadline := time.After(2 * time.Minute)
	for exited == nil {
		select {
		case e := <-events:
			if e.GetKind() == agentctlv1.SessionEventKind_SESSION_EVENT_KIND_AGENT_EXITED {
				exited = e
			}
		case <-deadline:
			t.Fatal("no agent_exited event within 30 s")
		}
	}
	assert.Equal(t, int32(4), exited.GetAgentExitCode())
	assert.Equal(t, "line 099998\nline 099999\nline 100000", exited.GetAgentOutputTail(), "--exit-tail-lines 3")

	dir := filepath.Join(h.stateDir, "sessions", "s1")
	size := func(name string) int64 {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return 0
		}
		return info.Size()
	}
	total := size("agent.log") + size("agent.log.1")
	assert.LessOrEqual(t, total, int64(max), "agent.log and agent.log.1 within --agent-log-max-bytes")
	assert.GreaterOrEqual(t, total, int64(max/2), "at least half the bound of the latest output is kept")
	last, err := os.ReadFile(filepath.Join(dir, "agent.log"))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(last), "line 100000\n"))

	stream, err := h.client.ReadAgentLog(context.Background(), &agentctlv1.ReadAgentLogRequest{SessionId: "s1"})
	require.NoError(t, err)
	var read []byte
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		read = append(read, m.GetData()...)
	}
	assert.Len(t, read, 8<<10, "--log-backlog 8 KiB, across the rotated part")
	assert.True(t, strings.HasSuffix(string(read), "line 100000\n"))
	lines := strings.Split(strings.TrimSuffix(string(read), "\n"), "\n")
	for i := 1; i < len(lines)-1; i++ { // the first may be cut
		require.Len(t, lines[i], len("line 000000"), "no line lost or torn at the rotation: %q", lines[i])
	}

	_, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	kept, err := os.ReadFile(filepath.Join(h.stateDir, "logs", "s1", "agent.log"))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(kept), max)
	assert.True(t, strings.HasSuffix(string(kept), "line 100000\n"), "the kept log ends with the agent's last line")
	stream, err = h.client.ReadAgentLog(context.Background(), &agentctlv1.ReadAgentLogRequest{SessionId: "s1", Follow: true})
	require.NoError(t, err)
	m, err := stream.Recv()
	require.NoError(t, err, "the stopped session's kept log is served")
	assert.Len(t, m.GetData(), 8<<10)
	assert.True(t, strings.HasSuffix(string(m.GetData()), "line 100000\n"))
	_, err = stream.Recv()
	assert.ErrorIs(t, err, io.EOF, "not followed")
	testutil.Figure(t, "agent log bound", "1,200,000 bytes written; %d bytes in agent.log + agent.log.1 (bound %d), %d kept after stop; exit tail 3 lines; backlog %d bytes",
		total, max, len(kept), len(read))
}

// Before: LOGS_DIR/<session>/ of stopped sessions were kept for ever.
// The oldest stopped sessions' logs are now removed when a session stops,
// beyond --logs-max-bytes; a hosted session's never are.
func TestStoppedSessionsLogsAreBoundedNeverALiveOnes(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *daemon.Options) { o.KeptLogs = logdir.Bound{MaxBytes: 4 << 10} })
	logs := filepath.Join(h.stateDir, "logs")
	old := time.Now().Add(-time.Hour)
	for _, id := range []string{"old", "live"} {
		require.NoError(t, os.MkdirAll(filepath.Join(logs, id), 0o700))
		p := filepath.Join(logs, id, "agent.log")
		require.NoError(t, os.WriteFile(p, make([]byte, 8<<10), 0o600))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	h.create(t, spec("live", agentctlv1.SessionMode_SESSION_MODE_TASK, 1))
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{os.Args[0]}, Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "wait"}}
	h.create(t, sp)
	_, err := h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.NoDirExists(t, filepath.Join(logs, "old"), "the oldest stopped session's logs went first")
	assert.FileExists(t, filepath.Join(logs, "live", "agent.log"), "a hosted session's logs stay, however old")
	assert.FileExists(t, filepath.Join(logs, "s1", "agent.log"), "the newest stopped session's log fits")
}
