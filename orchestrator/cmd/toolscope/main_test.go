package main

// End-to-end tests of the toolscope binary: a real server process on a real
// loopback socket with a real SQLite file, driven by real CLI processes.
// The test binary doubles as the toolscope binary (TestMain re-executes it
// with TOOLSCOPE_TEST_AS_MAIN set), so no separate build step is needed and
// the race detector covers the server too.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/api"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/cli/servercmd"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

const asMain = "TOOLSCOPE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, servercmd.Commands))
	}
	// No test touches the user's CLI config file: every process started
	// here reads this one unless its test names its own.
	dir, err := os.MkdirTemp("", "toolscope-test-config-")
	if err != nil {
		panic(err)
	}
	_ = os.Setenv("TOOLSCOPE_CONFIG", filepath.Join(dir, "config.json"))
	os.Exit(testutil.LeaveNothing(m, catalogtest.RemoveBuilds, executortest.RemoveBuilds, listAgent.Remove, commandLine.Remove, pgtest.StopShared,
		func() { _ = os.RemoveAll(dir) }))
}

// command runs this test binary as toolscope-server: the whole command
// line, serve and demo included.
func command(ctx context.Context, args ...string) *exec.Cmd {
	return commandOf(ctx, os.Args[0], args...)
}

// commandOf runs program with args, and this test binary, wherever it runs,
// as toolscope-server.
func commandOf(ctx context.Context, program string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	return cmd
}

// orchestrator is a running `toolscope serve` process.
type orchestrator struct {
	addr    string // the socket, as --server takes it: unix:///path
	socket  string // its path
	tcp     string // the TCP address, with --listen
	metrics string // the metrics' URL, with --metrics-addr
	cmd     *exec.Cmd
	logs    *testutil.SyncBuffer
}

func startServer(t testing.TB, dataDir string, args ...string) *orchestrator {
	t.Helper()
	return startServerEnv(t, dataDir, nil, args...)
}

// startServerEnv starts `toolscope serve` with extra environment. It
// serves on its Unix socket in dataDir; tests that need TCP pass --listen.
func startServerEnv(t testing.TB, dataDir string, env []string, args ...string) *orchestrator {
	t.Helper()
	return startServerAs(t, os.Args[0], dataDir, env, args...)
}

