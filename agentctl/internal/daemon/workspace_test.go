package daemon_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/agentuid"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/gittest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

const gitToken = "ghs_workspaceTestToken0123456789abcdefABCD"

// agentScript is the agent of the workspace tests: it runs in its working
// directory, tries to reach the mirrors, dumps its environment, and
// commits a change to the api checkout on the branch it was given.
const agentScript = `
pwd > where
id -u >> where
env > env.txt
ls "$MIRRORS" > mirrors.txt 2>&1 || echo refused >> mirrors.txt
cd api
echo "$CHANGE" >> README.md
git commit -qam "agent: $CHANGE" 2> ../commit.err
git rev-parse --abbrev-ref HEAD > ../branch
`

// workspaceHarness is an agentctl whose agents get a uid of their own
// when the test runs as root (as CI does), and a git server on loopback
// that takes only gitToken, with acme/api seeded.
func workspaceHarness(t *testing.T, adjust ...func(*daemon.Options)) (*harness, *gittest.Host, string, int) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (.ci/run installs it): %v", err)
	}
	uid := -1
	h := newHarnessWith(t, func(o *daemon.Options) {
		if os.Geteuid() == 0 {
			uid = 1_601_000_000 + os.Getpid()%1_000_000 // one per test process, apart from the executors' tests'
			o.AgentUIDs = agentuid.Single(uint32(uid))
		}
		for _, f := range adjust {
			f(o)
		}
	})
	if uid < 0 {
		testutil.SkipOrFailUnderCI(t, "the workspace tests run the agent under a uid of its own, which needs root (uid %d)", os.Geteuid())
	}
	host := gittest.New(gitToken, nil)
	t.Cleanup(host.Close)
	_, err := host.Seed("acme/api", map[string]string{"README.md": "hello\n"}, "main")
	require.NoError(t, err)
	srv := httptest.NewServer(host)
	t.Cleanup(srv.Close)
	return h, host, srv.URL + "/acme/api.git", uid
}

func workspaceSpec(id, url, token, change string, h *harness) *agentctlv1.LaunchSpec {
	sp := spec(id, agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
	sp.Checkouts = []*agentctlv1.Checkout{{Key: "github.com/acme/api", Url: url, Branch: "toolscope/task_" + id + "/" + id, Path: "api",
		FetchCredential: &agentctlv1.GitCredential{Username: "x-access-token", Token: token}}}
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{"/bin/sh", "-c", agentScript}, Env: map[string]string{
		"MIRRORS": filepath.Join(h.stateDir, "mirrors"), "CHANGE": change,
		"GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@localhost", "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@localhost"}}
	return sp
}

