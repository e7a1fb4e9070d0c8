package docker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/docker"
	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/testutil"
)

// BenchmarkLaunchToFirstList: a docker launch (container created and
// started with agentctl bind-mounted, readiness, session created) to the
// first tools/list answered, against `docker run` of a trivial static
// program in the same scratch image.
func BenchmarkLaunchToFirstList(b *testing.B) {
	cli := executortest.RequireDocker(b)
	image := executortest.BuildTestImage(b, cli)
	e, err := docker.New(docker.Options{Agentctl: executortest.Agentctl(b), StateDir: b.TempDir(), Client: cli, OrchestratorID: b.Name()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	program := testutil.BuildProgram(b, b.TempDir(), testutil.TrivialProgram)
	executortest.BenchLaunch(b, e, func(s *executors.Spec) { s.Image = image },
		executortest.ContainerFloor(cli, image, program))
}
