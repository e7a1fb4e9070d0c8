package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

func TestMain(m *testing.M) {
	// No test reads or writes the user's CLI config file.
	dir, err := os.MkdirTemp("", "toolscope-test-config-")
	if err != nil {
		panic(err)
	}
	_ = os.Setenv("TOOLSCOPE_CONFIG", filepath.Join(dir, "config.json"))
	os.Exit(testutil.LeaveNothing(m, catalogtest.RemoveBuilds, func() { _ = os.RemoveAll(dir) }))
}

// orchestrator is server.Run in this process, on its Unix socket, with
// its logs captured; run drives it with the command line.
type orchestrator struct {
	addr string
	logs *testutil.SyncBuffer
	out  bytes.Buffer // everything every command printed
}

func startOrchestrator(t *testing.T) *orchestrator {
	t.Helper()
	o := &orchestrator{logs: &testutil.SyncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan server.Ready, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{DataDir: t.TempDir(), Agentctl: "",
			Logger: slog.New(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
			func(r server.Ready) { ready <- r })
	}()
	select {
	case r := <-ready:
		o.addr = "unix://" + r.Socket
	case err := <-done:
		t.Fatalf("server: %v; logs: %s", err, o.logs)
	case <-time.After(2 * time.Minute):
		t.Fatalf("server not ready; logs: %s", o.logs)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Errorf("server did not stop; logs: %s", o.logs)
		}
	})
	return o
}

// run runs a command and returns its stdout, stderr and exit code.
func (o *orchestrator) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), append([]string{"--server", o.addr}, args...), &stdout, &stderr, nil)
	o.out.Write(stdout.Bytes())
	o.out.Write(stderr.Bytes())
	return stdout.String(), stderr.String(), code
}

func (o *orchestrator) ok(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := o.run(t, args...)
	require.Equal(t, 0, code, "toolscope %v: %s", args, stderr)
	return stdout
}

func (o *orchestrator) json(t *testing.T, v any, args ...string) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, append([]string{"--json"}, args...)...)), v))
}