func awaitExit(t *testing.T, events chan *agentctlv1.SessionEvent) *agentctlv1.SessionEvent {
	t.Helper()
	select {
	case e := <-events:
		require.Equal(t, agentctlv1.SessionEventKind_SESSION_EVENT_KIND_AGENT_EXITED, e.GetKind())
		return e
	case <-time.After(2 * time.Minute):
		t.Fatal("no agent-exited event")
		return nil
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestTheAgentStartsInItsCheckoutAndDeliversThroughAgentctl: a session
// with a checkout starts its agent (under its own uid) in its workspace,
// on the session's branch of the repository; the agent never sees the
// credential nor the mirrors, and its commit reaches the remote only
// through Deliver, on the session's branch. The workspace outlives the
// stop, taken back from the agent's uid, and a relaunch of the session
// continues from it.
func TestTheAgentStartsInItsCheckoutAndDeliversThroughAgentctl(t *testing.T) {
	h, host, url, uid := workspaceHarness(t)
	_, events := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{} })
	ctx := context.Background()

	st := h.create(t, workspaceSpec("s1", url, gitToken, "first", h))
	ws := filepath.Join(h.stateDir, "workspaces", "s1")
	assert.Equal(t, ws, st.GetWorkspaceDir())
	assert.Equal(t, []*agentctlv1.CheckoutState{{Key: "github.com/acme/api", Path: "api", Branch: "toolscope/task_s1/s1"}},
		stripped(st.GetCheckouts()))
	assert.Contains(t, st.GetToolNames(), toolapi.GitPushTool)
	e := awaitExit(t, events)
	require.Zero(t, e.GetAgentExitCode(), "the agent's output: %s; commit: %s", e.GetAgentOutputTail(), read(t, filepath.Join(ws, "commit.err")))

	assert.Equal(t, ws+"\n"+strconv.Itoa(uid)+"\n", read(t, filepath.Join(ws, "where")), "the agent runs in its workspace, under its uid")
	assert.Equal(t, "toolscope/task_s1/s1\n", read(t, filepath.Join(ws, "branch")))
	assert.Contains(t, read(t, filepath.Join(ws, "mirrors.txt")), "refused", "the mirrors are not the agent's to read")
	assert.NotContains(t, read(t, filepath.Join(ws, "env.txt")), gitToken)
	assert.NotContains(t, h.logs.String(), gitToken)
	commit := strings.TrimSpace(gitOut(t, filepath.Join(ws, "api"), "rev-parse", "HEAD"))

	_, ok := host.Head("acme/api", "toolscope/task_s1/s1")
	assert.False(t, ok, "nothing reaches the remote before a delivery")
	// Its work, measured on request: the commit is not pushed. A plain
	// state reports the last measure, and measures nothing.
	plain, err := h.client.GetSessionState(ctx, &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.Nil(t, plain.GetStatus().GetCheckouts()[0].GetWork(), "a plain state measured the work")
	assert.Equal(t, workOf{Head: commit, Unpushed: 1}, work(t, h, "s1"))
	plain, err = h.client.GetSessionState(ctx, &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.Equal(t, workOf{Head: commit, Unpushed: 1}, toWork(plain.GetStatus().GetCheckouts()[0].GetWork()))

	_, err = h.client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: "s1", Key: "github.com/acme/other",
		Credential: &agentctlv1.GitCredential{Username: "x-access-token", Token: gitToken}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a repository the session has no checkout of: %v", err)
	_, err = h.client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: "s2", Key: "github.com/acme/api",
		Credential: &agentctlv1.GitCredential{Username: "x-access-token", Token: gitToken}})
	assert.Equal(t, codes.NotFound, status.Code(err), "a session not hosted here: %v", err)
	_, err = h.client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: "s1", Key: "github.com/acme/api",
		Credential: &agentctlv1.GitCredential{Username: "x-access-token", Token: "wrong-token-0123456789"}})
	require.Error(t, err, "the remote refuses another credential")
	assert.NotContains(t, err.Error(), "wrong-token-0123456789")

	d, err := h.client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: "s1", Key: "github.com/acme/api",
		Credential: &agentctlv1.GitCredential{Username: "x-access-token", Token: gitToken}})
	require.NoError(t, err)
	assert.Equal(t, "refs/heads/toolscope/task_s1/s1", d.GetRef())
	assert.Equal(t, commit, d.GetCommit())
	head, ok := host.Head("acme/api", "toolscope/task_s1/s1")
	require.True(t, ok)
	assert.Equal(t, commit, head, "the remote holds the agent's commit on the session's branch")
	main, _ := host.Head("acme/api", "main")
	assert.NotEqual(t, commit, main, "and only there")
	assert.Equal(t, workOf{Head: commit}, work(t, h, "s1"), "delivered: pushed")

	// A file the agent leaves uncommitted: the stop measures it, after the
	// agent ended.
	left := filepath.Join(ws, "api", "notes.txt")
	require.NoError(t, os.WriteFile(left, []byte("unfinished\n"), 0o644))
	require.NoError(t, os.Chown(left, uid, uid))
	stopped, err := h.client.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	require.Len(t, stopped.GetStatus().GetCheckouts(), 1)
	assert.Equal(t, workOf{Head: commit, Uncommitted: 1}, toWork(stopped.GetStatus().GetCheckouts()[0].GetWork()))
	require.NoError(t, os.Remove(left))
	info, err := os.Stat(ws)
	require.NoError(t, err, "a stop keeps the workspace")
	assert.Equal(t, uint32(os.Geteuid()), info.Sys().(*syscall.Stat_t).Uid, "and takes it back from the agent's uid, which serves later sessions")
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	h.create(t, workspaceSpec("s1", url, gitToken, "second", h))
	e = awaitExit(t, events)
	require.Zero(t, e.GetAgentExitCode(), "the agent's output: %s", e.GetAgentOutputTail())
	log := gitOut(t, filepath.Join(ws, "api"), "log", "--format=%s")
	assert.Equal(t, "agent: second\nagent: first\ninitial commit", log, "the relaunch continued the kept checkout")
	_, err = h.client.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
}

