package lifecycle_test

import (
	"testing"

	"github.com/toolscope/toolscope/internal/providers"
)

// BenchmarkPollingCalls counts provider API calls per open change request
// per poll cycle on the normal path (nothing changed since the last
// cycle). It is a count, not a time: the floor is one status read.
func BenchmarkPollingCalls(b *testing.B) {
	for _, p := range []providers.Provider{providers.GitHub, providers.GitLab} {
		b.Run(string(p), func(b *testing.B) {
			username := map[providers.Provider]string{providers.GitHub: "octo-bot", providers.GitLab: "gl-bot"}[p]
			w := newWorld(b, p, username)
			w.cycle(b) // first observation
			calls, cycles := 0, 0
			for b.Loop() {
				calls += len(w.cycle(b))
				cycles++
			}
			b.ReportMetric(float64(calls)/float64(cycles), "calls/cr/cycle")
		})
	}
}
