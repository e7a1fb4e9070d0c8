package registry_test

import (
	"testing"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// BenchmarkBuild: the registry of a task-mode session with both providers,
// as agentctl builds it on every pushed set (colocated), and as the
// orchestrator's hosted endpoint does (hosted).
func BenchmarkBuild(b *testing.B) {
	both := providers.Of("github", "gitlab")
	for _, transport := range []toolapi.Transport{toolapi.TransportColocated, toolapi.TransportHosted} {
		b.Run(string(transport), func(b *testing.B) {
			for b.Loop() {
				registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: both, Transport: transport})
			}
		})
	}
}
