package docker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/docker"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	executortest.RemoveBuilds()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir()
	var current *docker.Executor
	executortest.Run(t, executortest.Backend{
		New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			e, err := docker.New(docker.Options{Agentctl: agentctl, StateDir: stateDir, Client: cli, Calls: calls, Events: events, OrchestratorID: "docker-conformance"})
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
		Agent:       []string{"/toolscope/agentctl", "version"},
		Printed:     "contract toolscope.agentctl.v1.AgentctlService",
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
	e, err := docker.New(docker.Options{Agentctl: agentctl, StateDir: stateDir, Client: cli, OrchestratorID: "docker-conformance"})
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