// startServerAs is startServerEnv through program's serve command.
func startServerAs(t testing.TB, program, dataDir string, env []string, args ...string) *orchestrator {
	t.Helper()
	cmd := commandOf(context.Background(), program, append([]string{"serve", "--json", "--data-dir", dataDir}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	t.Cleanup(func() { endSessions(t, dataDir) })
	logs := &testutil.SyncBuffer{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	o := &orchestrator{cmd: cmd, logs: logs}
	t.Cleanup(func() { o.stop(t) })

	// Wait for the ready line, with a deadline.
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		var r struct{ Socket, Addr, Database, Metrics string }
		require.NoError(t, json.Unmarshal([]byte(line), &r), "ready line %q; logs: %s", line, logs)
		if !slices.Contains(args, "--database") {
			assert.Equal(t, filepath.Join(dataDir, "toolscope.db"), r.Database)
		}
		assert.Equal(t, filepath.Join(dataDir, "toolscope.sock"), r.Socket)
		o.addr, o.socket, o.tcp, o.metrics = "unix://"+r.Socket, r.Socket, r.Addr, r.Metrics
	case <-time.After(2 * time.Minute):
		t.Fatalf("server not ready; logs: %s", logs)
	}
	return o
}

// endSessions ends the local sessions of the data directory dataDir once
// the test's servers are gone: their agentctl processes outlive a server
// by design (a restarted server reattaches them). It removes the sessions
// directory each named, as stopping the session would have.
func endSessions(t testing.TB, dataDir string) {
	t.Helper()
	for _, args := range testutil.StopProcessesNaming(t, dataDir) {
		fields := strings.Fields(args)
		if i := slices.Index(fields, "--sessions-dir"); i >= 0 && i+1 < len(fields) {
			assert.NoError(t, os.RemoveAll(fields[i+1]))
		}
		// The local executor releases an agent uid's claim when it sees its
		// agentctl end; these were ended behind its back.
		if i := slices.Index(fields, "--agent-uids"); i >= 0 && i+1 < len(fields) {
			if r, err := agentuid.Parse(fields[i+1]); err == nil {
				for uid := r.First; uid <= r.Last && uid != 0; uid++ {
					agentuid.Release(uid)
				}
			}
		}
	}
}

// stop sends SIGTERM and expects a clean exit.
func (o *orchestrator) stop(t testing.TB) {
	t.Helper()
	if o.cmd.ProcessState != nil {
		return
	}
	require.NoError(t, o.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- o.cmd.Wait() }()
	select {
	case err := <-done:
		assert.NoError(t, err, "server exit; logs: %s", o.logs)
	case <-time.After(2 * time.Minute):
		_ = o.cmd.Process.Kill()
		t.Fatalf("server did not stop on SIGTERM; logs: %s", o.logs)
	}
}

type result struct {
	stdout, stderr string
	code           int
}

func (o *orchestrator) run(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, append([]string{"--server", o.addr}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// ok runs a command that must succeed and returns its stdout.
func (o *orchestrator) ok(t testing.TB, args ...string) string {
	t.Helper()
	r := o.run(t, args...)
	require.Equal(t, 0, r.code, "toolscope %v: %s", args, r.stderr)
	return r.stdout
}

// id runs a --json command and returns the id of the named object.
func (o *orchestrator) id(t testing.TB, object string, args ...string) string {
	t.Helper()
	var resp map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(o.ok(t, append([]string{"--json"}, args...)...)), &resp))
	id, _ := resp[object]["id"].(string)
	require.NotEmpty(t, id, "no %s id in response", object)
	return id
}

// TestCLIScenario is the acceptance scenario: a workspace with a
// github, a gitlab and a local repository; a task on the first; the other
// two attached in one batch; the task's provider set is github,gitlab. It
// survives a server restart.
func TestCLIScenario(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServer(t, dataDir)

	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api.git")
	gl := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--url", "git@gitlab.com:acme/platform/web.git")
	local := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "local", "--path", "/src/scratch")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", gh)
	assert.Equal(t, "github\n", srv.ok(t, "task", "providers", task))

	out := srv.ok(t, "source", "add", task, "--repo", gl, "--repo", local)
	assert.Contains(t, out, "attached 2 repositories in one batch")
	assert.Equal(t, "github,gitlab\n", srv.ok(t, "task", "providers", task))

	var set struct {
		Providers  []string `json:"providers"`
		Generation uint64   `json:"generation"`
	}
	require.NoError(t, json.Unmarshal([]byte(srv.ok(t, "--json", "task", "providers", task)), &set))
	assert.Equal(t, []string{"github", "gitlab"}, set.Providers)
	assert.Equal(t, uint64(2), set.Generation)

	human := srv.ok(t, "task", "get", task)
	for _, want := range []string{task, "fix login", "github,gitlab", "(generation 2)", "github.com/acme/api", "gitlab.com/acme/platform/web", "/src/scratch", "primary"} {
		assert.Contains(t, human, want)
	}

	// The events of the task, through the stream API.
	conn := dial(t, srv.addr)
	stream, err := pb.NewEventServiceClient(conn).WatchTaskEvents(t.Context(), &pb.WatchTaskEventsRequest{TaskId: task})
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	second, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, pb.TaskEventKind_TASK_EVENT_KIND_TASK_CREATED, first.GetEvent().GetKind())
	assert.Equal(t, pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_ADDED, second.GetEvent().GetKind())
	assert.Equal(t, []string{gl, local}, second.GetEvent().GetRepositoryIds())
	assert.Equal(t, []string{"github", "gitlab"}, second.GetEvent().GetProviderSet().GetProviders())
	require.NoError(t, conn.Close())

	// Restart on the same data dir: everything is still there.
	srv.stop(t)
	srv = startServer(t, dataDir)
	assert.Equal(t, "github,gitlab\n", srv.ok(t, "task", "providers", task))
	assert.Contains(t, srv.ok(t, "repo", "list", "--workspace", ws), "gitlab.com/acme/platform/web")
}

