package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	"github.com/toolscope/toolscope/agentctl/internal/mcpbridge"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

const secret = "per-launch-secret-0123456789"

// The test binary doubles as an agent: TestMain runs agentMain when
// started with TOOLSCOPE_TEST_AGENT set.
func TestMain(m *testing.M) {
	if mode := os.Getenv("TOOLSCOPE_TEST_AGENT"); mode != "" {
		os.Exit(agentMain(mode))
	}
	os.Exit(testutil.LeaveNothing(m))
}

// agentMain is a tiny agent. "list" connects to the injected MCP endpoint,
// prints what it sees and exits 3; "wait" blocks until SIGTERM.
func agentMain(mode string) int {
	switch mode {
	case "args":
		fmt.Printf("args=%s\n", strings.Join(os.Args[1:], " "))
		for i, a := range os.Args {
			if a == "--mcp-config" && i+1 < len(os.Args) {
				b, _ := os.ReadFile(os.Args[i+1])
				fmt.Printf("config=%s\n", strings.Join(strings.Fields(string(b)), ""))
			}
		}
		return 0
	case "flood":
		// 100,000 numbered lines (1.2 MB), then exit 4.
		w := bufio.NewWriter(os.Stdout)
		for i := 1; i <= 100000; i++ {
			fmt.Fprintf(w, "line %06d\n", i)
		}
		_ = w.Flush()
		return 4
	case "wait":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("waiting")
		<-ch
		return 0
	case "list":
		_, hasSecret := os.LookupEnv(daemon.EnvSecret)
		fmt.Printf("secret-in-env=%v\n", hasSecret)
		fmt.Printf("config=%s\n", os.Getenv(daemon.EnvMCPConfig))
		client := mcp.NewClient(&mcp.Implementation{Name: "test-agent"}, nil)
		cs, err := client.Connect(context.Background(), mcptest.HTTP(os.Getenv(daemon.EnvMCPURL), os.Getenv(daemon.EnvMCPToken)), nil)
		if err != nil {
			fmt.Println("connect:", err)
			return 1
		}
		defer cs.Close()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			fmt.Println("list:", err)
			return 1
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		fmt.Printf("tools=%s\n", strings.Join(names, ","))
		return 3
	}
	return 2
}

type harness struct {
	addr     string
	client   agentctlv1.AgentctlServiceClient
	logs     *testutil.SyncBuffer
	stateDir string
}

func newHarness(t testing.TB) *harness { return newHarnessWith(t, nil) }

// newHarnessWith lets a test adjust the daemon's options.
func newHarnessWith(t testing.TB, adjust func(*daemon.Options)) *harness {
	t.Helper()
	h := &harness{logs: &testutil.SyncBuffer{}, stateDir: t.TempDir()}
	opts := daemon.Options{
		Secret: secret, StateDir: h.stateDir, CallTimeout: 10 * time.Second, StopGrace: 5 * time.Second,
		AgentctlPath: "/usr/local/bin/agentctl", Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
	}
	if adjust != nil {
		adjust(&opts)
	}
	if opts.AgentUIDs.Set() {
		// The agents walk through the state directory (a test's TempDir
		// is 0700 on its way) to their sessions' directories.
		require.NoError(t, os.Chmod(filepath.Dir(h.stateDir), 0o711))
		require.NoError(t, os.Chmod(h.stateDir, 0o711))
	}
	d, err := daemon.New(opts)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := d.NewGRPCServer()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		d.Close()
		srv.Stop()
	})
	h.addr = lis.Addr().String()
	h.client = agentctlv1.NewAgentctlServiceClient(h.dial(t, secret))
	return h
}

func (h *harness) dial(t testing.TB, secret string) *grpc.ClientConn {
	t.Helper()
	opts := append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer.Credentials(secret, false)))
	}
	conn, err := grpc.NewClient(h.addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (h *harness) create(t testing.TB, spec *agentctlv1.LaunchSpec) *agentctlv1.SessionStatus {
	t.Helper()
	resp, err := h.client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{Spec: spec})
	require.NoError(t, err)
	return resp.GetStatus()
}