// TestACheckoutNotMadeIsReportedAndTheSessionStartsWithoutIt: a
// repository that cannot be fetched is not in the workspace, the status
// says why (naming no credential), and the session shows no workspace
// tool; so is a workspaces directory the agent's uid could not reach.
// Malformed checkouts are refused.
func TestACheckoutNotMadeIsReportedAndTheSessionStartsWithoutIt(t *testing.T) {
	h, _, url, uid := workspaceHarness(t)
	ctx := context.Background()
	sp := workspaceSpec("s1", url, "wrong-token-0123456789", "x", h)
	sp.Agent = nil
	st := h.create(t, sp)
	require.Len(t, st.GetCheckouts(), 1)
	c := st.GetCheckouts()[0]
	assert.Equal(t, "github.com/acme/api", c.GetKey())
	assert.Contains(t, c.GetError(), "fetching the repository failed")
	assert.NotContains(t, c.GetError(), "wrong-token-0123456789")
	assert.NotContains(t, h.logs.String(), "wrong-token-0123456789")
	_, err := os.Stat(filepath.Join(h.stateDir, "workspaces", "s1", "api"))
	assert.True(t, os.IsNotExist(err), "no checkout: %v", err)
	assert.NotContains(t, st.GetToolNames(), toolapi.GitPushTool, "no checkout, no workspace tool")
	_, err = h.client.Deliver(ctx, &agentctlv1.DeliverRequest{SessionId: "s1", Key: "github.com/acme/api",
		Credential: &agentctlv1.GitCredential{Username: "x-access-token", Token: gitToken}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)

	// A good one shows it.
	_, err = h.client.StopSession(ctx, &agentctlv1.StopSessionRequest{SessionId: "s1"}) // its uid
	require.NoError(t, err)
	sp = workspaceSpec("s2", url, gitToken, "x", h)
	sp.Agent = nil
	st = h.create(t, sp)
	assert.Empty(t, st.GetCheckouts()[0].GetError())
	assert.Equal(t, toolapi.WorkspaceSurface("github"), st.GetToolNames())

	if uid >= 0 {
		closed := filepath.Join(t.TempDir(), "closed")
		require.NoError(t, os.Mkdir(closed, 0o700))
		h2 := newHarnessWith(t, func(o *daemon.Options) {
			o.AgentUIDs = agentuid.Single(uint32(uid + 1))
			o.WorkspacesDir = filepath.Join(closed, "workspaces")
		})
		sp = workspaceSpec("s3", url, gitToken, "x", h)
		sp.Agent = &agentctlv1.AgentCommand{Argv: []string{"/bin/sh", "-c", "exit 0"}} // starts where it would without a workspace
		st = h2.create(t, sp)
		assert.Contains(t, st.GetCheckouts()[0].GetError(), "cannot reach the workspaces directory")
		assert.Contains(t, st.GetCheckouts()[0].GetError(), closed)
		assert.Empty(t, st.GetWorkspaceDir(), "no checkout, no workspace")
	}

	for _, bad := range []*agentctlv1.Checkout{
		{Key: "github.com/acme/api", Url: url, Branch: "b", Path: "../escape"},
		{Key: "github.com/acme/api", Url: url, Branch: "b", Path: ".git"},
		{Key: "github.com/acme/api", Url: url, Branch: "", Path: "api"},
	} {
		sp := spec("s9", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
		sp.Checkouts = []*agentctlv1.Checkout{bad}
		_, err := h.client.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: sp})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v: %v", bad, err)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gittest.Git(dir, append([]string{"-c", "safe.directory=*"}, args...)...)
	require.NoError(t, err, out)
	return out
}

// stripped are the states as plain values, for comparison.
// workOf is a checkout's work as a comparable value.
type workOf struct {
	Head                  string
	Uncommitted, Unpushed uint32
	Error                 string
}

func toWork(w *agentctlv1.CheckoutWork) workOf {
	return workOf{w.GetHead(), w.GetUncommitted(), w.GetUnpushed(), w.GetError()}
}

// work measures the work of a session's one checkout.
func work(t *testing.T, h *harness, id string) workOf {
	t.Helper()
	st, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: id, Work: true})
	require.NoError(t, err)
	require.Len(t, st.GetStatus().GetCheckouts(), 1)
	require.NotNil(t, st.GetStatus().GetCheckouts()[0].GetWork(), "not measured")
	return toWork(st.GetStatus().GetCheckouts()[0].GetWork())
}

