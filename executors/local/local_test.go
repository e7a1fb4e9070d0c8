package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, executortest.RemoveBuilds))
}

func TestConformance(t *testing.T) {
	executortest.Run(t, backend(t))
}

// TestContract runs the agentctl contract suite over local sessions: a
// real agentctl process, reached over real gRPC on loopback.
func TestContract(t *testing.T) {
	executortest.Contract(t, backend(t))
}

func backend(t *testing.T) executortest.Backend {
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir() // shared by every executor: a restart keeps it
	// Agents under uids of their own traverse the workspaces' parents.
	require.NoError(t, os.Chmod(filepath.Dir(stateDir), 0o711))
	require.NoError(t, os.Chmod(stateDir, 0o711))
	return executortest.Backend{
		New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			e, err := local.New(local.Options{Agentctl: agentctl, StateDir: stateDir, WorkspacesDir: filepath.Join(stateDir, "workspaces"),
				Calls: calls, Events: events, OrchestratorID: t.Name()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Close() })
			return e
		},
		Kill: func(t *testing.T, h executors.Handle) {
			var st struct {
				PID int `json:"pid"`
			}
			require.NoError(t, json.Unmarshal(h.State, &st))
			require.NoError(t, syscall.Kill(-st.PID, syscall.SIGKILL))
		},
		ReportsLoss: true,
		Workspaces:  &executortest.Workspaces{Host: "127.0.0.1"},
		Agent:       []string{"sh", "-c", "echo an agent; echo done"},
		Printed:     "an agent\ndone",
		Control: func(t *testing.T, h executors.Handle) executortest.Controller {
			var st struct {
				Addr       string `json:"addr"`
				SecretFile string `json:"secret_file"`
			}
			require.NoError(t, json.Unmarshal(h.State, &st))
			return executortest.Controller{Client: executortest.ControlWithSecret(t, st.Addr, st.SecretFile)}
		},
	}
}

// TestIsolation: an agent of a local session, run under a uid of its own
// (the orchestrator runs as root), reaches neither its agentctl's secret
// nor another session's files, and no secret of the orchestrator's
// environment reaches it or its agentctl.
func TestIsolation(t *testing.T) {
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir()
	executortest.RunIsolation(t, executortest.Isolation{
		Backend: executortest.Backend{New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			e, err := local.New(local.Options{Agentctl: agentctl, StateDir: stateDir, Calls: calls, Events: events, OrchestratorID: t.Name()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Close() })
			return e
		}},
		Probe:   executortest.Probe(t),
		Refusal: "Unauthenticated",
		// The host's network: the other session's agentctl, not every
		// port root listens on.
		Ports: func(t *testing.T, other executors.Handle) []string {
			var st struct {
				Addr string `json:"addr"`
			}
			require.NoError(t, json.Unmarshal(other.State, &st))
			_, port, err := net.SplitHostPort(st.Addr)
			require.NoError(t, err)
			return []string{port}
		},
		AgentctlEnviron: func(t *testing.T, h executors.Handle) []byte {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pidOf(t, h)))
			require.NoError(t, err)
			return b
		},
		OtherDirs: func(t *testing.T, h executors.Handle) []string {
			var st struct {
				SessionID   string `json:"session_id"`
				Dir         string `json:"dir"`
				SessionsDir string `json:"sessions_dir"`
			}
			require.NoError(t, json.Unmarshal(h.State, &st))
			return []string{filepath.Join(st.SessionsDir, st.SessionID), st.Dir, filepath.Join(st.Dir, "agentctl")}
		},
	})
}

