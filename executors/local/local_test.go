package local_test

import (
	"encoding/json"
	"os"
	"syscall"
	"testing"

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