func stripped(in []*agentctlv1.CheckoutState) []*agentctlv1.CheckoutState {
	out := []*agentctlv1.CheckoutState{}
	for _, c := range in {
		out = append(out, &agentctlv1.CheckoutState{Key: c.GetKey(), Path: c.GetPath(), Branch: c.GetBranch(), Error: c.GetError()})
	}
	return out
}

// TestARepositoryAttachedWhileTheSessionRunsIsCheckedOutBeforeItsTools: a
// push that gives checkouts with its provider set makes those the
// workspace lacks before the set applies: when the client hears of the
// new tools, the checkout is there. One that cannot be made is reported
// and the set applies all the same; one the workspace has is kept.
func TestARepositoryAttachedWhileTheSessionRunsIsCheckedOutBeforeItsTools(t *testing.T) {
	h, _, url, _ := workspaceHarness(t)
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	st := h.create(t, sp)
	assert.Empty(t, st.GetCheckouts())
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	gen := uint64(1)
	c.Subscribe(t, func() { // the notification stream is up
		gen++
		h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{[]string{"gitlab", ""}[gen%2]}, Generation: gen}})
	})
	gen++
	if h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Generation: gen}}).GetToolsChanged() {
		changedOnce(t, c, "back to no provider")
	}
	checkout := func(key, path, token string) *agentctlv1.Checkout {
		return &agentctlv1.Checkout{Key: key, Url: url, Branch: "toolscope/task_s1/s1", Path: path,
			FetchCredential: &agentctlv1.GitCredential{Username: "x-access-token", Token: token}}
	}
	ws := filepath.Join(h.stateDir, "workspaces", "s1")

	// A checkout refused by the remote: reported, and github's tools
	// apply without the workspace's.
	gen++
	resp := h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: gen},
		Checkouts: []*agentctlv1.Checkout{checkout("github.com/acme/broken", "broken", "wrong-token-0123456789")}})
	require.Len(t, resp.GetCheckouts(), 1)
	assert.Contains(t, resp.GetCheckouts()[0].GetError(), "fetching the repository failed")
	assert.NotContains(t, resp.GetCheckouts()[0].GetError(), "wrong-token-0123456789")
	assert.Empty(t, resp.GetWorkspaceDir(), "no checkout in it")
	changedOnce(t, c, "github's tools")
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))

	// A good one, with gitlab's tools: the checkout is in the workspace
	// when the client hears of them.
	found := make(chan error, 1)
	go func() {
		<-c.Changed()
		_, err := os.Stat(filepath.Join(ws, "api", ".git", "HEAD"))
		found <- err
	}()
	gen++
	resp = h.apply(t, "s1", &agentctlv1.Surface{ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github", "gitlab"}, Generation: gen},
		Checkouts: []*agentctlv1.Checkout{checkout("github.com/acme/broken", "broken", gitToken), checkout("github.com/acme/api", "api", gitToken)}})
	assert.True(t, resp.GetToolsChanged())
	assert.Equal(t, ws, resp.GetWorkspaceDir())
	assert.Equal(t, []*agentctlv1.CheckoutState{{Key: "github.com/acme/broken", Path: "broken", Branch: "toolscope/task_s1/s1", Error: resp.GetCheckouts()[0].GetError()},
		{Key: "github.com/acme/api", Path: "api", Branch: "toolscope/task_s1/s1"}}, stripped(resp.GetCheckouts()),
		"the checkout the workspace has (failed) is kept as it is; the new one is made")
	select {
	case err := <-found:
		require.NoError(t, err, "the client heard of the new tools before the checkout was made")
	case <-time.After(mcptest.Hang):
		t.Fatal("no list_changed")
	}
	assert.Equal(t, toolapi.WorkspaceSurface("github", "gitlab"), c.Names(t))
	assert.Equal(t, "toolscope/task_s1/s1", strings.TrimSpace(gitOut(t, filepath.Join(ws, "api"), "rev-parse", "--abbrev-ref", "HEAD")))

	// Two checkouts at one path are refused whole.
	gen++
	_, err := h.client.ApplySurface(context.Background(), &agentctlv1.ApplySurfaceRequest{SessionId: "s1", Surface: &agentctlv1.Surface{
		ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: gen},
		Checkouts:   []*agentctlv1.Checkout{checkout("github.com/acme/other", "api", gitToken)}}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "surface.checkouts[0].path")
}