func pidOf(t *testing.T, h executors.Handle) int {
	var st struct {
		PID int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	return st.PID
}

// TestWorkdirTheAgentCannotEnterIsAClearError: an agent under a uid of
// its own cannot enter a directory only root may; the launch fails naming
// the uid and the directory, and leaves nothing running.
func TestWorkdirTheAgentCannotEnterIsAClearError(t *testing.T) {
	executortest.RequireRoot(t)
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer e.Close()
	private := t.TempDir() // 0700, root's
	_, _, err = e.Launch(context.Background(), executors.Spec{SessionID: "workdir", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{executortest.Probe(t)}, WorkDir: private}}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "as uid")
	assert.Contains(t, err.Error(), private)
}

// TestAnAgentThatCannotReachItsToolsIsAClearError (issue 32): a Codex
// agent under a uid of its own that cannot run its stdio MCP server
// (`agentctl mcp`, with agentctl installed in a private directory) would
// start and silently have none of its tools. The launch fails instead,
// naming the path and the directory that stops it; with agentctl
// reachable, the same launch starts (an agent that exits at once, in
// place of the real CLI). (The local executor's session directories are
// always reachable; agentctl's own test covers a state directory that is
// not.)
func TestAnAgentThatCannotReachItsToolsIsAClearError(t *testing.T) {
	executortest.RequireRoot(t)
	private := t.TempDir() // 0700, root's
	open := testutil.TraversableDir(t)
	install := func(dir string) string {
		b, err := os.ReadFile(executortest.Agentctl(t))
		require.NoError(t, err)
		path := filepath.Join(dir, "agentctl")
		require.NoError(t, os.WriteFile(path, b, 0o755))
		return path
	}
	closed, reachable := install(private), install(open)
	bin := filepath.Join(open, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink("/bin/true", filepath.Join(bin, "codex")))
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	launch := func(agentctl, state, profile string) error {
		e, err := local.New(local.Options{Agentctl: agentctl, StateDir: state, OrchestratorID: t.Name()})
		require.NoError(t, err)
		defer e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		h, _, err := e.Launch(ctx, executors.Spec{SessionID: profile, TaskID: "t", Mode: executors.ModeTask,
			Agent: &executors.AgentCommand{Profile: profile, WorkDir: open}}, nil)
		if err == nil {
			_ = e.Stop(context.Background(), h)
		}
		return err
	}
	err := launch(closed, filepath.Join(open, "state"), "codex")
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, "the agent would have none of its tools: it runs "+closed)
	assert.ErrorContains(t, err, "may not enter "+filepath.Dir(private)+" ", "the directory that stops it")

	assert.NoError(t, launch(reachable, filepath.Join(open, "state-2"), "codex"), "reachable: it starts")
}

