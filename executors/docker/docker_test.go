package docker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/docker"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

// conformanceID labels this test process's containers, so that the check
// for containers left behind sees no other process's run.
var conformanceID = fmt.Sprintf("docker-conformance-%d", os.Getpid())

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, executortest.RemoveBuilds))
}

func TestConformance(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir()
	var current *docker.Executor
	executortest.Run(t, executortest.Backend{
		New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			e, err := docker.New(docker.Options{Agentctl: agentctl, StateDir: stateDir, Client: cli, Calls: calls, Events: events, OrchestratorID: conformanceID})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Close() })
			current = e
			return e
		},
		Kill: func(t *testing.T, h executors.Handle) {
			require.NoError(t, current.Kill(context.Background(), h))
		},
		Prepare:     func(s *executors.Spec) { s.Image = image },
		ReportsLoss: true,
		Workspaces: &executortest.Workspaces{Host: executortest.BridgeGateway(t, cli),
			Prepare: func(s *executors.Spec) { s.Image = executortest.BuildGitImage(t, cli) }},
		Agent:   []string{"/toolscope/agentctl", "version"},
		Printed: "contract toolscope.agentctl.v1.AgentctlService",
		Control: func(t *testing.T, h executors.Handle) executortest.Controller {
			var st struct {
				ContainerID string `json:"container_id"`
				SecretFile  string `json:"secret_file"`
			}
			require.NoError(t, json.Unmarshal(h.State, &st))
			inspect, err := cli.ContainerInspect(context.Background(), st.ContainerID)
			require.NoError(t, err)
			published := func(port string) string {
				ports := inspect.NetworkSettings.Ports[nat.Port(port+"/tcp")]
				require.NotEmpty(t, ports, "agentctl's port %s is published", port)
				return net.JoinHostPort("127.0.0.1", ports[0].HostPort)
			}
			grpcAddr, mcpAddr := published("7077"), published("7078")
			return executortest.Controller{
				Client: executortest.ControlWithSecret(t, grpcAddr, st.SecretFile),
				MCPURL: func(reported string) string {
					u, err := url.Parse(reported)
					require.NoError(t, err)
					u.Host = mcpAddr
					return u.String()
				},
			}
		},
	})

	// Every container the suite created was removed.
	e, err := docker.New(docker.Options{Agentctl: agentctl, StateDir: stateDir, Client: cli, OrchestratorID: conformanceID})
	require.NoError(t, err)
	left, err := e.Managed(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left, "containers left behind")
}

func TestMissingImageIsAClearError(t *testing.T) {
	cli := executortest.RequireDocker(t)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	_, _, err = e.Launch(context.Background(), executors.Spec{
		SessionID: "noimage", TaskID: "t", Mode: executors.ModeTask, Image: "toolscope-does-not-exist:0", Providers: providers.Of("github"),
	}, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "toolscope-does-not-exist:0")
}

