package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

const tsClientDir = "testdata/tsclient"

var (
	npmOnce sync.Once
	npmErr  error
	npmOut  []byte
)

// tsClient makes sure Node.js and the locked @modelcontextprotocol/sdk are
// installed (npm ci from package-lock.json, once per test binary).
func tsClient(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.SkipOrFailUnderCI(t, "node is not installed, so the TypeScript SDK interop test cannot run; install Node.js 18+ and npm (.ci/run installs nodejs)")
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = tsClientDir
		npmOut, npmErr = cmd.CombinedOutput()
	})
	require.NoError(t, npmErr, "npm ci in %s: %s", tsClientDir, npmOut)
}

type tsEvent struct {
	Event    string   `json:"event"`
	Protocol *string  `json:"protocol"`
	Names    []string `json:"names"`
}

// runTSClient starts the TypeScript client and returns its events; closing
// its stdin ends it.
func runTSClient(t *testing.T, args ...string) (<-chan tsEvent, func()) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = tsClientDir
	cmd.Env = append(os.Environ(), asMain+"=1")
	logs := &testutil.SyncBuffer{}
	cmd.Stderr = logs
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	events := make(chan tsEvent, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e tsEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()
	stop := func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "TypeScript client: %s", logs.String())
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Errorf("TypeScript client did not exit; stderr: %s", logs.String())
		}
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return events, stop
}

func nextEvent(t *testing.T, events <-chan tsEvent, timeout time.Duration) (tsEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the TypeScript client exited early")
		}
		return e, true
	case <-time.After(timeout):
		return tsEvent{}, false
	}
}

// TestTypeScriptSDKClientInterop connects the official TypeScript SDK
// client (not built on the go-sdk) to a session over streamable HTTP and
// over stdio (`agentctl mcp`): it lists the tools and receives list_changed
// after a SetProviders.
func TestTypeScriptSDKClientInterop(t *testing.T) {
	t.Parallel()
	tsClient(t)
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
			events, stop := runTSClient(t, tc.args...)
			ready, ok := nextEvent(t, events, 60*time.Second)
			require.True(t, ok, "no ready line from the TypeScript client")
			require.Equal(t, "ready", ready.Event)
			if ready.Protocol != nil {
				t.Logf("TypeScript client negotiated %s over %s", *ready.Protocol, tc.name)
			}
			assert.Equal(t, toolapi.Surface("github"), ready.Names)

			// The client opens its notification stream after connecting;
			// toggle until it reports a change.
			toggle := [][]string{{"gitlab"}, {"github"}}
			deadline := time.Now().Add(mcptest.Hang)
			for i := 0; ; i++ {
				require.True(t, time.Now().Before(deadline), "the TypeScript client never received list_changed")
				push(toggle[i%2]...)
				if e, ok := nextEvent(t, events, 500*time.Millisecond); ok {
					require.Equal(t, "changed", e.Event)
					break
				}
			}

			push("gitlab", "github")
			want := toolapi.Surface("github", "gitlab")
			for {
				e, ok := nextEvent(t, events, mcptest.Hang)
				require.True(t, ok, "no list_changed after SetProviders")
				if assert.ObjectsAreEqual(want, e.Names) {
					break
				}
			}
			_, extra := nextEvent(t, events, mcptest.Quiet)
			assert.False(t, extra, "one SetProviders, one notification")
			stop()
		})
	}
}