func (h *harness) push(t testing.TB, id string, gen uint64, set ...string) *agentctlv1.SetProvidersResponse {
	t.Helper()
	resp, err := h.client.SetProviders(context.Background(), &agentctlv1.SetProvidersRequest{
		SessionId: id, ProviderSet: &agentctlv1.ProviderSet{Providers: set, Generation: gen},
	})
	require.NoError(t, err)
	return resp
}

func spec(id string, mode agentctlv1.SessionMode, gen uint64, set ...string) *agentctlv1.LaunchSpec {
	return &agentctlv1.LaunchSpec{
		SessionId: id, TaskId: "task_" + id, WorkspaceId: "ws_1", Mode: mode,
		ProviderSet: &agentctlv1.ProviderSet{Providers: set, Generation: gen},
	}
}

// token reads the session's bearer token from the bridge config agentctl
// wrote, as `agentctl mcp` would.
func (h *harness) token(t testing.TB, id string) string {
	t.Helper()
	var cfg mcpbridge.Config
	b, err := os.ReadFile(filepath.Join(h.stateDir, "sessions", id, "bridge.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	return cfg.Token
}

func TestCallsWithoutTheSecretAreRefusedAndLoggedWithoutIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, s := range []string{"", "wrong-secret-value"} {
		c := agentctlv1.NewAgentctlServiceClient(h.dial(t, s))
		_, err := c.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "x"})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "secret %q", s)
		assert.ErrorIs(t, err, errdefs.ErrUnauthenticated)
	}
	logs := h.logs.String()
	assert.Contains(t, logs, "refused a call without the orchestrator secret")
	assert.NotContains(t, logs, "wrong-secret-value")
	assert.NotContains(t, logs, secret)
}

// TestSetProvidersRebuildsLocallyAndNotifiesOnce drives one session
// through pushes: a change, a stale generation, an equivalent set; the
// client sees exactly one notification, the mode is kept.
func TestSetProvidersRebuildsLocallyAndNotifiesOnce(t *testing.T) {
	t.Parallel()
	for _, version := range mcptest.ProtocolVersions {
		t.Run(mcptest.VersionName(version), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_PLAN, 1, "github", "svn"))
			assert.Equal(t, []string{"github"}, st.GetProviderSet().GetProviders())
			assert.Equal(t, planSurface("github"), st.GetToolNames())
			assert.True(t, strings.HasPrefix(st.GetMcpUrl(), "http://127.0.0.1:"), st.GetMcpUrl())

			c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			assert.Equal(t, mcptest.Expected(version), c.Negotiated())
			assert.Equal(t, st.GetToolNames(), c.Names(t))
			gen := uint64(1)
			toggle := [][]string{{"gitlab"}, {"github"}}
			c.Subscribe(t, func() {
				gen++
				h.push(t, "s1", gen, toggle[gen%2]...)
			})

			gen++
			resp := h.push(t, "s1", gen, "GitLab", " github ")
			assert.True(t, resp.GetAccepted())
			assert.True(t, resp.GetToolsChanged())
			c.WaitChanged(t)
			assert.Equal(t, planSurface("github", "gitlab"), c.Names(t))

			resp = h.push(t, "s1", gen-1, "local")
			assert.False(t, resp.GetAccepted(), "a stale generation is ignored")
			assert.Equal(t, []string{"github", "gitlab"}, resp.GetApplied().GetProviders())
			assert.Equal(t, gen, resp.GetApplied().GetGeneration())

			gen++
			resp = h.push(t, "s1", gen, "gitlab", "github", "bitbucket")
			assert.True(t, resp.GetAccepted())
			assert.False(t, resp.GetToolsChanged(), "an equivalent set changes nothing")
			c.ExpectNone(t, "stale and equivalent pushes must not notify")
			assert.Equal(t, planSurface("github", "gitlab"), c.Names(t))

			state, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
			require.NoError(t, err)
			assert.Equal(t, agentctlv1.SessionMode_SESSION_MODE_PLAN, state.GetStatus().GetMode(), "the mode is kept across pushes")
			assert.Equal(t, gen, state.GetStatus().GetProviderSet().GetGeneration())
		})
	}
}

func TestMCPEndpointRequiresTheSessionToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1))
	other := h.create(t, spec("s2", agentctlv1.SessionMode_SESSION_MODE_TASK, 1))
	for name, token := range map[string]string{"none": "", "wrong": "nope", "other session's": h.token(t, "s2")} {
		req, err := http.NewRequest(http.MethodPost, st.GetMcpUrl(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s token", name)
	}
	assert.NotEqual(t, st.GetMcpUrl(), other.GetMcpUrl(), "each session has its own endpoint")
}

// orchestrator is the orchestrator's end of an Attach stream, answering
// every tool call with answer.
func orchestrator(t *testing.T, h *harness, answer func(*agentctlv1.ToolCall) *agentctlv1.ToolResult) (calls chan *agentctlv1.ToolCall, events chan *agentctlv1.SessionEvent) {
	t.Helper()
	calls, events, _ = orchestratorAuditing(t, h, answer)
	return calls, events
}

// orchestratorAuditing is orchestrator, also receiving the reports of the
// calls agentctl refused itself.
func orchestratorAuditing(t *testing.T, h *harness, answer func(*agentctlv1.ToolCall) *agentctlv1.ToolResult) (
	calls chan *agentctlv1.ToolCall, events chan *agentctlv1.SessionEvent, refused chan *agentctlv1.ToolRefused) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := h.client.Attach(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&agentctlv1.AttachRequest{Message: &agentctlv1.AttachRequest_Hello{Hello: &agentctlv1.AttachHello{OrchestratorId: "test"}}}))
	calls, events, refused = make(chan *agentctlv1.ToolCall, 100), make(chan *agentctlv1.SessionEvent, 100), make(chan *agentctlv1.ToolRefused, 100)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			if c := msg.GetToolCall(); c != nil {
				select {
				case calls <- c:
				default: // the test does not read them all
				}
				r := answer(c)
				r.CallId = c.GetCallId()
				_ = stream.Send(&agentctlv1.AttachRequest{Message: &agentctlv1.AttachRequest_ToolResult{ToolResult: r}})
			}
			if e := msg.GetSessionEvent(); e != nil {
				select {
				case events <- e:
				default:
				}
			}
			if r := msg.GetToolRefused(); r != nil {
				select {
				case refused <- r:
				default:
				}
			}
		}
	}()
	return calls, events, refused
}

func callText(t *testing.T, c *mcptest.Client, name string, args any) (string, bool) {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestToolCallsGoToTheOrchestratorWithTheSessionsIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")

	// No orchestrator attached: fail fast, listing still works.
	text, isErr := callText(t, c, "task_info", nil)
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, "orchestrator_unreachable: "), text)
	assert.Equal(t, toolapi.Surface("github"), c.Names(t))

	calls, _ := orchestrator(t, h, func(call *agentctlv1.ToolCall) *agentctlv1.ToolResult {
		if call.GetToolName() == "github_pr_status" {
			return &agentctlv1.ToolResult{IsError: true, ErrorCode: "no_pull_request", Text: "this task has no pull request yet"}
		}
		return &agentctlv1.ToolResult{Text: "task " + call.GetTaskId(), StructuredJson: []byte(`{"title":"fix login"}`)}
	})
	require.Eventually(t, func() bool {
		text, isErr = callText(t, c, "task_info", map[string]any{})
		return !isErr
	}, 2*time.Minute, 10*time.Millisecond)
	assert.Equal(t, "task task_s1", text)
	call := <-calls
	for len(calls) > 0 {
		call = <-calls
	}
	assert.Equal(t, "s1", call.GetSessionId())
	assert.Equal(t, "task_s1", call.GetTaskId())
	assert.JSONEq(t, `{}`, string(call.GetArgumentsJson()))

	text, isErr = callText(t, c, "github_pr_status", map[string]any{"repository_id": "repo_1"})
	assert.True(t, isErr)
	assert.Equal(t, "no_pull_request: this task has no pull request yet", text)
	assert.JSONEq(t, `{"repository_id":"repo_1"}`, string((<-calls).GetArgumentsJson()))

	// Identity can't be smuggled in, and malformed arguments never leave
	// agentctl.
	for _, args := range []any{
		map[string]any{"task_id": "task_other"},
		map[string]any{"repository_id": 42},
	} {
		text, isErr = callText(t, c, "github_pr_status", args)
		assert.True(t, isErr)
		assert.True(t, strings.HasPrefix(text, "invalid_arguments: "), text)
	}
	text, _ = callText(t, c, "github_pr_status", map[string]any{"task_id": "task_other"})
	assert.Contains(t, text, "task_id", "the error names the field")
	text, _ = callText(t, c, "github_pr_status", map[string]any{"repository_id": 42})
	assert.Contains(t, text, "repository_id", "the error names the field")
	assert.Empty(t, calls, "no malformed call reached the orchestrator")
}

