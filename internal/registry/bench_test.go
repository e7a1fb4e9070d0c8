package registry_test

import (
	"testing"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
)

// BenchmarkBuild: the registry of a task-mode session with both providers,
// as agentctl builds it on every pushed set.
func BenchmarkBuild(b *testing.B) {
	both := providers.Of("github", "gitlab")
	for b.Loop() {
		registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: both})
	}
}