func TestCLIErrorsNameTheCauseAndSetTheExitCode(t *testing.T) {
	private := func() string { // a data directory no other user can read: serve warns of any other
		d := t.TempDir()
		require.NoError(t, os.Chmod(d, 0o700))
		return d
	}
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	odd := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "Perforce", "--host", "p4.example.com", "--path", "depot/main")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", odd)
	assert.Equal(t, "none\n", srv.ok(t, "task", "providers", task), "an unknown provider contributes nothing")
	assert.Contains(t, srv.ok(t, "repo", "get", odd), "Perforce", "and is stored as given")

	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"workspace", "create", "acme"}, cli.ExitAlreadyExists, `workspace named "acme"`},
		{[]string{"repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/ACME/api"}, cli.ExitAlreadyExists, gh},
		{[]string{"task", "get", "task_nope"}, cli.ExitNotFound, `task "task_nope"`},
		{[]string{"source", "add", task, "--repo", gh, "--repo", "repo_nope"}, cli.ExitNotFound, `repository "repo_nope"`},
		{[]string{"source", "add", task, "--repo", gh, "--repo", gh}, cli.ExitUsage, "invalid --repo #2: "},
		{[]string{"source", "add", task}, cli.ExitUsage, "invalid --repo: name at least one repository"},
		{[]string{"task", "create", "--workspace", ws, "--repo", gh}, cli.ExitUsage, "--title is required"},
		{[]string{"workspace", "connect", ws, "--provider", "gitea", "--token-env", "T"}, cli.ExitUsage, "invalid --provider: "},
		{[]string{"workspace", "connect", ws, "--provider", "github"}, cli.ExitUsage, "--token-env"},
		{[]string{"session", "launch", task, "--executor", "nomad"}, cli.ExitUsage, "invalid --executor: "},
		{[]string{"session", "launch", task, "--mode", "turbo"}, cli.ExitUsage, "--mode"},
		{[]string{"task", "get"}, cli.ExitUsage, "TASK"},
		{[]string{"session", "launch", task, "claude"}, cli.ExitUsage, "after '--'"},
		{[]string{"session", "launch", task, "--executor", "remote", "--", "claude"}, cli.ExitUnavailable, "executor backend not available"},
		{[]string{"session", "launch", task, "--executor", "docker"}, cli.ExitUsage, "invalid --image: "},
		{[]string{"events", "watch", task, "--after", "18446744073709551615"}, cli.ExitUsage, "invalid --after: "},
		{[]string{"events", "watch", task, "--kind", "tool.called", "--kind", "tool.caled"}, cli.ExitUsage, `invalid --kind #2: "tool.caled" is not an event kind; kinds: `},
		{[]string{"--server", "127.0.0.1:1", "workspace", "list"}, cli.ExitUnavailable, "cannot reach the toolscope server at 127.0.0.1:1"},
		{[]string{"task", "create", "--workspace", ws, "--repo", gh, "--title", "t", "--description", strings.Repeat("d", 100_000)}, cli.ExitUsage,
			"invalid --description: is 100000 bytes long; the limit is 65536 bytes"},
		{[]string{"task", "create", "--workspace", ws, "--repo", gh, "--title", "fix \x1b[2Jlogin"}, cli.ExitUsage,
			"invalid --title: contains a control character (U+001B)"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--db-max-readers", "0"}, cli.ExitUsage, "invalid --db-max-readers 0: give at least 1"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--provider-concurrency", "0"}, cli.ExitUsage, "invalid --provider-concurrency 0: give at least 1"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--provider-queue", "-1"}, cli.ExitUsage, "invalid --provider-queue -1: give 0 or more"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--lease-ttl", "5s", "--lease-renew", "5s"}, cli.ExitUsage,
			"invalid --lease-ttl 5s or --lease-renew 5s: give a positive lease and a renewal shorter than it (0: a third of the lease; defaults 15s and 5s)"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--lease-ttl", "0s"}, cli.ExitUsage, "invalid --lease-ttl 0s"},
		// PostgreSQL (--database): each mistake stops the start, before any database is needed.
		{[]string{"serve", "--data-dir", private(), "--database", "postgres://u@db.example:notaport/x"}, cli.ExitUsage,
			"invalid --database: not a PostgreSQL connection URL (postgres://user@host:port/database): invalid port"},
		{[]string{"serve", "--data-dir", private(), "--database", "postgres://u:hunter2@db.example/x"}, cli.ExitUsage,
			"invalid --database: the URL holds a password; give it as a reference instead"},
		{[]string{"serve", "--data-dir", private(), "--database", "postgres://u@db.example/x", "--database-password-env", "TOOLSCOPE_TEST_UNSET"}, cli.ExitUsage,
			"invalid database password reference: environment variable TOOLSCOPE_TEST_UNSET is not set"},
		{[]string{"serve", "--data-dir", private(), "--database-password-file", "/nonexistent"}, cli.ExitUsage,
			"invalid database password reference: given without a PostgreSQL database"},
		{[]string{"serve", "--data-dir", private(), "--database", "postgres://u@/x?host=" + t.TempDir() + "&connect_timeout=5"}, cli.ExitUnavailable,
			"cannot be reached"},
		// One case per usage-error class (issue 22): each exits 2 with one
		// line that points at --help.
		{[]string{"frobnicate"}, cli.ExitUsage, `unknown command "frobnicate" for "toolscope"`},
		{[]string{"task", "frobnicate"}, cli.ExitUsage, `unknown command "frobnicate" for "toolscope task"`},
		{[]string{"task", "get", task, "--bogus", "x"}, cli.ExitUsage, "task get: unknown flag: --bogus"},
		{[]string{"--timeout", "abc", "task", "get", task}, cli.ExitUsage, `invalid argument "abc" for "--timeout"`},
		{[]string{"--timeout", "-1s", "task", "get", task}, cli.ExitUsage, "invalid --timeout -1s: give 0 or more"},
		{[]string{"serve", "--data-dir", t.TempDir(), "--poll-interval", "-1m"}, cli.ExitUsage, "invalid --poll-interval -1m0s"},
		{[]string{"events", "watch", task, "--after", "-1"}, cli.ExitUsage, `invalid argument "-1" for "--after"`},
		{[]string{"task", "get", task, "extra"}, cli.ExitUsage, "task get takes 1 argument(s) (TASK), got 2"},
		{[]string{"repo", "add", "--workspace", ws, "--provider", "github"}, cli.ExitUsage, "--url is required"},
	}
	damaged := t.TempDir()
	require.NoError(t, os.Chmod(damaged, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(damaged, "sessions"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(damaged, "toolscope.db"), nil, 0o600))
	cases = append(cases, struct {
		args []string
		code int
		msg  string
	}{[]string{"serve", "--data-dir", damaged}, cli.ExitPrecondition,
		filepath.Join(damaged, "toolscope.db") + ": it is empty, but the data directory holds sessions of a previous run"})
	for _, c := range cases {
		r := srv.run(t, c.args...)
		assert.Equal(t, c.code, r.code, "toolscope %v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.msg, "toolscope %v", c.args)
		assert.True(t, strings.HasPrefix(r.stderr, "toolscope: "), r.stderr)
		assert.NotContains(t, r.stderr, "toolscope: toolscope", "no doubled prefix")
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)
		for _, class := range []string{": failed precondition\n", ": unavailable\n", ": invalid argument\n"} {
			assert.NotContains(t, r.stderr, class, "no class name tacked on")
		}
		if c.code == cli.ExitUsage {
			assert.Contains(t, r.stderr, "--help'", "a usage error points at --help")
		}
	}
	out := srv.ok(t, "task", "get", task)
	assert.NotContains(t, out, "acme/api", "the failed batches attached nothing")
}