// Not parallel: the orchestrator reads its providers' references from the
// process environment, which the test sets.
func TestMCPServerAndToolCommands(t *testing.T) {
	o := startOrchestrator(t)
	httpSecret := "cli-http-" + strings.Repeat("k", 24)
	stdioSecret := "cli-stdio-" + strings.Repeat("m", 24)
	t.Setenv("CLI_DOCS_TOKEN", httpSecret)
	t.Setenv("CLI_KB_SECRET", stdioSecret)
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{Header: "Authorization", Value: "Bearer " + httpSecret})
	srv.SetTools(
		catalogtest.ToolSpec{Name: "search", Description: "Find documents (uses " + httpSecret + ")", ReadOnly: true},
		catalogtest.ToolSpec{Name: "fetch", Description: "Fetch one document"})
	files := catalogtest.NewStdioFiles(t)
	files.SetTools(t, catalogtest.ToolSpec{Name: "lookup", Description: "Look up an article"})
	t.Setenv("CLI_KB_TOOLS", files.ToolsFile)

	out := o.ok(t, "mcp-server", "add", "docs", "--url", srv.URL, "--header", "Authorization: Bearer env:CLI_DOCS_TOKEN")
	assert.Contains(t, out, "discovered 2 tools")
	assert.Contains(t, out, "2 new, 0 changed, 0 unchanged, 0 unavailable, 0 restored")
	assert.Contains(t, out, `Authorization: "Bearer " + secret from env:CLI_DOCS_TOKEN`)
	var added struct {
		Server struct {
			ID      string `json:"id"`
			Enabled bool   `json:"enabled"`
			Stdio   struct {
				Env []struct {
					Name    string `json:"name"`
					FromEnv string `json:"from_env"`
				} `json:"env"`
			} `json:"stdio"`
		} `json:"server"`
		Counts map[string]int `json:"counts"`
	}
	o.json(t, &added, "mcp-server", "add", "kb", "--stdio", catalogtest.StdioServer(t), "--env", "TOOLS_FILE=CLI_KB_TOOLS",
		"--env", "SECRET=CLI_KB_SECRET")
	assert.False(t, added.Server.Enabled)
	assert.Equal(t, map[string]int{"new": 1, "total": 1}, added.Counts)
	assert.Equal(t, "SECRET", added.Server.Stdio.Env[1].Name)
	assert.Equal(t, "CLI_KB_SECRET", added.Server.Stdio.Env[1].FromEnv)

	out = o.ok(t, "mcp-server", "list")
	assert.Contains(t, out, "docs")
	assert.Contains(t, out, "kb")
	out = o.ok(t, "mcp-server", "test", "docs")
	assert.Contains(t, out, "connected to httpserver 4.5.6")
	assert.Contains(t, out, "fetch, search")

	// The deprecated names still work for one release, and say so on
	// stderr only (stdout stays the result).
	stdout, stderr, code := o.run(t, "provider", "list")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "docs")
	assert.NotContains(t, stdout, "deprecated")
	assert.Equal(t, "toolscope: 'provider' is deprecated and will be removed in the next release; use 'toolscope mcp-server'\n", stderr)
	stdout, stderr, code = o.run(t, "tool", "list", "--provider", "kb")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "kb__lookup")
	assert.NotContains(t, stdout, "docs__")
	assert.Contains(t, stderr, "--provider is deprecated")

	// New tools are disabled; the administrator enables and assigns one.
	out = o.ok(t, "tool", "list", "--mcp-server", "docs")
	assert.Regexp(t, `docs__search\s+no\s+yes\s+yes\s+-\s+Find documents \(uses \[redacted\]\)`, out)
	ws := strings.Fields(o.ok(t, "workspace", "create", "acme"))[1]
	o.ok(t, "mcp-server", "enable", "docs")
	out = o.ok(t, "tool", "enable", "docs__search")
	assert.Contains(t, out, "enabled yes")
	out = o.ok(t, "tool", "assign", "docs__search", "--workspace", ws)
	assert.Contains(t, out, "workspaces "+ws)
	var shown struct {
		Tool struct {
			ExposedName  string   `json:"exposed_name"`
			Enabled      bool     `json:"enabled"`
			Available    bool     `json:"available"`
			WorkspaceIDs []string `json:"workspace_ids"`
			InputSchema  string   `json:"input_schema_json"`
		} `json:"tool"`
	}
	o.json(t, &shown, "tool", "show", "docs__search")
	assert.True(t, shown.Tool.Enabled && shown.Tool.Available)
	assert.Equal(t, []string{ws}, shown.Tool.WorkspaceIDs)
	assert.Equal(t, `{"type":"object"}`, shown.Tool.InputSchema)
	assert.Regexp(t, `name on the server\s+search\n`, o.ok(t, "tool", "show", "docs__search"))

	// The server changes; refresh shows what changed and keeps enablement.
	srv.SetTools(catalogtest.ToolSpec{Name: "search", Description: "Find documents by text", ReadOnly: true},
		catalogtest.ToolSpec{Name: "index", Description: "Index one"})
	out = o.ok(t, "mcp-server", "refresh", "docs")
	assert.Regexp(t, `discovered 2 tools\s+1 new, 1 changed, 0 unchanged, 1 unavailable, 0 restored`, out)
	o.json(t, &shown, "tool", "show", "docs__search")
	assert.True(t, shown.Tool.Enabled)
	out = o.ok(t, "tool", "assign", "docs__search", "--workspace", ws, "--remove")
	assert.Contains(t, out, "workspaces -")
	o.ok(t, "tool", "disable", "docs__search")
	o.ok(t, "mcp-server", "disable", "docs")

	// Refusals: exit codes per class, and no secret echoed.
	literal := "ghp_" + strings.Repeat("Z", 36)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"mcp-server", "add", "bad", "--url", srv.URL, "--header", "Authorization: Bearer " + literal}, cli.ExitUsage, "never the secret"},
		{[]string{"mcp-server", "add", "bad", "--url", srv.URL, "--header", "Authorization: env:" + literal}, cli.ExitUsage,
			"invalid --header #1: looks like a token"},
		{[]string{"mcp-server", "add", "bad", "--stdio", "/bin/sh", "--arg", "--token=" + literal}, cli.ExitUsage, "invalid --arg #1: looks like it holds a token"},
		{[]string{"mcp-server", "add", "bad"}, cli.ExitUsage, "--stdio PROGRAM or --url URL"},
		{[]string{"mcp-server", "add", "Bad", "--url", srv.URL}, cli.ExitUsage, "invalid NAME: must be 1 to 32"},
		{[]string{"mcp-server", "add", "docs", "--url", srv.URL}, cli.ExitAlreadyExists, `MCP server named "docs"`},
		{[]string{"mcp-server", "get", "nope"}, cli.ExitNotFound, `MCP server "nope"`},
		{[]string{"tool", "assign", "docs__search", "--workspace", "ws_nope"}, cli.ExitNotFound, `workspace "ws_nope"`},
		{[]string{"tool", "enable", "docs__nope"}, cli.ExitNotFound, `catalog tool "docs__nope"`},
	} {
		_, stderr, code := o.run(t, c.args...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.says, c.args)
		assert.NotContains(t, stderr, literal)
	}

	// The stdio provider fails discovery when its server is gone: the
	// error is recorded and shown, the catalog kept.
	srv.Close()
	_, stderr, code = o.run(t, "mcp-server", "refresh", "docs")
	assert.Equal(t, cli.ExitUnavailable, code, stderr)
	out = o.ok(t, "mcp-server", "get", "docs")
	assert.Contains(t, out, "then FAILED")
	assert.Contains(t, o.ok(t, "tool", "list"), "docs__index")
	out = o.ok(t, "mcp-server", "refresh", "kb")
	assert.Contains(t, out, "1 unchanged")

	// Neither secret appears in any output or log line.
	for _, s := range []string{httpSecret, stdioSecret} {
		assert.NotContains(t, o.out.String(), s)
		assert.NotContains(t, o.logs.String(), s)
	}
}