// TestCallsRefusedHereAreReportedToTheOrchestrator: a call agentctl
// refuses itself (a tool the session does not list, arguments its schema
// refuses) is not forwarded, but reported on the Attach stream for the
// orchestrator's audit, with the session's identity and the agent's
// words for the tool; the agent's answer is not held up by it.
func TestCallsRefusedHereAreReportedToTheOrchestrator(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_PLAN, 1, "github"))
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	calls, _, refused := orchestratorAuditing(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult {
		return &agentctlv1.ToolResult{Text: "ok"}
	})
	// Attached once a forwarded call is answered.
	require.Eventually(t, func() bool { _, isErr := callText(t, c, "task_info", map[string]any{}); return !isErr }, 2*time.Minute, 10*time.Millisecond)
	for len(calls) > 0 {
		<-calls
	}

	_, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "github_pr_create", Arguments: map[string]any{}})
	require.Error(t, err, "a plan session does not list a tool that writes")
	_, err = c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "gitlab_mr_status", Arguments: map[string]any{}})
	require.Error(t, err, "nor another provider's tools")
	text, isErr := callText(t, c, "github_pr_status", map[string]any{"repository_id": 42})
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, "invalid_arguments: "), text)

	var got []string
	for range 3 {
		select {
		case r := <-refused:
			assert.Equal(t, "s1", r.GetSessionId())
			assert.Equal(t, "task_s1", r.GetTaskId())
			got = append(got, r.GetToolName()+" "+r.GetErrorCode())
		case <-time.After(2 * time.Minute):
			t.Fatalf("reports so far: %v", got)
		}
	}
	assert.Equal(t, []string{"github_pr_create unknown_tool", "gitlab_mr_status unknown_tool", "github_pr_status invalid_arguments"}, got)
	assert.Empty(t, calls, "none of them was forwarded")
}

