package remote_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/remote"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/pki"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, executortest.RemoveBuilds))
}

// host is a "remote host": agentctl serve in a container of its own, with
// mutual TLS, its gRPC and MCP ports published on 127.0.0.1.
type host struct {
	cli       *client.Client
	id        string
	addr      string
	clientTLS pki.Pair
	ca        *pki.CA
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func startHost(t testing.TB) *host { return startHostWith(t, hostOptions{}) }

// hostOptions vary a host: more agentctl flags, its environment and
// mounts.
type hostOptions struct {
	args, env, binds []string
	// mcpPerSession lets the daemon pick a port per session (unpublished:
	// only agents inside the host reach them), so it hosts several.
	mcpPerSession bool
	// git: the host has git (executortest.GitImage), for workspaces.
	git bool
}

func startHostWith(t testing.TB, o hostOptions) *host {
	t.Helper()
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	if o.git {
		image = executortest.BuildGitImage(t, cli)
	}
	agentctl := executortest.Agentctl(t)
	ca, err := pki.NewCA("remote test CA", time.Hour)
	require.NoError(t, err)
	server, err := ca.IssueServer("agentctl", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	clientPair, err := ca.IssueClient("orchestrator", time.Hour)
	require.NoError(t, err)
	certs := t.TempDir()
	for name, body := range map[string][]byte{"server.crt": server.CertPEM, "server.key": server.KeyPEM, "ca.crt": ca.CertPEM} {
		require.NoError(t, os.WriteFile(filepath.Join(certs, name), body, 0o644))
	}
	grpcPort, mcpPort := freePort(t), freePort(t)
	ctx := context.Background()
	cmd := []string{"serve", "--listen", "0.0.0.0:" + grpcPort, "--tls-cert", "/certs/server.crt", "--tls-key", "/certs/server.key",
		"--client-ca", "/certs/ca.crt", "--mcp-host", "0.0.0.0", "--state-dir", "/tmp/agentctl"}
	if !o.mcpPerSession {
		cmd = append(cmd, "--mcp-port", mcpPort)
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image: image, Entrypoint: []string{"/toolscope/agentctl"},
		Cmd:          append(cmd, o.args...),
		Env:          o.env,
		ExposedPorts: nat.PortSet{nat.Port(grpcPort + "/tcp"): {}, nat.Port(mcpPort + "/tcp"): {}},
		Labels:       map[string]string{testutil.LabelTest: "remote-host"},
	}, &container.HostConfig{
		Binds: append([]string{agentctl + ":/toolscope/agentctl:ro", certs + ":/certs:ro"}, o.binds...),
		PortBindings: nat.PortMap{
			nat.Port(grpcPort + "/tcp"): {{HostIP: "127.0.0.1", HostPort: grpcPort}},
			nat.Port(mcpPort + "/tcp"):  {{HostIP: "127.0.0.1", HostPort: mcpPort}},
		},
	}, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	require.NoError(t, cli.ContainerStart(ctx, created.ID, container.StartOptions{}))
	return &host{cli: cli, id: created.ID, addr: "127.0.0.1:" + grpcPort, clientTLS: clientPair, ca: ca}
}

func (h *host) executor(t testing.TB, calls executors.CallHandler) *remote.Executor {
	t.Helper()
	cfg, err := pki.ClientConfig(h.clientTLS, h.ca.CertPEM)
	require.NoError(t, err)
	e, err := remote.New(remote.Options{Addr: h.addr, TLS: cfg, Calls: calls, ProbeTimeout: time.Second, OrchestratorID: t.Name()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func TestConformance(t *testing.T) {
	h := startHostWith(t, hostOptions{git: true})
	executortest.Run(t, executortest.Backend{
		Agent:      []string{"/toolscope/agentctl", "version"},
		Printed:    "contract toolscope.agentctl.v1.AgentctlService",
		Workspaces: &executortest.Workspaces{Host: executortest.BridgeGateway(t, h.cli)},
		New: func(t *testing.T, calls executors.CallHandler, _ executors.EventHandler) executors.Executor {
			return h.executor(t, calls)
		},
		// The daemon crashes and its host brings it back, empty.
		Kill: func(t *testing.T, _ executors.Handle) {
			ctx := context.Background()
			require.NoError(t, h.cli.ContainerKill(ctx, h.id, "SIGKILL"))
			_, _ = h.cli.ContainerWait(ctx, h.id, container.WaitConditionNotRunning)
			require.NoError(t, h.cli.ContainerStart(ctx, h.id, container.StartOptions{}))
		},
		// Whoever holds a client certificate the daemon trusts.
		Control: func(t *testing.T, _ executors.Handle) executortest.Controller {
			cfg, err := pki.ClientConfig(h.clientTLS, h.ca.CertPEM)
			require.NoError(t, err)
			conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			return executortest.Controller{Client: agentctlv1.NewAgentctlServiceClient(conn)}
		},
	})
}

// TestNetworkCutIsLostThenRecovered freezes the remote host (its
// connections hang, as in a partition): the session is reported lost; when
// the host answers again the session is running again, pushes apply and
// the agent's tool calls reach the orchestrator again.
func TestNetworkCutIsLostThenRecovered(t *testing.T) {
	h := startHost(t)
	var answered atomic.Int32
	e := h.executor(t, func(_ context.Context, c executors.ToolCall) executors.ToolResult {
		answered.Add(1)
		return executors.ToolResult{Text: "answered " + c.Tool}
	})
	ctx := context.Background()
	handle, st, err := e.Launch(ctx, executors.Spec{SessionID: "cut", TaskID: "task_cut", Mode: executors.ModeTask,
		Providers: providers.Of("github"), Generation: 1}, nil)
	require.NoError(t, err)
	agent := mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "2025-11-25")

	require.NoError(t, h.cli.ContainerPause(ctx, h.id))
	cut := time.Now()
	paused := true
	t.Cleanup(func() {
		if paused {
			_ = h.cli.ContainerUnpause(context.Background(), h.id)
		}
	})
	require.Eventually(t, func() bool {
		st, err := control(e).Inspect(ctx, handle)
		return err == nil && st.Phase == executors.PhaseLost
	}, 2*time.Minute, 50*time.Millisecond, "an unreachable host makes the session lost")
	lost := time.Since(cut)

	require.NoError(t, h.cli.ContainerUnpause(ctx, h.id))
	restored := time.Now()
	paused = false
	require.Eventually(t, func() bool {
		st, err := control(e).Inspect(ctx, handle)
		return err == nil && st.Phase == executors.PhaseRunning
	}, 60*time.Second, 50*time.Millisecond, "the session recovers when the host answers again")
	running := time.Since(restored)
	res, err := control(e).ApplySurface(ctx, handle, executors.Surface{Providers: providers.Of("gitlab"), Generation: 2})
	require.NoError(t, err)
	assert.True(t, res.ToolsChanged)
	require.Eventually(t, func() bool {
		r, err := agent.Session.CallTool(ctx, &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		return err == nil && !r.IsError
	}, 2*time.Minute, 20*time.Millisecond, "the agent's calls reach the orchestrator again")
	calls := time.Since(restored)
	assert.Positive(t, answered.Load())
	testutil.Figure(t, "remote host network cut", "reported lost %d ms after the cut (probe timeout 1 s); running again %d ms after restoring, push applied, agent's calls answered again after %d ms",
		lost.Milliseconds(), running.Milliseconds(), calls.Milliseconds())
}

func TestWrongCertificateIsRefused(t *testing.T) {
	h := startHost(t)
	other, err := pki.NewCA("not the remote's CA", time.Hour)
	require.NoError(t, err)
	pair, err := other.IssueClient("intruder", time.Hour)
	require.NoError(t, err)
	cfg, err := pki.ClientConfig(pair, h.ca.CertPEM)
	require.NoError(t, err)
	e, err := remote.New(remote.Options{Addr: h.addr, TLS: cfg, ProbeTimeout: time.Second})
	require.NoError(t, err)
	defer e.Close()
	_, _, err = e.Launch(context.Background(), executors.Spec{SessionID: "x", TaskID: "t", Mode: executors.ModeTask}, nil)
	require.Error(t, err)
	t.Log(err)
}

// TestStoppedSessionLeavesTheLink: once the orchestrator stops a session on
// a daemon, the link no longer carries it: someone who recreates it there
// with the same id (a daemon outlives its sessions) gets no tools, while
// the daemon's other session keeps calling as itself.
func TestStoppedSessionLeavesTheLink(t *testing.T) {
	h := startHost(t)
	var mu sync.Mutex
	onLink := map[string][]bool{}
	e := h.executor(t, func(_ context.Context, c executors.ToolCall) executors.ToolResult {
		mu.Lock()
		defer mu.Unlock()
		onLink[c.SessionID] = append(onLink[c.SessionID], c.OnLink)
		return executors.ToolResult{Text: "answered " + c.Tool}
	})
	ctx := context.Background()
	spec := executors.Spec{SessionID: "stopped", TaskID: "task_stopped", Mode: executors.ModeTask, Providers: providers.Of("github"), Generation: 1}
	handle, st, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	call := func(url, token string) {
		t.Helper()
		c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
		_, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		require.NoError(t, err)
	}
	call(st.MCPURL, st.MCPToken)
	require.NoError(t, e.Stop(ctx, handle))

	cfg, err := pki.ClientConfig(h.clientTLS, h.ca.CertPEM)
	require.NoError(t, err)
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	created, err := agentctlv1.NewAgentctlServiceClient(conn).CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: agentlink.LaunchSpec(spec)})
	require.NoError(t, err, "the daemon accepts the session again from a client certificate")
	t.Cleanup(func() {
		_, _ = agentctlv1.NewAgentctlServiceClient(conn).StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: spec.SessionID})
	})
	call(created.GetStatus().GetMcpUrl(), created.GetStatus().GetMcpBearerToken())

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []bool{true, false}, onLink["stopped"], "on the link while the orchestrator ran it, not after it stopped it")
	testutil.Figure(t, "remote: stopped session leaves the link", "a session recreated on the daemon after the orchestrator stopped it: its call is not on the link")
}

