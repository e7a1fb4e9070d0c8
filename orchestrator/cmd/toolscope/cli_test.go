package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
)

// commandLine is the toolscope binary as installed: the command line
// without the server (ADR 0035). This test binary stands in for the
// toolscope-server next to it.
var commandLine = testutil.Binary{Package: "github.com/toolscope/toolscope/orchestrator/cmd/toolscope", Name: "toolscope"}

// The toolscope binary links none of the server: of this repository, only
// the packages below, and none of the executors' and stores' libraries. A
// new import must be added here on purpose, or the CLI pays its start-up
// (ADR 0035: 29 ms → 10 ms for `toolscope version`).
func TestCommandLineLinksNoServer(t *testing.T) {
	const module = "github.com/toolscope/toolscope/"
	allowed := map[string]bool{}
	for _, p := range []string{
		"orchestrator/cmd/toolscope", "orchestrator/internal/cli", "orchestrator/internal/paths",
		"orchestrator/internal/model", "orchestrator/internal/api/eventkind", "gen/toolscope/orchestrator/v1",
		"internal/errdefs", "internal/bearer", "internal/grpcerr", "internal/pki", "internal/providers",
		"internal/tracing/tracesetup", "internal/version", "internal/toolapi",
		"internal/profiles", // the profiles, auths and named agents of session launch: the standard library only
	} {
		allowed[module+p] = true
	}
	out, err := exec.Command("go", "list", "-deps", commandLine.Package).Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, module+"orchestrator/internal/cli", "control: the listing is the CLI's")
	for _, dep := range deps {
		if strings.HasPrefix(dep, module) {
			assert.True(t, allowed[dep], "the toolscope binary links %s", dep)
		}
		for _, heavy := range []string{"k8s.io/", "github.com/docker/", "modernc.org/", "github.com/jackc/", "github.com/modelcontextprotocol/"} {
			assert.False(t, strings.HasPrefix(dep, heavy), "the toolscope binary links %s", dep)
		}
	}
}

// serve and demo, in the toolscope binary, are the toolscope-server next
// to it given the same command line: the same process (pid), flags and
// help included, and a clear error when there is no server binary.
func TestServeRunsTheServerBinary(t *testing.T) {
	dir := t.TempDir()
	toolscope := filepath.Join(dir, "toolscope")
	copyFile(t, commandLine.Path(t), toolscope)
	require.NoError(t, os.Symlink(os.Args[0], filepath.Join(dir, cli.ServerBinary)))

	o := startServerAs(t, toolscope, filepath.Join(t.TempDir(), "data"), nil)
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(o.cmd.Process.Pid), "exe"))
	require.NoError(t, err)
	self, err := filepath.EvalSymlinks(os.Args[0])
	require.NoError(t, err)
	assert.Equal(t, self, exe, "the process toolscope serve started is the server binary's")
	assert.Contains(t, o.run(t, "workspace", "create", "acme").stdout, "acme", "the server answers")
	o.stop(t)

	help, err := commandOf(context.Background(), toolscope, "serve", "--help").Output()
	require.NoError(t, err)
	assert.Contains(t, string(help), "--kubernetes-namespace", "serve's own help, from the server binary")
	root, err := commandOf(context.Background(), toolscope, "--help").Output()
	require.NoError(t, err)
	assert.Contains(t, string(root), cli.ServeShort)
	assert.Contains(t, string(root), cli.DemoShort)

	// Alone, with nothing on PATH either.
	alone := filepath.Join(t.TempDir(), "toolscope")
	copyFile(t, commandLine.Path(t), alone)
	for _, command := range []string{"serve", "demo"} {
		cmd := commandOf(context.Background(), alone, "--json", command, "--data-dir", t.TempDir())
		cmd.Env = append(cmd.Env, "PATH="+t.TempDir())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, command)
		assert.Equal(t, cli.ExitNotFound, exit.ExitCode(), command)
		var e struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(stderr.String()), &e), stderr.String())
		assert.Equal(t, "not_found", e.Error.Code)
		assert.Contains(t, e.Error.Message, "'toolscope "+command+"' runs the orchestrator from the toolscope-server binary")
		assert.Contains(t, e.Error.Message, "next to "+alone)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}
