package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
)

func TestMain(m *testing.M) {
	code := m.Run()
	executortest.RemoveBuilds()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	agentctl := executortest.Agentctl(t)
	stateDir := t.TempDir() // shared by every executor: a restart keeps it
	executortest.Run(t, executortest.Backend{
		New: func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor {
			e, err := local.New(local.Options{Agentctl: agentctl, StateDir: stateDir, Calls: calls, Events: events, OrchestratorID: t.Name()})
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
	})
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