// TestWorkspacesStayWithinTheirDiskBound: once the host's workspaces and
// mirrors use their bound, a checkout is not made: its error names the
// use, the bound, the flag and what frees room; the session starts
// without it. The use is a metric.
func TestWorkspacesStayWithinTheirDiskBound(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	const bound = 64 << 10 // one checkout of acme/api with its mirror is more
	h, _, url, _ := workspaceHarness(t, func(o *daemon.Options) { o.WorkspacesMaxBytes, o.Metrics = bound, reg })
	used := func() float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "toolscope_agentctl_workspaces_bytes" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no toolscope_agentctl_workspaces_bytes metric")
		return 0
	}

	first := workspaceSpec("s1", url, gitToken, "x", h)
	first.Agent = nil
	st := h.create(t, first)
	require.Len(t, st.GetCheckouts(), 1)
	assert.Empty(t, st.GetCheckouts()[0].GetError(), "within the bound: nothing was on disk yet")
	assert.Less(t, used(), float64(bound), "measured before the first checkout: its directories only")
	// Stopped, its workspace stays, and its uid serves the next session.
	_, err := h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)

	second := workspaceSpec("s2", url, gitToken, "x", h)
	second.Agent = nil
	st = h.create(t, second)
	require.Len(t, st.GetCheckouts(), 1)
	refusal := st.GetCheckouts()[0].GetError()
	assert.Contains(t, refusal, "of their 0.1 MiB bound")
	assert.Contains(t, refusal, "--workspaces-max-bytes")
	assert.Contains(t, refusal, "toolscope session clean")
	assert.Greater(t, used(), float64(bound), "the first checkout and its mirror")
	assert.NoDirExists(t, filepath.Join(h.stateDir, "workspaces", "s2", "api"), "nothing half-made")
	assert.Equal(t, toolapi.Surface("github"), st.GetToolNames(), "the session starts without it: no git_push")
}