// TestAgentIsStartedWithTheEndpointInjected runs a real agent process that
// connects to the session over MCP with what agentctl injected.
func TestAgentIsStartedWithTheEndpointInjected(t *testing.T) {
	t.Setenv(daemon.EnvSecret, secret) // must not reach the agent
	h := newHarness(t)
	_, events := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{} })
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "gitlab")
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{os.Args[0]}, Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "list"}, WorkingDir: t.TempDir()}
	h.create(t, sp)

	var exited *agentctlv1.SessionEvent
	select {
	case exited = <-events:
	case <-time.After(2 * time.Minute):
		t.Fatal("no agent-exited event")
	}
	assert.Equal(t, agentctlv1.SessionEventKind_SESSION_EVENT_KIND_AGENT_EXITED, exited.GetKind())
	state, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.Equal(t, agentctlv1.SessionPhase_SESSION_PHASE_AGENT_EXITED, state.GetStatus().GetPhase())
	assert.Equal(t, int32(3), state.GetStatus().GetAgentExitCode())

	dir := filepath.Join(h.stateDir, "sessions", "s1")
	log, err := os.ReadFile(filepath.Join(dir, "agent.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "tools="+strings.Join(toolapi.Surface("gitlab"), ","))
	assert.Contains(t, string(log), "secret-in-env=false")
	assert.Contains(t, string(log), "config="+filepath.Join(dir, "mcp.json"))

	var cfg daemon.MCPConfig
	raw, err := os.ReadFile(filepath.Join(dir, "mcp.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cfg))
	assert.Equal(t, "http", cfg.MCPServers["toolscope"].Type)
	assert.Equal(t, state.GetStatus().GetMcpUrl(), cfg.MCPServers["toolscope"].URL)
	assert.Equal(t, "Bearer "+h.token(t, "s1"), cfg.MCPServers["toolscope"].Headers["Authorization"])
	assert.Len(t, cfg.MCPServers, 1, "one server entry per file: a client loading it sees each tool once")
	var stdio daemon.MCPConfig
	raw, err = os.ReadFile(filepath.Join(dir, "mcp-stdio.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &stdio))
	require.Len(t, stdio.MCPServers, 1)
	assert.Equal(t, "stdio", stdio.MCPServers["toolscope"].Type)
	assert.Equal(t, []string{"mcp", "--config", filepath.Join(dir, "bridge.json")}, stdio.MCPServers["toolscope"].Args)
	info, err := os.Stat(filepath.Join(dir, "mcp.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the config holds a token")
	assert.NotContains(t, h.logs.String(), h.token(t, "s1"), "session tokens are not logged")
}

func TestStopEndsTheAgentAndTheEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{os.Args[0]}, Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "wait"}}
	st := h.create(t, sp)
	logPath := filepath.Join(h.stateDir, "sessions", "s1", "agent.log")
	require.Eventually(t, func() bool { b, _ := os.ReadFile(logPath); return strings.Contains(string(b), "waiting") },
		30*time.Second, 10*time.Millisecond, "agent did not start")

	resp, err := h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	assert.Equal(t, agentctlv1.SessionPhase_SESSION_PHASE_STOPPED, resp.GetStatus().GetPhase())
	_, err = http.Post(st.GetMcpUrl(), "application/json", strings.NewReader("{}"))
	assert.Error(t, err, "the MCP endpoint is closed")

	for _, id := range []string{"s1", "never-existed"} {
		resp, err = h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: id})
		require.NoError(t, err, "stopping %s again succeeds", id)
		assert.Equal(t, agentctlv1.SessionPhase_SESSION_PHASE_STOPPED, resp.GetStatus().GetPhase())
	}
}

func TestCreateSessionRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.create(t, spec("dup", agentctlv1.SessionMode_SESSION_MODE_TASK, 1))
	cases := []struct {
		spec  *agentctlv1.LaunchSpec
		code  codes.Code
		field string
	}{
		{nil, codes.InvalidArgument, "spec"},
		{&agentctlv1.LaunchSpec{TaskId: "t"}, codes.InvalidArgument, "spec.session_id"},
		{&agentctlv1.LaunchSpec{SessionId: "s"}, codes.InvalidArgument, "spec.task_id"},
		{&agentctlv1.LaunchSpec{SessionId: "../etc", TaskId: "t"}, codes.InvalidArgument, "spec.session_id"},
		{&agentctlv1.LaunchSpec{SessionId: "s", TaskId: "t", Mode: 99}, codes.InvalidArgument, "spec.mode"},
		{spec("dup", agentctlv1.SessionMode_SESSION_MODE_TASK, 1), codes.AlreadyExists, ""},
		{&agentctlv1.LaunchSpec{SessionId: "s", TaskId: "t", Agent: &agentctlv1.AgentCommand{Argv: []string{"/no/such/agent"}}}, codes.Unknown, ""},
	}
	for i, c := range cases {
		_, err := h.client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{Spec: c.spec})
		require.Error(t, err, "case %d", i)
		if c.code != codes.Unknown {
			assert.Equal(t, c.code, status.Code(err), "case %d: %v", i, err)
		}
		assert.Equal(t, c.field, errdefs.FieldOf(err), "case %d: %v", i, err)
	}
	_, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "s"})
	assert.ErrorIs(t, err, errdefs.ErrNotFound, "a failed start leaves no session behind")
	_, err = h.client.SetProviders(context.Background(), &agentctlv1.SetProvidersRequest{SessionId: "nope", ProviderSet: &agentctlv1.ProviderSet{}})
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestSetProvidersStormEndsAtTheHighestGeneration: pushes race each other
// (so they arrive out of generation order) while clients list and call;
// every list is a whole surface, and the session ends on the set of the
// highest generation, not of the last call to arrive.
func TestSetProvidersStormEndsAtTheHighestGeneration(t *testing.T) {
	// Not parallel: it checks that no goroutine outlives the daemon.
	baseline := runtime.NumGoroutine()
	t.Run("storm", storm)
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseline+2 }, time.Minute, 10*time.Millisecond,
		"goroutines leaked: %d, baseline %d", runtime.NumGoroutine(), baseline)
}