// TestIsolation: a remote daemon given a uid range runs each session's
// agent under a uid of its own: an agent cannot read another session's
// files (they share the daemon's directory of sessions) nor the daemon's
// /proc entries, and the daemon's API refuses it (mutual TLS).
func TestIsolation(t *testing.T) {
	h := startHostWith(t, hostOptions{
		args:          []string{"--agent-uids", "200000-200009"},
		env:           executortest.CanaryEnv(),
		binds:         []string{executortest.Probe(t) + ":/toolscope/probe:ro"},
		mcpPerSession: true,
	})
	executortest.RunIsolation(t, executortest.Isolation{
		Backend: executortest.Backend{New: func(t *testing.T, calls executors.CallHandler, _ executors.EventHandler) executors.Executor {
			return h.executor(t, calls)
		}},
		// The daemon's environment is its operator's (here: it holds the
		// secrets on purpose); what matters is that none reaches an agent.
		Probe:   "/toolscope/probe",
		Refusal: "Unavailable",
	})
}

// TestSharedUIDNeedsOptIn: a daemon without a uid range runs every agent
// under its own uid, so it refuses a session of a second workspace unless
// the operator started it with --allow-shared-uid.
func TestSharedUIDNeedsOptIn(t *testing.T) {
	ctx := context.Background()
	spec := func(id, ws string) executors.Spec {
		return executors.Spec{SessionID: id, TaskID: "task_" + id, WorkspaceID: ws, Mode: executors.ModeTask, Providers: providers.Of("github"), Generation: 1}
	}
	for _, optIn := range []bool{false, true} {
		o := hostOptions{mcpPerSession: true}
		if optIn {
			o.args = []string{"--allow-shared-uid"}
		}
		h := startHostWith(t, o)
		e := h.executor(t, func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} })
		first, _, err := e.Launch(ctx, spec("a1", "ws_a"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Stop(context.Background(), first) })
		same, _, err := e.Launch(ctx, spec("a2", "ws_a"), nil)
		require.NoError(t, err, "the same workspace shares the daemon")
		t.Cleanup(func() { _ = e.Stop(context.Background(), same) })
		other, _, err := e.Launch(ctx, spec("b1", "ws_b"), nil)
		if optIn {
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Stop(context.Background(), other) })
			continue
		}
		require.Error(t, err)
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
		assert.Contains(t, err.Error(), "--agent-uids")
		assert.Contains(t, err.Error(), "--allow-shared-uid")
		assert.Contains(t, err.Error(), `"ws_b"`)
	}
}