func TestWrongAgentctlIsAClearErrorAndLeavesNoContainer(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	notAgentctl := t.TempDir() + "/agentctl"
	require.NoError(t, os.WriteFile(notAgentctl, []byte("#!/bin/sh\necho hi\n"), 0o755)) // no shell in a scratch image
	e, err := docker.New(docker.Options{Agentctl: notAgentctl, StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	_, _, err = e.Launch(context.Background(), executors.Spec{
		SessionID: "badagentctl", TaskID: "t", Mode: executors.ModeTask, Image: image,
	}, nil)
	require.Error(t, err)
	t.Log(err)
	left, err := e.Managed(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, left, "badagentctl", "a failed launch leaves no container")
}

// TestSweepRemovesContainersNoSessionNeeds: a restarted orchestrator
// cleans containers of sessions that are no longer running.
func TestSweepRemovesContainersNoSessionNeeds(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer e.Close()
	// Another orchestrator's container on the same engine is never swept.
	other, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name() + "-other"})
	require.NoError(t, err)
	defer other.Close()
	theirs, _, err := other.Launch(context.Background(), executors.Spec{SessionID: "sweep-theirs", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Stop(context.Background(), theirs) })
	var sweeper executors.Sweeper = e
	ctx := context.Background()
	for _, id := range []string{"sweep-keep", "sweep-drop"} {
		h, _, err := e.Launch(ctx, executors.Spec{SessionID: id, TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	}
	cleaned, err := sweeper.Sweep(ctx, func(id string) bool { return id == "sweep-keep" })
	require.NoError(t, err)
	assert.Equal(t, []string{"sweep-drop"}, cleaned)
	theirsLeft, err := other.Managed(ctx)
	require.NoError(t, err)
	assert.Contains(t, theirsLeft, "sweep-theirs")
	left, err := e.Managed(ctx)
	require.NoError(t, err)
	assert.Contains(t, left, "sweep-keep")
	assert.NotContains(t, left, "sweep-drop")
}

// TestIsolation: the agent of a docker session runs under another uid
// than agentctl (root in the container), so the bind-mounted secret,
// agentctl's /proc entries and its API are out of its reach; the
// container's environment holds no secret of the orchestrator's.
func TestIsolation(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildProbeImage(t, cli)
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir()
	containerOf := func(t *testing.T, h executors.Handle) string {
		var st struct {
			ContainerID string `json:"container_id"`
		}
		require.NoError(t, json.Unmarshal(h.State, &st))
		return st.ContainerID
	}
	executortest.RunIsolation(t, executortest.Isolation{
		Backend: executortest.Backend{
			New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
				e, err := docker.New(docker.Options{Agentctl: agentctl, StateDir: stateDir, Client: cli, Calls: calls, Events: events, OrchestratorID: t.Name()})
				require.NoError(t, err)
				t.Cleanup(func() { _ = e.Close() })
				return e
			},
			Prepare: func(s *executors.Spec) { s.Image = image },
		},
		Probe:   "/probe",
		Refusal: "Unauthenticated",
		AgentctlEnviron: func(t *testing.T, h executors.Handle) []byte {
			inspect, err := cli.ContainerInspect(context.Background(), containerOf(t, h))
			require.NoError(t, err)
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", inspect.State.Pid))
			require.NoError(t, err)
			return append(environ, []byte(strings.Join(inspect.Config.Env, "\x00"))...)
		},
		// Another session's files are in another container: the probe
		// tries their path in its own (OtherDirs nil).
	})
}

// TestLinksToDeadContainersAreNeverRedialed: once a session's container
// is gone, its link is closed; nothing dials the port it published any
// more, also after the session was resumed in a new container.
func TestLinksToDeadContainersAreNeverRedialed(t *testing.T) {
	const n = 3
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	lost := make(chan string, n)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name(),
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

	specs := make([]executors.Spec, n)
	handles := make([]executors.Handle, n)
	addrs := make([]string, n)
	for i := range specs {
		specs[i] = executors.Spec{SessionID: fmt.Sprintf("redial-%d", i), TaskID: "t", Mode: executors.ModeTask, Image: image}
		handles[i], _, err = e.Launch(ctx, specs[i], nil)
		require.NoError(t, err)
		var st struct {
			ContainerID string `json:"container_id"`
		}
		require.NoError(t, json.Unmarshal(handles[i].State, &st))
		inspect, err := cli.ContainerInspect(ctx, st.ContainerID)
		require.NoError(t, err)
		ports := inspect.NetworkSettings.Ports[nat.Port("7077/tcp")]
		require.NotEmpty(t, ports)
		addrs[i] = net.JoinHostPort("127.0.0.1", ports[0].HostPort)
	}
	for _, h := range handles {
		require.NoError(t, e.Kill(ctx, h))
		// The killed container stays until its session is stopped.
		t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	}
	for range n {
		select {
		case <-lost:
		case <-ctx.Done():
			t.Fatal("not every killed container was reported lost")
		}
	}
	var dialed atomic.Int64
	var accepting sync.WaitGroup
	listeners := make([]net.Listener, 0, n)
	for _, addr := range addrs {
		var lis net.Listener
		require.Eventually(t, func() bool { lis, err = net.Listen("tcp", addr); return err == nil }, time.Minute, 20*time.Millisecond,
			"the dead container's port %s is released", addr)
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
	for i, s := range specs {
		h, _, err := e.Launch(ctx, s, nil)
		require.NoError(t, err)
		handles[i] = h
	}
	// A window for a negative: a link left open redials within its 2 s
	// backoff.
	window := time.NewTimer(3 * time.Second)
	<-window.C
	for _, lis := range listeners {
		_ = lis.Close()
	}
	accepting.Wait()
	testutil.Figure(t, "links to killed containers", "%d connection attempts to %d dead containers in the 3 s after their sessions were resumed", dialed.Load(), n)
	assert.Zero(t, dialed.Load(), "a link to a dead container must be closed, never redialed")
	for _, h := range handles {
		require.NoError(t, e.Stop(ctx, h))
	}
}

// TestAgentctlLogIsTheContainersOutput: a docker session's agentctl log is
// its container's output, followed until the container ends; once the
// session is stopped, its container and that log are gone, and reading it
// says so.
func TestAgentctlLogIsTheContainersOutput(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, _, err := e.Launch(ctx, executors.Spec{SessionID: "agentctl-log", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	var reader executors.AgentctlLogReader = e

	// agentctl logs "session created" before it answers the launch, but
	// the engine copies a container's output to its log asynchronously: a
	// read right after the launch may come before the line (seen once in
	// a fresh-machine CI run), so reads are repeated until it is there.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var got []byte
		require.NoError(t, reader.AgentctlLog(ctx, h, false, func(b []byte) error { got = append(got, b...); return nil }))
		if strings.Contains(string(got), "session created") {
			break
		}
		require.True(t, time.Now().Before(deadline), "agentctl's log, read without following, never held its session: %s", got)
	}

	followed := make(chan error, 1)
	var tail testutil.SyncBuffer
	go func() {
		followed <- reader.AgentctlLog(ctx, h, true, func(b []byte) error { _, err := tail.Write(b); return err })
	}()
	require.Eventually(t, func() bool { return strings.Contains(tail.String(), "session created") }, time.Minute, 10*time.Millisecond)
	require.NoError(t, e.Stop(ctx, h))
	select {
	case err := <-followed:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("following agentctl's log did not end with its container")
	}
	err = reader.AgentctlLog(ctx, h, false, func([]byte) error { return nil })
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, "was removed with it")
}

// TestStoppedSessionsLeaveNoSecrets: once a docker session stops, or its
// launch fails after the secret was written, the host keeps no file with
// its launch secret or its MCP token.
func TestStoppedSessionsLeaveNoSecrets(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	stateDir := t.TempDir()
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: stateDir, Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, status, err := e.Launch(ctx, executors.Spec{SessionID: "retire-docker", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	var st struct {
		SecretFile string `json:"secret_file"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	secret, err := os.ReadFile(st.SecretFile)
	require.NoError(t, err)
	scanner := testutil.NewLeakScanner(map[string]string{"launch secret": string(secret), "MCP token": status.MCPToken})
	scan := func() (files int, leaks []string) {
		_ = filepath.WalkDir(stateDir, func(path string, d os.DirEntry, err error) error {
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
		return files, leaks
	}
	_, before := scan()
	require.NotEmpty(t, before, "while it runs, the secret file is there (the scan sees it)")
	require.NoError(t, e.Stop(ctx, h))
	files, leaks := scan()
	assert.Empty(t, leaks, "after stop, no file holds a secret")
	assert.NoDirExists(t, filepath.Join(stateDir, "retire-docker"))

	// A launch that fails after the secret was written: the "agentctl"
	// bind-mounted is a shell script, which a FROM scratch image cannot run.
	notAgentctl := t.TempDir() + "/agentctl"
	require.NoError(t, os.WriteFile(notAgentctl, []byte("#!/bin/sh\necho hi\n"), 0o755))
	bad, err := docker.New(docker.Options{Agentctl: notAgentctl, StateDir: stateDir, Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer bad.Close()
	_, _, err = bad.Launch(ctx, executors.Spec{SessionID: "retire-docker-failed", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.Error(t, err)
	assert.NoDirExists(t, filepath.Join(stateDir, "retire-docker-failed"), "a failed launch leaves no secret")
	testutil.Figure(t, "docker stop: files left, secrets in them", "%d files after stop, %d holding a secret (%d before stop); a failed launch: no directory", files, len(leaks), len(before))
}

// Before, the orchestrator's bounds for agentctl stopped at the executor
// (every container's agentctl ran with its defaults) and the container
// output's tail was a fixed 5,000 lines. Both are options now.
func TestContainersAgentctlGetsTheBoundsGiven(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name(),
		AgentctlFlags: executors.AgentctlFlags{MCPMaxSessions: 7, MCPBodyTimeout: 3 * time.Second, ExitTailBytes: 512}, LogTailLines: 1})
	require.NoError(t, err)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, _, err := e.Launch(ctx, executors.Spec{SessionID: "bounds", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
	var st struct {
		ContainerID string `json:"container_id"`
	}
	require.NoError(t, json.Unmarshal(h.State, &st))
	info, err := cli.ContainerInspect(ctx, st.ContainerID)
	require.NoError(t, err)
	args := strings.Join(info.Config.Cmd, " ")
	for _, want := range []string{"--mcp-max-sessions 7", "--mcp-body-timeout 3s", "--exit-tail-bytes 512"} {
		assert.Contains(t, args, want)
	}
	var got []byte
	for deadline := time.Now().Add(time.Minute); len(got) == 0; time.Sleep(20 * time.Millisecond) { // the engine logs asynchronously
		require.NoError(t, e.AgentctlLog(ctx, h, false, func(b []byte) error { got = append(got, b...); return nil }))
		require.True(t, time.Now().Before(deadline), "agentctl's log stayed empty")
	}
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(got)), "\n")+1, "--docker-log-tail 1: one line: %q", got)
}

// TestAnotherInstallationCannotRemoveTheContainer: before, an
// orchestrator on a copy of the database, not holding the session,
// removed the original's running container (and its secret) on `session
// stop`. The container's label names its installation; another one is
// refused.
func TestAnotherInstallationCannotRemoveTheContainer(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	state := t.TempDir()
	original, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: state, Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	defer original.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, _, err := original.Launch(ctx, executors.Spec{SessionID: "owned", TaskID: "t", Mode: executors.ModeTask, Image: image}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = original.Stop(context.Background(), h) })

	copied, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name() + "-restored"})
	require.NoError(t, err)
	defer copied.Close()
	err = copied.Stop(ctx, h)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), t.Name(), "names the installation it runs for")
	st, err := executors.NewController(map[string]executors.Executor{docker.Name: original}).Inspect(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, executors.PhaseRunning, st.Phase, "the original's session still runs")
	assert.DirExists(t, filepath.Join(state, "owned"), "its secret is kept")
}

// TestPreflightLooksInTheImage: on the real engine, preflight refuses an
// image the engine lacks and an agent command the image does not hold
// (by full path, or by name on the image's PATH), accepts one it holds,
// and leaves no container behind (issue 19).
func TestPreflightLooksInTheImage(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildProbeImage(t, cli) // FROM scratch, /probe
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(t), StateDir: t.TempDir(), Client: cli, OrchestratorID: t.Name()})
	require.NoError(t, err)
	ctx := context.Background()
	agent := func(argv ...string) *executors.AgentCommand { return &executors.AgentCommand{Argv: argv} }

	err = e.Preflight(ctx, executors.Spec{Image: "toolscope-does-not-exist:0", Agent: agent("/probe")})
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.ErrorContains(t, err, `image "toolscope-does-not-exist:0" is not on this Docker engine`)

	assert.NoError(t, e.Preflight(ctx, executors.Spec{Image: image}), "no agent: the image is all there is to check")
	start := time.Now()
	assert.NoError(t, e.Preflight(ctx, executors.Spec{Image: image, Agent: agent("/probe", "--flag")}))
	t.Logf("a preflight that looks in the image took %s (create, stat, remove)", time.Since(start))

	err = e.Preflight(ctx, executors.Spec{Image: image, Agent: agent("/usr/bin/claude")})
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound)
	assert.ErrorContains(t, err, "agent command `/usr/bin/claude` not found")

	err = e.Preflight(ctx, executors.Spec{Image: image, Agent: &executors.AgentCommand{Profile: profiles.ClaudeCode}})
	assert.ErrorIs(t, err, profiles.ErrAgentNotFound)
	assert.ErrorContains(t, err, "agent command `claude` not found on the executor's PATH \"/usr/local/sbin:", "the image sets no PATH: the engine's default")

	err = e.Preflight(ctx, executors.Spec{Image: image, Agent: &executors.AgentCommand{Argv: []string{"/probe"}, CredentialEnv: "PREFLIGHT_TEST_NEVER_SET"}})
	assert.ErrorIs(t, err, profiles.ErrCredentialUnset)

	left, err := e.Managed(ctx)
	require.NoError(t, err)
	assert.Empty(t, left, "preflight leaves no container")
}