// TestAgentUIDsNeedReachableSessionDirectories (issue 33): agentctl
// with agent uids and a state directory they may not enter (a remote
// daemon's 0700 directory) would start agents that reach neither their
// HOME nor their MCP configuration, with none of their tools. It refuses
// to start instead, naming the directory that stops them and the flag;
// with the state directory opened, it starts, and an agent's session
// directory is its own.
func TestAgentUIDsNeedReachableSessionDirectories(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "agents under uids of their own need root (uid %d)", os.Geteuid())
	}
	uid := uint32(1_602_000_000 + os.Getpid()%1_000_000)
	state := t.TempDir() // 0700, under a 0700 directory
	opts := daemon.Options{Secret: secret, StateDir: state, AgentUIDs: agentuid.Single(uid)}
	_, err := daemon.New(opts)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.ErrorContains(t, err, "could not reach their session directories in "+filepath.Join(state, "sessions"))
	assert.ErrorContains(t, err, "may not enter "+filepath.Dir(state)+" ", "the directory that stops them")
	assert.ErrorContains(t, err, "--state-dir", "what to do")

	require.NoError(t, os.Chmod(filepath.Dir(state), 0o711))
	require.NoError(t, os.Chmod(state, 0o711))
	d, err := daemon.New(opts)
	require.NoError(t, err)
	d.Close()
	require.NoError(t, agentuid.Reaches(uid, filepath.Join(state, "sessions"), agentuid.Enter))
}

// TestAnAgentStartsInItsOwnDirectoryAndLeavesNothingInSharedTemp (issue
// 33, item 8): an agent under its own uid, launched without a working
// directory or a checkout, starts in its session's directory, not in
// agentctl's (on the local executor, the orchestrator's); what it leaves
// in /tmp, /var/tmp and /dev/shm is removed when its session stops, before
// its uid serves another session; another uid's files there stay.
func TestAnAgentStartsInItsOwnDirectoryAndLeavesNothingInSharedTemp(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFailUnderCI(t, "agents under uids of their own need root (uid %d)", os.Geteuid())
	}
	uid := uint32(1_603_000_000 + os.Getpid()%1_000_000)
	h := newHarnessWith(t, func(o *daemon.Options) { o.AgentUIDs = agentuid.Single(uid) })
	id := strconv.Itoa(os.Getpid())
	left := []string{"/tmp/toolscope-test-leak-" + id, "/var/tmp/toolscope-test-leak-" + id, "/dev/shm/toolscope-test-leak-" + id}
	others := filepath.Join("/tmp", "toolscope-test-other-"+id)
	require.NoError(t, os.WriteFile(others, []byte("another uid's"), 0o644))
	require.NoError(t, os.Chown(others, int(uid)+1, int(uid)+1))
	t.Cleanup(func() {
		_ = os.Remove(others)
		for _, p := range left {
			_ = os.RemoveAll(p)
		}
	})
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{"/bin/sh", "-c",
		`pwd > "$HOME/pwd.tmp" && mv "$HOME/pwd.tmp" "$HOME/pwd"; echo x > "$1"; echo y > "$2"; mkdir "$3" && echo z > "$3/f"; exec sleep 600`,
		"sh", left[0], left[1], left[2]}}
	h.create(t, sp)
	home := filepath.Join(h.stateDir, "sessions", "s1")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(left[2], "f"))
		_, err2 := os.Stat(filepath.Join(home, "pwd"))
		return err == nil && err2 == nil
	}, time.Minute, 10*time.Millisecond, "the agent ran")
	pwd, err := os.ReadFile(filepath.Join(home, "pwd"))
	require.NoError(t, err)
	assert.Equal(t, home, strings.TrimSpace(string(pwd)), "it starts in its own directory")

	_, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	for _, p := range left {
		assert.NoFileExists(t, p, "what the agent left is gone with its session")
		assert.NoDirExists(t, p)
	}
	assert.FileExists(t, others, "another uid's file stays")
}
