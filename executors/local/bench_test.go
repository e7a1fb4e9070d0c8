package local_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
	"github.com/toolscope/toolscope/internal/testutil"
)

// BenchmarkLaunchToFirstList: a local launch (agentctl spawned, readiness,
// session created) to the first tools/list answered, against spawning a
// trivial static program and reading its first line.
func BenchmarkLaunchToFirstList(b *testing.B) {
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(b), StateDir: b.TempDir(), OrchestratorID: b.Name()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	program := testutil.BuildProgram(b, b.TempDir(), testutil.TrivialProgram)
	executortest.BenchLaunch(b, e, nil, executortest.SpawnFloor(program))
}

// BenchmarkStartToFirstList: the same launch to first tools/list, against
// the floor of a bare go-sdk server process with the same tool definitions
// started and listed over streamable HTTP (executortest.BareServerFloor):
// what toolscope adds to the SDK's own start.
func BenchmarkStartToFirstList(b *testing.B) {
	e, err := local.New(local.Options{Agentctl: executortest.Agentctl(b), StateDir: b.TempDir(), OrchestratorID: b.Name()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	executortest.BenchLaunch(b, e, nil, executortest.BareServerFloor(b, b.TempDir()))
}