// TestEventsWatchFollowsLiveEvents runs `toolscope events watch --json`
// as a process: it prints the backlog, then a batch committed while it
// runs, one JSON object per line.
func TestEventsWatchFollowsLiveEvents(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	gl := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "t", "--repo", gh)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watch := command(ctx, "--server", srv.addr, "--json", "events", "watch", task)
	stdout, err := watch.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	lines := bufio.NewScanner(stdout)
	next := func() map[string]any {
		t.Helper()
		require.True(t, lines.Scan(), "watch ended early: %v", lines.Err())
		var e map[string]any
		require.NoError(t, json.Unmarshal(lines.Bytes(), &e), lines.Text())
		return e
	}
	assert.Equal(t, "task.created", next()["kind"])

	srv.ok(t, "source", "add", task, "--repo", gl)
	live := next()
	assert.Equal(t, "sources.added", live["kind"])
	assert.Equal(t, []any{gl}, live["repository_ids"])
	assert.Equal(t, map[string]any{"providers": []any{"github", "gitlab"}, "generation": float64(2)}, live["provider_set"])

	require.NoError(t, watch.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, watch.Wait(), "watch exits cleanly when interrupted")
}

func TestReflectionAndHealthListTheServices(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	conn := dial(t, srv.addr)

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range append([]string{"grpc.health.v1.Health"}, api.ServiceNames...) {
		assert.Contains(t, names, want)
	}

	health := healthpb.NewHealthClient(conn)
	for _, name := range append([]string{""}, api.ServiceNames...) {
		r, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		require.NoError(t, err, name)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, r.GetStatus(), name)
	}
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestListingsSpanWorkspacesAndWarnOnTypos: task, repo and session
// listings cover every workspace unless filtered; a provider typo is
// stored as given but warned about with the nearest name (--quiet
// silences it); a dry run prints a command line a shell reads back.
func TestListingsSpanWorkspacesAndWarnOnTypos(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	var wss, tasks []string
	for _, name := range []string{"acme", "globex"} {
		ws := srv.id(t, "workspace", "workspace", "create", name)
		repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/"+name+"/api")
		wss = append(wss, ws)
		tasks = append(tasks, srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix "+name, "--repo", repo))
	}
	all := srv.ok(t, "task", "list")
	assert.Contains(t, all, tasks[0])
	assert.Contains(t, all, tasks[1])
	one := srv.ok(t, "task", "list", "--workspace", wss[1])
	assert.NotContains(t, one, tasks[0])
	assert.Contains(t, one, tasks[1])
	repos := srv.ok(t, "repo", "list")
	assert.Contains(t, repos, "github.com/acme/api")
	assert.Contains(t, repos, "github.com/globex/api")
	for _, line := range strings.Split(all+repos, "\n") {
		assert.Equal(t, strings.TrimRight(line, " "), line, "no trailing spaces")
	}
	assert.Equal(t, 1, strings.Count(srv.ok(t, "session", "list", "--state", "running"), "\n"), "the header only")
	assert.Equal(t, 1, strings.Count(srv.ok(t, "session", "list", "--task", tasks[0]), "\n"), "the header only")
	r := srv.run(t, "session", "list", "--state", "sleeping")
	assert.Equal(t, cli.ExitUsage, r.code, r.stderr)

	r = srv.run(t, "repo", "add", "--workspace", wss[0], "--provider", "githb", "--url", "https://github.com/acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "toolscope: warning: provider \"githb\" is not one the task gets tools for (stored as given); did you mean \"github\"?\n", r.stderr)
	assert.Contains(t, r.stdout, "githb", "stored as given")
	r = srv.run(t, "--quiet", "repo", "add", "--workspace", wss[0], "--provider", "gitlba", "--url", "https://gitlab.com/acme/web")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)

	out := srv.ok(t, "session", "launch", tasks[0], "--dry-run", "--", "codex", "exec", "fix the login bug", "it's")
	assert.Contains(t, out, `codex exec 'fix the login bug' 'it'\''s'`)
}