// TestLinksToDeadAgentctlsAreNeverRedialed is the case: after
// agentctls were killed, their links were redialed forever, still after
// the sessions were resumed. Each dead agentctl's address is taken over
// by a listener that counts the connections the orchestrator still
// makes to it: none, once the loss is reported.
func TestLinksToDeadAgentctlsAreNeverRedialed(t *testing.T) {
	const n = 5
	lost := make(chan string, n)
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), OrchestratorID: t.Name(),
		Calls: func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} },
		Events: func(ev executors.SessionEvent) {
			if ev.Kind == executors.EventLost {
				lost <- ev.SessionID
			}
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := runtime.NumGoroutine()

	specs := make([]executors.Spec, n)
	handles := make([]executors.Handle, n)
	for i := range specs {
		specs[i] = executors.Spec{SessionID: fmt.Sprintf("redial-%d", i), TaskID: "t", Mode: executors.ModeTask}
		handles[i], _, err = e.Launch(ctx, specs[i], nil)
		require.NoError(t, err)
	}
	for _, h := range handles {
		require.NoError(t, syscall.Kill(-pidOf(t, h), syscall.SIGKILL))
	}
	for range n {
		select {
		case <-lost:
		case <-ctx.Done():
			t.Fatal("not every killed agentctl was reported lost")
		}
	}
	// Take over the dead agentctls' addresses and count who still dials.
	var dialed atomic.Int64
	var listeners []net.Listener
	var accepting sync.WaitGroup
	for _, h := range handles {
		var st struct {
			Addr string `json:"addr"`
		}
		require.NoError(t, json.Unmarshal(h.State, &st))
		lis, err := net.Listen("tcp", st.Addr)
		require.NoError(t, err, "the dead agentctl's port is free")
		t.Cleanup(func() { _ = lis.Close() })
		listeners = append(listeners, lis)
		accepting.Go(func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				dialed.Add(1)
				_ = c.Close()
			}
		})
	}
	// Stop half of them, as `session stop` does, then resume every one
	// (a relaunch), as `session resume` does.
	for i := 0; i < n; i += 2 {
		require.NoError(t, e.Stop(ctx, handles[i]))
	}
	for i, s := range specs {
		h, _, err := e.Launch(ctx, s, nil)
		require.NoError(t, err)
		handles[i] = h
	}
	// A window for a negative: a link left open redials within its 2 s
	// backoff.
	window := time.NewTimer(3 * time.Second)
	<-window.C
	testutil.Figure(t, "links to killed agentctls", "%d connection attempts to %d dead agentctls in the 3 s after their sessions were resumed", dialed.Load(), n)
	assert.Zero(t, dialed.Load(), "a link to a dead agentctl must be closed, never redialed")
	for _, lis := range listeners {
		_ = lis.Close()
	}
	accepting.Wait()

	for _, h := range handles {
		require.NoError(t, e.Stop(ctx, h))
	}
	if !assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, time.Minute, 20*time.Millisecond,
		"goroutines: %d before the launches, %d after every session was stopped", before, runtime.NumGoroutine()) {
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
	testutil.Figure(t, "links to killed agentctls", "goroutines %d before %d launches, %d after kill, resume and stop", before, n, runtime.NumGoroutine())
}

