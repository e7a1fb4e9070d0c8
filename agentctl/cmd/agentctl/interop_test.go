package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestTypeScriptSDKClientInterop connects the official TypeScript SDK
// client (not built on the go-sdk) to a session over streamable HTTP and
// over stdio (`agentctl mcp`): it lists the tools and receives list_changed
// after a SetProviders.
func TestTypeScriptSDKClientInterop(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := context.Background()
	gen := uint64(1)
	created, err := d.client.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: &agentctlv1.LaunchSpec{
		SessionId: "ts", TaskId: "task_ts", ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: gen},
	}})
	require.NoError(t, err)
	var mu sync.Mutex
	push := func(set ...string) {
		mu.Lock()
		gen++
		g := gen
		mu.Unlock()
		_, err := d.client.SetProviders(ctx, &agentctlv1.SetProvidersRequest{SessionId: "ts",
			ProviderSet: &agentctlv1.ProviderSet{Providers: set, Generation: g}})
		require.NoError(t, err)
	}
	bridgeConfig := filepath.Join(d.state, "sessions", "ts", "bridge.json")
	var cfg struct{ Token string }
	raw, err := os.ReadFile(bridgeConfig)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cfg))

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"http", []string{"http", created.GetStatus().GetMcpUrl(), cfg.Token}},
		{"stdio", []string{"stdio", os.Args[0], "mcp", "--config", bridgeConfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			push("github")
			ts := mcptest.RunTSClient(t, []string{asMain + "=1"}, tc.args...)
			ready, ok := ts.Next(t, 60*time.Second)
			require.True(t, ok, "no ready line from the TypeScript client")
			require.Equal(t, "ready", ready.Event)
			if ready.Protocol != nil {
				t.Logf("TypeScript client negotiated %s over %s", *ready.Protocol, tc.name)
			}
			// A 2025 client is offered call_tool until it is seen re-listing
			// (ADR 0019); its re-lists below no longer hold it.
			assert.Equal(t, append([]string{toolapi.CallTool}, toolapi.Surface("github")...), ready.Names)
			// It reads the instructions built at its initialize (issue 19).
			assert.Contains(t, ready.Instructions, "task_ts")
			assert.Contains(t, ready.Instructions, "Review providers: github.")

			// The client opens its notification stream after connecting;
			// toggle until it reports a change.
			toggle := [][]string{{"gitlab"}, {"github"}}
			deadline := time.Now().Add(mcptest.Hang)
			for i := 0; ; i++ {
				require.True(t, time.Now().Before(deadline), "the TypeScript client never received list_changed")
				push(toggle[i%2]...)
				if e, ok := ts.Next(t, 500*time.Millisecond); ok {
					require.Equal(t, "changed", e.Event)
					break
				}
			}

			push("gitlab", "github")
			want := toolapi.Surface("github", "gitlab")
			for {
				e, ok := ts.Next(t, mcptest.Hang)
				require.True(t, ok, "no list_changed after SetProviders")
				if assert.ObjectsAreEqual(want, e.Names) {
					break
				}
			}
			_, extra := ts.Next(t, mcptest.Quiet)
			assert.False(t, extra, "one SetProviders, one notification")
			ts.Stop()
		})
	}
}
