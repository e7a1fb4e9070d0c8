package mcpserver_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// wholeDefinitions is what a client must list for r: each tool's full
// definition, as a bare go-sdk server handed it whole would list it.
func wholeDefinitions(t *testing.T, r *registry.Registry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tool := range r.Tools() {
		raw, err := json.Marshal(mcpserver.ToMCP(tool))
		require.NoError(t, err)
		out[tool.Name] = string(raw)
	}
	return out
}

func listed(t *testing.T, c *mcptest.Client) map[string]string {
	t.Helper()
	res, err := c.Session.ListTools(context.Background(), nil)
	require.NoError(t, err)
	out := map[string]string{}
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool)
		require.NoError(t, err)
		out[tool.Name] = string(raw)
	}
	return out
}

// The SDK holds stand-ins for built-in tools (definitions.go); every
// transport and protocol version still lists each tool's whole definition,
// before and after a change, and calls reach the tool.
func TestListingShowsWholeDefinitions(t *testing.T) {
	t.Parallel()
	for name, connect := range transports {
		for _, version := range mcptest.ProtocolVersions {
			t.Run(name+"/"+mcptest.VersionName(version), func(t *testing.T) {
				t.Parallel()
				p := newPublisher(t, build("github"))
				c := mcptest.Connect(t, connect(t, p), version)
				assertListed(t, wholeDefinitions(t, build("github")), listed(t, c))
				c.Subscribe(t, func() { p.Publish(build()) })
				require.True(t, p.Publish(build("gitlab", "github")))
				c.WaitChanged(t)
				assertListed(t, wholeDefinitions(t, build("github", "gitlab")), listed(t, c))
				res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "gitlab_mr_status"})
				require.NoError(t, err)
				assert.Equal(t, "called gitlab_mr_status", res.Content[0].(*mcp.TextContent).Text)
			})
		}
	}
}

func assertListed(t *testing.T, want, got map[string]string) {
	t.Helper()
	for name, def := range want {
		assert.JSONEq(t, def, got[name], name)
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			assert.Equal(t, "call_tool", name, "only call_tool is listed beyond the registry")
		}
	}
}

// A push costs the SDK little per changed tool, whatever the size of its
// schemas: go-sdk's AddTool re-decodes a raw schema into a map twice
// (≈64 KB of garbage per built-in tool, go-sdk's decoder allocating 32 KB
// each time), a stand-in costs it under 1 KB. Two hundred sessions
// applying one change made that 40% of the daemon's CPU.
func TestApplyingAChangeAllocatesLittlePerTool(t *testing.T) {
	a, b := build("github"), build("gitlab")
	removed, upserted := b.Diff(a)
	require.NotEmpty(t, upserted)
	p := newPublisher(t, a)
	p.Publish(b) // builds the shared definitions once
	toggle := []*registry.Registry{a, b}
	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range rounds {
		mcpserver.ApplyNow(p, toggle[i%2])
	}
	runtime.ReadMemStats(&after)
	perTool := float64(after.TotalAlloc-before.TotalAlloc) / rounds / float64(len(upserted)+len(removed))
	t.Logf("%.0f bytes allocated per changed tool", perTool)
	assert.Less(t, perTool, 8_000.0, "bytes allocated per changed tool")
}

// The table's definitions are not checked when a process builds them
// (define): this checks each of them whole, as the SDK's AddTool does, in
// every mode, provider set and transport.
func TestTheSDKAcceptsEveryBuiltinDefinition(t *testing.T) {
	seen := 0
	for _, mode := range []registry.Mode{registry.ModeTask, registry.ModePlan} {
		for _, transport := range []toolapi.Transport{toolapi.TransportColocated, toolapi.TransportHosted} {
			for _, set := range []providers.Set{providers.Of(), providers.Of("github"), providers.Of("gitlab"), providers.Of("github", "gitlab")} {
				for _, tool := range registry.Build(registry.Spec{Mode: mode, Providers: set, Transport: transport}).Tools() {
					require.True(t, registry.Builtin(tool.Name), tool.Name)
					assert.NoError(t, mcpserver.Check(tool), "%s (%s, %s, %s)", tool.Name, mode, transport, set)
					seen++
				}
			}
		}
	}
	assert.Positive(t, seen)
}

// The first session of a process builds the built-in definitions; that is
// on the path of its launch, which the orchestrator waits on, and it
// allocates little (checking each definition at that point allocated
// ≈2 MB, two 32 KB decoder buffers per tool and more, and a GC cycle).
func TestTheFirstPublisherAllocatesLittle(t *testing.T) {
	r := build("github", "gitlab")
	var before, after runtime.MemStats
	mcpserver.ForgetDefinitions()
	runtime.GC()
	runtime.ReadMemStats(&before)
	newPublisher(t, r)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d KB allocated by the first publisher of %d tools", allocated>>10, r.Len())
	assert.Less(t, allocated, uint64(400<<10), "bytes allocated by the first publisher")
}
