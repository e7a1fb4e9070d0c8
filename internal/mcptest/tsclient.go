package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/toolscope/toolscope/internal/testutil"
)

// The official TypeScript SDK client (testdata/tsclient/client.mjs), not
// built on the go-sdk: every MCP endpoint toolscope serves (agentctl's,
// the orchestrator's hosted one) passes the same interop cases with it.

var (
	npmOnce sync.Once
	npmErr  error
	npmOut  []byte
)

// tsClientDir is the client's directory, next to this file.
func tsClientDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "tsclient")
}

// TSEvent is one line the TypeScript client prints: "ready" once
// connected (with the protocol negotiated and the tools' names), then
// "changed" after each tools/list_changed (with the names re-listed).
type TSEvent struct {
	Event    string   `json:"event"`
	Protocol *string  `json:"protocol"`
	Names    []string `json:"names"`
	// Instructions are the server's instructions as the client read them
	// at initialize.
	Instructions string `json:"instructions"`
}

// TSClient is a running TypeScript client.
type TSClient struct {
	Events <-chan TSEvent
	// Stop closes its stdin, which ends it, and checks it exited cleanly.
	Stop func()
}

// RunTSClient makes sure Node.js and the locked @modelcontextprotocol/sdk
// are installed (npm ci from package-lock.json, once per test binary),
// then starts the client with args ("http URL TOKEN" or "stdio COMMAND
// ARG..."), with env added to its environment.
func RunTSClient(t *testing.T, env []string, args ...string) TSClient {
	t.Helper()
	dir := tsClientDir()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.SkipOrFailUnderCI(t, "node is not installed, so the TypeScript SDK interop test cannot run; install Node.js 18+ and npm (.ci/run installs nodejs)")
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		npmOut, npmErr = cmd.CombinedOutput()
	})
	if npmErr != nil {
		t.Fatalf("npm ci in %s: %v: %s", dir, npmErr, npmOut)
	}
	cmd := exec.Command("node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	logs := &testutil.SyncBuffer{}
	cmd.Stderr = logs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan TSEvent, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e TSEvent
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
			if err != nil {
				t.Errorf("TypeScript client: %v: %s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
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
	return TSClient{Events: events, Stop: stop}
}

// Next returns the client's next event, or false after timeout.
func (c TSClient) Next(t *testing.T, timeout time.Duration) (TSEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-c.Events:
		if !ok {
			t.Fatal("the TypeScript client exited early")
		}
		return e, true
	case <-time.After(timeout):
		return TSEvent{}, false
	}
}
