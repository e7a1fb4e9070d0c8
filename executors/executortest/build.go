package executortest

import (
	"testing"

	"github.com/toolscope/toolscope/internal/testutil"
)

var agentctl = testutil.Binary{Package: "github.com/toolscope/toolscope/agentctl/cmd/agentctl", Name: "agentctl"}

// Agentctl builds the static agentctl binary once per test process (in the
// go.work workspace, from source) and returns its path.
func Agentctl(t testing.TB) string {
	t.Helper()
	return agentctl.Path(t)
}

// RemoveBuilds deletes what Agentctl built; call it from TestMain.
func RemoveBuilds() { agentctl.Remove(); probe.Remove() }