// TestStoppedSessionsLeaveNoSecrets: once a session stops, no file under
// the data directory or the agent's sessions directory holds its launch
// secret or its MCP bearer token; its logs (agentctl's and the agent's)
// stay readable in the logs directory.
func TestStoppedSessionsLeaveNoSecrets(t *testing.T) {
	data := t.TempDir()
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: filepath.Join(data, "sessions"), OrchestratorID: t.Name(),
		Calls: func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	spec := executors.Spec{SessionID: "retire-1", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{"sh", "-c", "echo an agent; sleep 60"}}}
	h, status, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	require.NotEmpty(t, status.MCPToken)
	var st struct {
		SecretFile  string `json:"secret_file"`
		SessionsDir string `json:"sessions_dir"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	secret, err := os.ReadFile(st.SecretFile)
	require.NoError(t, err)
	scanner := testutil.NewLeakScanner(map[string]string{"launch secret": string(secret), "MCP token": status.MCPToken})
	roots := []string{data}
	if st.SessionsDir != "" {
		roots = append(roots, st.SessionsDir)
	}
	scan := func() (files int, leaks []string) {
		for _, root := range roots {
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				files++
				if hits := scanner.Find(b); len(hits) > 0 {
					leaks = append(leaks, path+": "+hits[0])
				}
				return nil
			})
		}
		return files, leaks
	}
	_, before := scan()
	require.NotEmpty(t, before, "while it runs, the session's files hold its secrets (the scan sees them)")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(st.SessionsDir, spec.SessionID, "agent.log"))
		if st.SessionsDir == "" {
			b, _ = os.ReadFile(filepath.Join(data, "sessions", spec.SessionID, "agentctl", "sessions", spec.SessionID, "agent.log"))
		}
		return len(b) > 0
	}, time.Minute, 20*time.Millisecond, "the agent writes its log")

	require.NoError(t, e.Stop(ctx, h))
	files, leaks := scan()
	assert.Empty(t, leaks, "after stop, no file holds a secret")
	assert.NoDirExists(t, filepath.Join(data, "sessions", spec.SessionID))
	if st.SessionsDir != "" {
		assert.NoDirExists(t, st.SessionsDir)
	}
	var log []byte
	require.NoError(t, e.AgentctlLog(ctx, h, false, func(b []byte) error {
		log = append(log, b...)
		return nil
	}), "agentctl's log is readable after stop")
	assert.NotEmpty(t, log)
	agentLog, err := os.ReadFile(filepath.Join(data, "logs", spec.SessionID, "agent.log"))
	require.NoError(t, err, "the agent's log is kept")
	assert.Contains(t, string(agentLog), "an agent")
	var kept []byte
	require.NoError(t, e.KeptAgentLog(ctx, h, func(b []byte) error {
		kept = append(kept, b...)
		return nil
	}), "the kept agent log is read after stop")
	assert.Equal(t, string(agentLog), string(kept))
	testutil.Figure(t, "local stop: files left, secrets in them", "%d files (logs) after stop, %d holding a secret (%d before stop)", files, len(leaks), len(before))
}

// TestALaunchRefusedForItsAgentUIDLeavesNoSecret: when every agent uid is
// taken (the local session limit), the refused launch leaves no directory
// with its launch secret.
func TestALaunchRefusedForItsAgentUIDLeavesNoSecret(t *testing.T) {
	executortest.RequireRoot(t)
	state := t.TempDir()
	uid := uint32(1_600_000_000 + os.Getpid()%1_000_000) // outside the default range, one per test process
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: state, OrchestratorID: t.Name(), AgentUIDs: agentuid.Single(uid),
		Calls: func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, _, err := e.Launch(ctx, executors.Spec{SessionID: "holds-the-uid", TaskID: "t", Mode: executors.ModeTask}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })

	_, _, err = e.Launch(ctx, executors.Spec{SessionID: "refused", TaskID: "t", Mode: executors.ModeTask}, nil)
	require.ErrorIs(t, err, errdefs.ErrResourceExhausted)
	assert.NoDirExists(t, filepath.Join(state, "refused"), "the refused launch's secret is not left")
}

// Before, the orchestrator's bounds for agentctl (the MCP endpoint's, the
// exit tail, the log bounds) stopped at the executor: every agentctl ran
// with its defaults. They now reach its command line, and it applies
// them.
func TestAgentctlIsStartedWithTheBoundsGiven(t *testing.T) {
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(t), StateDir: filepath.Join(t.TempDir(), "sessions"), OrchestratorID: t.Name(),
		Calls: func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} },
		AgentctlFlags: executors.AgentctlFlags{MCPMaxSessions: 7, MCPSessionIdle: 90 * time.Second, ExitTailLines: 2, AgentLogMax: 1 << 20,
			MCPEventBytes: 65536, MCPEventAge: 30 * time.Second}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, _, err := e.Launch(ctx, executors.Spec{SessionID: "bounds-1", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{"sh", "-c", "echo one; echo two; echo three; echo four; exit 6"}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pidOf(t, h)))
	require.NoError(t, err)
	args := strings.Join(strings.Split(string(cmdline), "\x00"), " ")
	for _, want := range []string{"--mcp-max-sessions 7", "--mcp-session-idle 1m30s", "--exit-tail-lines 2", "--agent-log-max-bytes 1048576",
		"--logs-max-bytes 0", "--mcp-event-bytes 65536", "--mcp-event-age 30s"} {
		assert.Contains(t, args, want)
	}
	var st executors.Status
	require.Eventually(t, func() bool {
		st, err = executors.NewController(map[string]executors.Executor{local.Name: e}).Inspect(ctx, h)
		return err == nil && st.Phase == executors.PhaseAgentExited
	}, 2*time.Minute, 20*time.Millisecond)
	assert.Equal(t, 6, st.AgentExitCode)
	assert.Equal(t, "three\nfour", st.AgentOutput, "agentctl applied --exit-tail-lines 2")
}