// TestStoppedSessionsLeaveNoSecrets: once the orchestrator stops a
// session on a remote host, no file in the daemon's state directory holds
// its MCP token; the agent's log is kept in the daemon's logs directory.
func TestStoppedSessionsLeaveNoSecrets(t *testing.T) {
	h := startHost(t)
	e := h.executor(t, func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := executors.Spec{SessionID: "retire-remote", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{"/toolscope/agentctl", "version"}}}
	handle, st, err := e.Launch(ctx, spec, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), handle) })
	scanner := testutil.NewLeakScanner(map[string]string{"MCP token": st.MCPToken})
	// The daemon's files, as a tar of its state directory (a FROM scratch
	// image has no shell to list them with).
	files := func() map[string][]byte {
		rc, _, err := h.cli.CopyFromContainer(ctx, h.id, "/tmp/agentctl")
		require.NoError(t, err)
		defer rc.Close()
		out := map[string][]byte{}
		r := tar.NewReader(rc)
		for {
			hdr, err := r.Next()
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			if hdr.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(r)
				require.NoError(t, err)
				out[hdr.Name] = b
			}
		}
	}
	leaks := func(fs map[string][]byte) (found []string) {
		for name, b := range fs {
			if hits := scanner.Find(b); len(hits) > 0 {
				found = append(found, name+": "+hits[0])
			}
		}
		return found
	}
	before := leaks(files())
	require.NotEmpty(t, before, "while it runs, the session's configs hold its token (the scan sees them)")
	require.Eventually(t, func() bool {
		s, err := control(e).Inspect(ctx, handle)
		return err == nil && s.Phase == executors.PhaseAgentExited
	}, time.Minute, 20*time.Millisecond, "the agent exits")

	require.NoError(t, e.Stop(ctx, handle))
	after := files()
	assert.Empty(t, leaks(after), "after stop, no file holds the token")
	assert.Contains(t, string(after["agentctl/logs/retire-remote/agent.log"]), "contract toolscope.agentctl.v1.AgentctlService", "the agent's log is kept; files: %v", keys(after))
	testutil.Figure(t, "remote stop: files left, token in them", "%d files in the daemon's state directory after stop, %d holding the token (%d before stop)", len(after), len(leaks(after)), len(before))
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Before, `session logs --agentctl` of a remote session was refused: the
// daemon's log was its host's alone. With --log-file, the daemon serves
// each session its own lines, over mutual TLS, also after the stop.
func TestAgentctlLogIsTheDaemonsLinesOfTheSession(t *testing.T) {
	h := startHostWith(t, hostOptions{args: []string{"--log-file", "/tmp/agentctl.log"}, mcpPerSession: true})
	e := h.executor(t, func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launch := func(id string) executors.Handle {
		handle, _, err := e.Launch(ctx, executors.Spec{SessionID: id, TaskID: "task_" + id, Mode: executors.ModeTask}, nil)
		require.NoError(t, err)
		return handle
	}
	read := func(handle executors.Handle, follow bool) (string, error) {
		var out []byte
		err := e.AgentctlLog(ctx, handle, follow, func(b []byte) error {
			out = append(out, b...)
			return nil
		})
		return string(out), err
	}
	first, second := launch("log-one"), launch("log-two")
	followed := make(chan string, 1)
	go func() {
		out, err := read(first, true)
		assert.NoError(t, err)
		followed <- out
	}()
	require.NoError(t, e.Stop(ctx, first))
	var out string
	select {
	case out = <-followed:
	case <-ctx.Done():
		t.Fatal("following the agentctl log did not end when the session stopped")
	}
	assert.Contains(t, out, "session created")
	assert.Contains(t, out, "session stopped", "followed until the daemon no longer hosts it")

	after, err := read(first, false)
	require.NoError(t, err, "read after the stop")
	lines := strings.Split(strings.TrimSpace(after), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	for _, line := range lines {
		assert.Regexp(t, `session_id=log-one( |$)`, line, "only the session's own lines")
	}
	assert.NotContains(t, after, "log-two")
	assert.NotContains(t, after, "agentctl serving", "the daemon's lines of no session are not sent")
	other, err := read(second, false)
	require.NoError(t, err)
	assert.Contains(t, other, "session_id=log-two")
	assert.NotContains(t, other, "log-one")
	require.NoError(t, e.Stop(ctx, second))

	bare := startHostWith(t, hostOptions{mcpPerSession: true})
	be := bare.executor(t, func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} })
	handle, _, err := be.Launch(ctx, executors.Spec{SessionID: "no-file", TaskID: "t", Mode: executors.ModeTask}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Stop(context.Background(), handle) })
	err = be.AgentctlLog(ctx, handle, false, func([]byte) error { return nil })
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "--log-file")
	testutil.Figure(t, "remote session logs --agentctl", "%d lines of the daemon's log, each naming the session, after its stop; following ended with the stop", len(lines))
}

