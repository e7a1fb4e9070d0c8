package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/testutil"
)

// listAgent is the launch benchmark's agent.
var listAgent = testutil.Binary{Package: "github.com/toolscope/toolscope/internal/mcptest/listagent", Name: "listagent"}

// BenchmarkSessionLaunchToFirstList: `toolscope session launch --agent
// command` on the local executor, through a running server (this test
// binary, as toolscope-server), by the toolscope binary as installed (the
// command line without the server, ADR 0035), from the CLI's start until
// the CLI has returned and the agent's MCP client
// (internal/mcptest/listagent) holds its first tools/list, against the
// floor of a bare go-sdk server process with the same tool definitions
// started and listed (executortest.BareServerFloor), interleaved. The
// session is stopped untimed.
func BenchmarkSessionLaunchToFirstList(b *testing.B) {
	reports, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	b.Cleanup(func() { _ = reports.Close() })
	listed := make(chan string, 16)
	go func() {
		for {
			conn, err := reports.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			listed <- strings.TrimSpace(line)
		}
	}()

	// The agent may run under a uid of its own (a root orchestrator): its
	// binary must be reachable by that uid, as it is once installed.
	agent := listAgent.Path(b)
	cli := commandLine.Path(b) // the toolscope binary, as installed: without the server (ADR 0035)
	require.NoError(b, os.Chmod(filepath.Dir(agent), 0o755))
	dataDir := filepath.Join(b.TempDir(), "data")
	srv := startServerEnv(b, dataDir, []string{"LISTAGENT_REPORT=" + reports.Addr().String()}, "--agentctl", executortest.Agentctl(b),
		"--agent-env", "LISTAGENT_REPORT")
	ws := srv.id(b, "workspace", "workspace", "create", "acme")
	gh := srv.id(b, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	srv.ok(b, "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	task := srv.id(b, "task", "task", "create", "--workspace", ws, "--title", "bench", "--repo", gh)

	launch := func() string {
		cmd := commandOf(context.Background(), cli, "--server", srv.addr, "--json", "session", "launch", task, "--executor", "local",
			"--agent", "command", "--env", "LISTAGENT_REPORT", "--", agent)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			b.Fatalf("session launch: %v: %s", err, ee.Stderr)
		}
		require.NoError(b, err)
		var launched struct{ ID string }
		require.NoError(b, json.Unmarshal(out, &launched), "%s", out)
		select {
		case line := <-listed:
			id, n, _ := strings.Cut(line, " ")
			require.Equal(b, launched.ID, id, "the report of another session")
			require.NotEqual(b, "0", n, "empty tool list")
		case <-time.After(2 * time.Minute):
			b.Fatalf("the agent of session %s did not list; server logs: %s", launched.ID, srv.logs)
		}
		return launched.ID
	}
	// One untimed launch first (a cold page cache, the server's first
	// session).
	srv.ok(b, "session", "stop", launch())
	floor := executortest.BareServerFloor(b, b.TempDir())
	var figure, base benchstats.Samples
	for b.Loop() {
		var id string
		figure.Time(func() { id = launch() })
		srv.ok(b, "session", "stop", id)
		var cleanup func()
		base.Time(func() { cleanup = floor(b) })
		cleanup()
	}
	benchstats.Report(b, figure, base)
}