func storm(t *testing.T) {
	h := newHarness(t)
	orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{Text: "ok"} })
	st := h.create(t, spec("storm", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	sets := [][]string{{"github"}, {"gitlab"}, {"github", "gitlab"}, {"local"}}
	surfaces := map[string]bool{}
	for _, set := range sets {
		surfaces[strings.Join(toolapi.Surface(set...), ",")] = true
	}
	var listers []*mcptest.Client
	for range 2 {
		listers = append(listers, mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "storm")), ""))
	}

	var (
		next    = make(chan uint64, 400)
		wg      sync.WaitGroup
		workers sync.WaitGroup
		done    = make(chan struct{})
		mu      sync.Mutex
		bad     []string
		lists   int
	)
	for g := uint64(2); g < 402; g++ {
		next <- g
	}
	close(next)
	for range 8 {
		workers.Go(func() {
			for g := range next {
				_, err := h.client.SetProviders(context.Background(), &agentctlv1.SetProvidersRequest{SessionId: "storm",
					ProviderSet: &agentctlv1.ProviderSet{Providers: sets[g%4], Generation: g}})
				assert.NoError(t, err)
			}
		})
	}
	for _, c := range listers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				names := strings.Join(c.Names(t), ",")
				text, _ := callText(t, c, "task_info", map[string]any{})
				mu.Lock()
				lists++
				if !surfaces[names] {
					bad = append(bad, names)
				}
				if text != "ok" && !strings.HasPrefix(text, "orchestrator_unreachable") {
					bad = append(bad, "call: "+text)
				}
				mu.Unlock()
			}
		})
	}
	workers.Wait()
	close(done)
	wg.Wait()

	const highest = uint64(401)
	state, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: "storm"})
	require.NoError(t, err)
	assert.Equal(t, highest, state.GetStatus().GetProviderSet().GetGeneration())
	assert.Equal(t, sets[highest%4], state.GetStatus().GetProviderSet().GetProviders())
	final := toolapi.Surface("gitlab") // sets[401%4] = {"gitlab"}
	assert.Equal(t, final, state.GetStatus().GetToolNames())
	for _, c := range listers {
		require.Eventually(t, func() bool { return assert.ObjectsAreEqual(final, c.Names(t)) }, time.Minute, 10*time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d lists and calls during 400 racing pushes", lists)
	assert.Empty(t, bad)
	assert.Positive(t, lists)
}

// planSurface is what a plan-mode session shows for these providers.
func planSurface(set ...string) []string {
	return registry.Build(registry.Spec{Mode: registry.ModePlan, Providers: providers.Of(set...)}).Names()
}

// TestAgentProfileIsRenderedAtLaunch: with the claude-code profile agentctl
// writes the MCP config Claude Code reads and starts it pointed at it (a
// stand-in "claude" on PATH records what it was given).
func TestAgentProfileIsRenderedAtLaunch(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.Symlink(os.Args[0], filepath.Join(bin, "claude")))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	h := newHarness(t)
	_, events := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{} })
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
	sp.Agent = &agentctlv1.AgentCommand{Profile: "claude-code", Model: "claude-sonnet-4", Argv: []string{"-p", "hello"},
		Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "args"}}
	st := h.create(t, sp)
	select {
	case <-events:
	case <-time.After(2 * time.Minute):
		t.Fatal("the agent did not run")
	}
	dir := filepath.Join(h.stateDir, "sessions", "s1")
	log, err := os.ReadFile(filepath.Join(dir, "agent.log"))
	require.NoError(t, err)
	cfg := filepath.Join(dir, "claude-mcp.json")
	assert.Contains(t, string(log), "args=--allowedTools mcp__toolscope --mcp-config "+cfg+" --strict-mcp-config --model claude-sonnet-4 -p hello")
	assert.Contains(t, string(log), `config={"mcpServers":{"toolscope":{"headers":{"Authorization":"Bearer`+h.token(t, "s1")+`"},"type":"http","url":"`+st.GetMcpUrl()+`"}}}`)
	info, err := os.Stat(cfg)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// TestStopRemovesTheSessionsDirectoryAndKeepsItsLog: a stopped session's