// TestServeHintFitsTheDatabaseAndATakenPortFailsFast: the first hint of
// `serve` suggests creating a workspace on an empty database and listing
// tasks on a populated one; a taken --listen port fails before anything
// is printed or migrated, naming the flag to change.
func TestServeHintFitsTheDatabaseAndATakenPortFailsFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hint := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := command(ctx, "serve", "--data-dir", dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var try string
		lines := bufio.NewScanner(stdout)
		for try == "" && lines.Scan() {
			if strings.HasPrefix(lines.Text(), "try: ") {
				try = lines.Text()
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		_, _ = io.Copy(io.Discard, stdout)
		require.NoError(t, cmd.Wait())
		return try
	}
	socket := filepath.Join(dir, "toolscope.sock")
	assert.Equal(t, "try: toolscope --server unix://"+socket+" workspace create demo", hint())
	srv := startServer(t, dir)
	srv.id(t, "workspace", "workspace", "create", "acme")
	srv.stop(t)
	assert.Equal(t, "try: toolscope --server unix://"+socket+" task list", hint())

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	fresh := t.TempDir()
	r := runEnv(t, nil, "serve", "--data-dir", fresh, "--listen", taken.Addr().String())
	assert.Equal(t, cli.ExitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "set --listen to another address")
	assert.Empty(t, r.stdout, "nothing printed before the port is bound")
	_, err = os.Stat(filepath.Join(fresh, "toolscope.db"))
	assert.True(t, os.IsNotExist(err), "no database created before the port is bound")

	r = runEnv(t, nil, "demo", "--no-context", "--listen", taken.Addr().String())
	assert.Equal(t, cli.ExitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "set --listen to another address")
	assert.Empty(t, r.stdout, "the demo's introduction is not printed before the port is known free")
}