// Before, `session logs` of a stopped remote session was refused: the
// daemon kept the agent's log on its host, and no call served it.
func TestAStoppedSessionsAgentLogIsServed(t *testing.T) {
	h := startHost(t)
	e := h.executor(t, func(context.Context, executors.ToolCall) executors.ToolResult { return executors.ToolResult{} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	handle, _, err := e.Launch(ctx, executors.Spec{SessionID: "kept", TaskID: "t", Mode: executors.ModeTask,
		Agent: &executors.AgentCommand{Argv: []string{"/toolscope/agentctl", "version"}}}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := control(e).Inspect(ctx, handle)
		return err == nil && st.Phase == executors.PhaseAgentExited
	}, 2*time.Minute, 20*time.Millisecond)
	require.NoError(t, e.Stop(ctx, handle))
	var kept []byte
	require.NoError(t, e.KeptAgentLog(ctx, handle, func(b []byte) error { kept = append(kept, b...); return nil }))
	assert.Contains(t, string(kept), "contract toolscope.agentctl.v1.AgentctlService")
}

// control is the orchestrator's controller of e's sessions.
func control(e *remote.Executor) *executors.Controller {
	return executors.NewController(map[string]executors.Executor{remote.Name: e})
}

// TestPreflightAsksTheRemoteHost: over the control channel, preflight
// refuses a daemon that does not answer, and asks the daemon whether the
// agent could start on its host: a binary that is not there, and a
// credential variable its environment lacks, are refused; one it has
// passes, though this process's environment lacks it (issue 19).
func TestPreflightAsksTheRemoteHost(t *testing.T) {
	t.Parallel()
	h := startHostWith(t, hostOptions{env: []string{"PREFLIGHT_REMOTE_KEY=set-on-the-host"}})
	e := h.executor(t, nil)
	ctx := context.Background()
	require.Empty(t, os.Getenv("PREFLIGHT_REMOTE_KEY"))

	assert.NoError(t, e.Preflight(ctx, executors.Spec{}), "no agent: the daemon answers")
	assert.NoError(t, e.Preflight(ctx, executors.Spec{Agent: &executors.AgentCommand{Argv: []string{"/toolscope/agentctl"},
		CredentialEnv: "PREFLIGHT_REMOTE_KEY"}}), "the host has the binary and the variable")

	err := e.Preflight(ctx, executors.Spec{Agent: &executors.AgentCommand{Argv: []string{"/usr/bin/claude"}}})
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, "agent command `/usr/bin/claude` not found")
	assert.ErrorContains(t, err, h.addr, "names the host it was checked on")

	err = e.Preflight(ctx, executors.Spec{Agent: &executors.AgentCommand{Profile: "codex"}})
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, "agent command `codex` not found on the executor's PATH")

	err = e.Preflight(ctx, executors.Spec{Agent: &executors.AgentCommand{Argv: []string{"/toolscope/agentctl"}, CredentialEnv: "PREFLIGHT_NEVER_SET"}})
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, `credential_env "PREFLIGHT_NEVER_SET" is not set`)

	cfg, err := pki.ClientConfig(h.clientTLS, h.ca.CertPEM)
	require.NoError(t, err)
	gone, err := remote.New(remote.Options{Addr: "127.0.0.1:" + freePort(t), TLS: cfg, ProbeTimeout: 200 * time.Millisecond, OrchestratorID: t.Name()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gone.Close() })
	err = gone.Preflight(ctx, executors.Spec{})
	require.Error(t, err)
	assert.ErrorContains(t, err, "does not answer")
}