// directory, whose configs hold its MCP token, is removed; its agent's
// log is kept in the logs directory. A session whose start failed leaves
// no directory either.
func TestStopRemovesTheSessionsDirectoryAndKeepsItsLog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	sp.Agent = &agentctlv1.AgentCommand{Argv: []string{os.Args[0]}, Env: map[string]string{"TOOLSCOPE_TEST_AGENT": "wait"}}
	h.create(t, sp)
	dir := filepath.Join(h.stateDir, "sessions", "s1")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		return strings.Contains(string(b), "waiting")
	},
		30*time.Second, 10*time.Millisecond, "agent did not start")
	scanner := testutil.NewLeakScanner(map[string]string{"MCP token": h.token(t, "s1")})
	scan := func() (files int, leaks []string) {
		_ = filepath.WalkDir(h.stateDir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			files++
			if hits := scanner.Find(b); len(hits) > 0 {
				leaks = append(leaks, path+": "+hits[0])
			}
			return nil
		})
		return files, leaks
	}
	_, before := scan()
	require.NotEmpty(t, before, "while it runs, the session's configs hold its token (the scan sees them)")

	_, err := h.client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: "s1"})
	require.NoError(t, err)
	files, leaks := scan()
	assert.Empty(t, leaks, "after stop, no file holds the token")
	assert.NoDirExists(t, dir)
	log, err := os.ReadFile(filepath.Join(h.stateDir, "logs", "s1", "agent.log"))
	require.NoError(t, err, "the agent's log is kept")
	assert.Contains(t, string(log), "waiting")

	bad := spec("s2", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	bad.Agent = &agentctlv1.AgentCommand{Argv: []string{"/nowhere/agent"}}
	_, err = h.client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{Spec: bad})
	require.Error(t, err)
	assert.NoDirExists(t, filepath.Join(h.stateDir, "sessions", "s2"), "a failed start leaves no directory")
	testutil.Figure(t, "agentctl stop: files left, token in them", "%d files (the agent log) after stop, %d holding the token (%d before stop); a failed start: no directory", files, len(leaks), len(before))
}

// TestARestartedDaemonRemovesItsPredecessorsSessionDirectories: a daemon
// that crashed left its sessions' directories; the next one on the same
// state directory hosts none of those sessions, so it removes them, and
// keeps their agent logs.
func TestARestartedDaemonRemovesItsPredecessorsSessionDirectories(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	left := filepath.Join(state, "sessions", "crashed")
	require.NoError(t, os.MkdirAll(left, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(left, "mcp.json"), []byte(`{"token":"left-behind-token-0123456789"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(left, "agent.log"), []byte("last words\n"), 0o600))

	newHarnessWith(t, func(o *daemon.Options) { o.StateDir = state })
	assert.NoDirExists(t, left)
	log, err := os.ReadFile(filepath.Join(state, "logs", "crashed", "agent.log"))
	require.NoError(t, err, "its agent log is kept")
	assert.Equal(t, "last words\n", string(log))
}
