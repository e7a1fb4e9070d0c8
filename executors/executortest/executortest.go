// Package executortest is the conformance suite of the executor backends,
// in two parts: the lifecycle suite every backend runs (Run), and the
// agentctl contract suite, run once over a real agentctl (Contract). It
// drives a backend only through executors.Executor and the Controller, and
// checks the result where it matters: with a real MCP client listing tools
// through the session's endpoint, and with the tool calls that reach the
// orchestrator's handler.
package executortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/agentlink"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// Backend is what the suite needs from a backend under test.
type Backend struct {
	// New returns an executor answering tool calls with calls and sending
	// session events to events (which may be nil). Calling it again must
	// behave like a restarted orchestrator: a new process over the same
	// persisted state, able to Reattach earlier handles.
	New func(t *testing.T, calls executors.CallHandler, events executors.EventHandler) executors.Executor
	// Kill ends a session's agentctl abruptly, as a crash or a lost host
	// would.
	Kill func(t *testing.T, h executors.Handle)
	// ReportsLoss says the backend sends executors.EventLost on its own
	// when a session's agentctl dies; the suite then requires that event
	// within LossDeadline of the kill.
	ReportsLoss bool
	// Prepare adapts a spec to the backend (an image, for example); may
	// be nil.
	Prepare func(spec *executors.Spec)
	// Control dials a launched session's agentctl as someone holding its
	// launch secret (local, docker) or a client certificate (remote)
	// could, without the orchestrator: issue 15's attacker who creates
	// sessions of their own. The backend closes the connection.
	Control func(t *testing.T, h executors.Handle) Controller
	// Workspaces, if set, runs the workspace case (package doc).
	Workspaces *Workspaces
	// Agent is an agent command that prints Printed and exits 0 where the
	// backend's sessions run (`agentctl version` in a FROM scratch image).
	Agent   []string
	Printed string
}

// Controller is a direct connection to a session's agentctl.
type Controller struct {
	Client agentctlv1.AgentctlServiceClient
	// MCPURL turns an MCP URL agentctl reports into one reachable from
	// the test (a published port); nil: as reported.
	MCPURL func(reported string) string
}

// ControlWithSecret dials agentctl at addr with its launch secret, over
// plain TCP (loopback), for the local and docker backends.
func ControlWithSecret(t *testing.T, addr, secretFile string) agentctlv1.AgentctlServiceClient {
	t.Helper()
	secret, err := os.ReadFile(secretFile)
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer.Credentials(strings.TrimSpace(string(secret)), false)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return agentctlv1.NewAgentctlServiceClient(conn)
}

// recorder is an orchestrator's tool-call handler that records calls.
type recorder struct {
	mu    sync.Mutex
	calls []executors.ToolCall
}

func (r *recorder) onLink() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []bool
	for _, c := range r.calls {
		out = append(out, c.OnLink)
	}
	return out
}

func (r *recorder) handle(_ context.Context, c executors.ToolCall) executors.ToolResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return executors.ToolResult{Text: fmt.Sprintf("answered %s for %s", c.Tool, c.SessionID)}
}

var surfaces = map[string][]string{
	"github":        toolapi.Surface("github"),
	"gitlab":        toolapi.Surface("gitlab"),
	"github,gitlab": toolapi.Surface("github", "gitlab"),
}

// External tools as the orchestrator's catalog pushes them.
var (
	docsSearch = executors.ExternalTool{Name: "docs__search", Title: "Search docs", Description: "Search the handbook.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`), ReadOnly: true}
	ticketsStatus = executors.ExternalTool{Name: "tickets__status", Description: "A ticket's status.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`), ReadOnly: true}
	ticketsCreate = executors.ExternalTool{Name: "tickets__create", Description: "Open a ticket.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)}
)

// withTools is a built-in surface plus external tool names, sorted.
func withTools(surface []string, names ...string) []string {
	out := append(slices.Clone(surface), names...)
	slices.Sort(out)
	return out
}

// LossDeadline bounds how long after a kill a backend may take to report a
// session lost.
const LossDeadline = 2 * time.Second

// control is the orchestrator's controller of e's sessions: every call
// to a running session's agentctl goes through it.
func control(e executors.Executor) *executors.Controller {
	return executors.NewController(map[string]executors.Executor{e.Name(): e})
}

// pushProviders and pushExternal push one part of a surface, as the
// orchestrator does when only that part moved.
func pushProviders(ctx context.Context, e executors.Executor, h executors.Handle, set providers.Set, gen uint64) (executors.PushResult, error) {
	return control(e).ApplySurface(ctx, h, executors.Surface{Providers: set, Generation: gen})
}

func pushExternal(ctx context.Context, e executors.Executor, h executors.Handle, tools []executors.ExternalTool, gen uint64) (executors.PushResult, error) {
	return control(e).ApplySurface(ctx, h, executors.Surface{External: tools, ExternalGeneration: gen})
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// Run runs the lifecycle suite, which every backend runs: launch,
// identity of calls, stop, loss, re-attach, agent exit, refusals. Cases
// run one after another: backends are heavy.
func Run(t *testing.T, b Backend) { run(t, b, lifecycle) }

// Contract runs the agentctl contract suite once, over one backend's
// real agentctl and its real gRPC link: what the orchestrator's
// Controller says to a running session (surfaces, notifications) reaches
// its MCP clients. Every backend reaches agentctl through the same
// agentlink and Controller, so the other backends need not prove it again.
func Contract(t *testing.T, b Backend) { run(t, b, contract) }

// part is a part of the suite.
type part int

const (
	lifecycle part = iota
	contract
)

func run(t *testing.T, b Backend, which part) {
	only := func(p part, name string, f func(t *testing.T)) {
		if p == which {
			t.Run(name, f)
		}
	}
	n := 0
	spec := func(set string, gen uint64) executors.Spec {
		n++
		s := executors.Spec{
			SessionID: fmt.Sprintf("conf-%d-%d", time.Now().UnixNano()%1e6, n), TaskID: "task_conf", WorkspaceID: "ws_conf",
			Mode: executors.ModeTask, Providers: providers.Of(strings.Split(set, ",")...), Generation: gen,
		}
		if b.Prepare != nil {
			b.Prepare(&s)
		}
		return s
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		return c
	}
	launch := func(t *testing.T, e executors.Executor, s executors.Spec) (executors.Handle, executors.Status) {
		t.Helper()
		var steps []string
		h, st, err := e.Launch(ctx(t), s, func(step string) { steps = append(steps, step) })
		require.NoError(t, err)
		assert.NotEmpty(t, steps, "launch reports progress")
		assert.Equal(t, e.Name(), h.Backend)
		t.Cleanup(func() { _ = e.Stop(context.Background(), h) })
		return h, st
	}
	connect := func(t *testing.T, st executors.Status) *mcptest.Client {
		t.Helper()
		require.NotEmpty(t, st.MCPURL)
		require.NotEmpty(t, st.MCPToken)
		return mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "")
	}

	only(lifecycle, "launch carries providers and mode into agentctl's registry", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		s := spec("github,gitlab", 7)
		s.Mode = executors.ModePlan
		h, st := launch(t, e, s)
		assert.Equal(t, executors.PhaseRunning, st.Phase)
		assert.Equal(t, uint64(7), st.Generation)
		names := connect(t, st).Names(t)
		assert.Equal(t, st.ToolNames, names)
		assert.Subset(t, names, []string{"github_pr_status", "gitlab_mr_status", "session_info", "task_info"}, "both providers")
		assert.NotContains(t, names, "github_pr_create", "plan mode: read-only tools only")
		assert.NotContains(t, names, "gitlab_mr_create", "plan mode: read-only tools only")
		again, err := control(e).Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Equal(t, executors.PhaseRunning, again.Phase)
	})

	only(contract, "SetProviders reaches a connected client as list_changed", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		h, st := launch(t, e, spec("github", 1))
		c := connect(t, st)
		gen := uint64(1)
		toggle := []string{"gitlab", "github"}
		c.Subscribe(t, func() {
			gen++
			_, err := pushProviders(ctx(t), e, h, providers.Of(toggle[gen%2]), gen)
			require.NoError(t, err)
		})
		gen++
		res, err := pushProviders(ctx(t), e, h, providers.Of("github", "gitlab"), gen)
		require.NoError(t, err)
		assert.True(t, res.Accepted)
		assert.True(t, res.ToolsChanged)
		c.WaitChanged(t)
		assert.Equal(t, surfaces["github,gitlab"], c.Names(t))
		stale, err := pushProviders(ctx(t), e, h, providers.Of("gitlab"), gen-1)
		require.NoError(t, err)
		assert.False(t, stale.Accepted, "a stale generation is ignored")
		c.ExpectNone(t, "a stale push must not notify")
	})

	only(contract, "SetExternalTools reaches a connected client as list_changed", func(t *testing.T) {
		rec := &recorder{}
		e := b.New(t, rec.handle, nil)
		s := spec("github", 1)
		s.External, s.ExternalGeneration = []executors.ExternalTool{docsSearch}, 1
		h, st := launch(t, e, s)
		assert.Equal(t, uint64(1), st.ExternalGeneration)
		want := withTools(surfaces["github"], docsSearch.Name)
		assert.Equal(t, want, st.ToolNames)
		c := connect(t, st)
		assert.Equal(t, want, c.Names(t))

		gen := uint64(1)
		toggle := [][]executors.ExternalTool{{docsSearch}, {docsSearch, ticketsStatus}}
		c.Subscribe(t, func() {
			gen++
			_, err := pushExternal(ctx(t), e, h, toggle[gen%2], gen)
			require.NoError(t, err)
		})
		gen++
		res, err := pushExternal(ctx(t), e, h, []executors.ExternalTool{ticketsCreate}, gen)
		require.NoError(t, err)
		assert.True(t, res.Accepted)
		assert.True(t, res.ToolsChanged)
		assert.Equal(t, gen, res.ExternalGeneration)
		assert.Equal(t, providers.Of("github"), res.Applied, "the provider set is kept")
		c.WaitChanged(t)
		c.ExpectNone(t, "one push, one notification")
		want = withTools(surfaces["github"], ticketsCreate.Name)
		assert.Equal(t, want, c.Names(t))

		stale, err := pushExternal(ctx(t), e, h, []executors.ExternalTool{docsSearch}, gen-1)
		require.NoError(t, err)
		assert.False(t, stale.Accepted, "a stale generation is ignored")
		assert.Equal(t, gen, stale.ExternalGeneration)
		c.ExpectNone(t, "a stale push must not notify")
		assert.Equal(t, want, c.Names(t))

		res2, err := c.Session.CallTool(ctx(t), &mcp.CallToolParams{Name: ticketsCreate.Name, Arguments: map[string]any{"title": "flaky"}})
		require.NoError(t, err)
		require.False(t, res2.IsError, "%v", res2.Content)
		assert.Equal(t, "answered "+ticketsCreate.Name+" for "+s.SessionID, res2.Content[0].(*mcp.TextContent).Text)
		rec.mu.Lock()
		require.Len(t, rec.calls, 1)
		assert.Equal(t, executors.ToolCall{SessionID: s.SessionID, TaskID: s.TaskID, Tool: ticketsCreate.Name,
			Arguments: []byte(`{"title":"flaky"}`), OnLink: true}, rec.calls[0], "the exposed name, with the session's identity")
		rec.mu.Unlock()

		st, err = control(e).Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Equal(t, gen, st.ExternalGeneration)
		assert.Equal(t, uint64(1), st.Generation, "the provider set's generation is its own")

		// Plan mode keeps only the read-only external tools. (One session
		// at a time: a remote host may serve MCP on one fixed port.)
		require.NoError(t, e.Stop(ctx(t), h))
		plan := spec("gitlab", 1)
		plan.Mode = executors.ModePlan
		plan.External, plan.ExternalGeneration = []executors.ExternalTool{docsSearch, ticketsCreate}, 3
		_, pst := launch(t, e, plan)
		names := connect(t, pst).Names(t)
		assert.Contains(t, names, docsSearch.Name)
		assert.NotContains(t, names, ticketsCreate.Name, "plan mode: read-only tools only")
	})

	only(lifecycle, "tool calls reach the orchestrator with the session's identity", func(t *testing.T) {
		rec := &recorder{}
		e := b.New(t, rec.handle, nil)
		s := spec("gitlab", 1)
		_, st := launch(t, e, s)
		c := connect(t, st)
		res, err := c.Session.CallTool(ctx(t), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		assert.Equal(t, "answered task_info for "+s.SessionID, res.Content[0].(*mcp.TextContent).Text)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Len(t, rec.calls, 1)
		assert.Equal(t, s.TaskID, rec.calls[0].TaskID)
		assert.True(t, rec.calls[0].OnLink, "the session was created on the link its call came on")
	})

	only(lifecycle, "a session the orchestrator did not create gets no tools; a replayed one keeps its identity", func(t *testing.T) {
		if b.Control == nil {
			t.Fatal("the backend gives the suite no Control: the channel binding must be tried on every backend")
		}
		rec := &recorder{}
		e := b.New(t, rec.handle, nil)
		s := spec("github", 1)
		s.Mode = executors.ModePlan
		h, _ := launch(t, e, s)
		ctl := b.Control(t, h)
		reach := func(reported string) string {
			if ctl.MCPURL != nil {
				return ctl.MCPURL(reported)
			}
			return reported
		}
		// As issue 15's attacker did: stop the real session, then create
		// sessions directly on this agentctl.
		create := func(spec executors.Spec) *mcptest.Client {
			t.Helper()
			_, err := ctl.Client.StopSession(ctx(t), &agentctlv1.StopSessionRequest{SessionId: s.SessionID})
			require.NoError(t, err)
			created, err := ctl.Client.CreateSession(ctx(t), &agentctlv1.CreateSessionRequest{Spec: agentlink.LaunchSpec(spec)})
			require.NoError(t, err, "agentctl accepts a session from whoever holds its secret")
			t.Cleanup(func() {
				_, _ = ctl.Client.StopSession(context.Background(), &agentctlv1.StopSessionRequest{SessionId: spec.SessionID})
			})
			return mcptest.Connect(t, mcptest.HTTP(reach(created.GetStatus().GetMcpUrl()), created.GetStatus().GetMcpBearerToken()), "")
		}
		call := func(c *mcptest.Client, tool string) {
			t.Helper()
			args := map[string]any{}
			if tool == "github_pr_create" {
				args = map[string]any{"branch": "x", "title": "y"}
			}
			_, err := c.Session.CallTool(ctx(t), &mcp.CallToolParams{Name: tool, Arguments: args})
			require.NoError(t, err)
		}

		// A session of its own, claiming another workspace's task.
		rogue := spec("github,gitlab", 1)
		rogue.TaskID, rogue.WorkspaceID = "task_victim", "ws_victim"
		rc := create(rogue)
		call(rc, "task_info")
		call(rc, "github_pr_create")
		_, err := ctl.Client.StopSession(ctx(t), &agentctlv1.StopSessionRequest{SessionId: rogue.SessionID})
		require.NoError(t, err)
		// The real session's id again, in task mode, on the victim's task.
		replay := s
		replay.Mode, replay.TaskID, replay.WorkspaceID = executors.ModeTask, "task_victim", "ws_victim"
		call(create(replay), "github_pr_create")

		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Len(t, rec.calls, 3)
		for _, c := range rec.calls[:2] {
			assert.Equal(t, rogue.SessionID, c.SessionID)
			assert.Equal(t, "task_victim", c.TaskID, "agentctl forwards what it was told")
			assert.False(t, c.OnLink, "%s from a session the orchestrator did not create is not on the link", c.Tool)
			assert.Contains(t, c.LinkSessions, s.SessionID, "the call names the link's real session")
			assert.NotContains(t, c.LinkSessions, rogue.SessionID)
		}
		// The replayed session is the link's, so its call is on the link;
		// its task and mode are the orchestrator's records, not the
		// replayed message's (toolcalls refuses the claimed task, and the
		// write tool to the plan session).
		replayed := rec.calls[2]
		assert.True(t, replayed.OnLink)
		assert.Equal(t, s.SessionID, replayed.SessionID)
		assert.Equal(t, "task_victim", replayed.TaskID, "the claim the orchestrator checks against its records")
		testutil.Figure(t, e.Name()+" executor: rogue session", "sessions created directly on agentctl: 2 of 2 calls of a session "+
			"with another workspace's ids marked not on the link, naming the link's session; a replayed CreateSession of the real "+
			"session id arrives as that session, its task and mode left to the orchestrator's records")
	})

	only(contract, "a surface that moves both parts reaches a connected client as one list_changed", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		s := spec("github", 1)
		s.External, s.ExternalGeneration = []executors.ExternalTool{docsSearch}, 1
		h, st := launch(t, e, s)
		c := connect(t, st)
		gen := uint64(1)
		toggle := []string{"gitlab", "github"}
		c.Subscribe(t, func() {
			gen++
			_, err := pushProviders(ctx(t), e, h, providers.Of(toggle[gen%2]), gen)
			require.NoError(t, err)
		})
		gen++
		res, err := control(e).ApplySurface(ctx(t), h, executors.Surface{Mode: executors.ModeTask,
			Providers: providers.Of("github", "gitlab"), Generation: gen, External: []executors.ExternalTool{docsSearch, ticketsCreate}, ExternalGeneration: 2})
		require.NoError(t, err)
		assert.Equal(t, executors.PushResult{Accepted: true, ToolsChanged: true, Applied: providers.Of("github", "gitlab"), Generation: gen, ExternalGeneration: 2}, res)
		c.WaitChanged(t)
		c.ExpectNone(t, "one surface, one notification")
		assert.Equal(t, withTools(surfaces["github,gitlab"], docsSearch.Name, ticketsCreate.Name), c.Names(t))
	})

	only(contract, "a message reaches the session's listening clients", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		h, st := launch(t, e, spec("github", 1))
		// Log notifications travel on stateful sessions (2025-11-25 and
		// earlier); 2026-07-28 clients read prompts from the task inbox.
		c := mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "2025-11-25")
		c.Listen(t)
		offered, err := control(e).Notify(ctx(t), h, "review requested on PR #7")
		require.NoError(t, err)
		assert.Equal(t, 1, offered)
		assert.Equal(t, "review requested on PR #7", c.WaitLog(t))
	})

	only(lifecycle, "stop", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		h, _ := launch(t, e, spec("github", 1))
		require.NoError(t, e.Stop(ctx(t), h))
		st, err := control(e).Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Contains(t, []executors.Phase{executors.PhaseStopped, executors.PhaseLost}, st.Phase)
		assert.NoError(t, e.Stop(ctx(t), h), "stopping a stopped session succeeds")
	})

	only(lifecycle, "agentctl killed: the session is lost; relaunch repairs it", func(t *testing.T) {
		lost := make(chan executors.SessionEvent, 8)
		e := b.New(t, (&recorder{}).handle, func(ev executors.SessionEvent) {
			if ev.Kind == executors.EventLost {
				lost <- ev
			}
		})
		s := spec("github", 1)
		h, _ := launch(t, e, s)
		killing := time.Now()
		b.Kill(t, h)
		killed := time.Now()
		if b.ReportsLoss {
			select {
			case ev := <-lost:
				assert.Equal(t, s.SessionID, ev.SessionID)
				assert.NotEmpty(t, ev.Message, "a loss says why")
				testutil.Figure(t, e.Name()+" executor: agentctl killed", "lost event %s after the kill began (bound %s)", ms(time.Since(killing)), LossDeadline)
			case <-time.After(LossDeadline - time.Since(killing)):
				t.Fatalf("no %q event within %s of the kill", executors.EventLost, LossDeadline)
			}
		}
		require.Eventually(t, func() bool {
			st, err := control(e).Inspect(ctx(t), h)
			return err == nil && st.Phase == executors.PhaseLost
		}, LossDeadline, 10*time.Millisecond, "a killed agentctl must be reported lost within %s", LossDeadline)
		if !b.ReportsLoss {
			testutil.Figure(t, e.Name()+" executor: agentctl killed", "Inspect reports lost %s after the kill (bound %s)", ms(time.Since(killed)), LossDeadline)
		}
		_, err := pushProviders(ctx(t), e, h, providers.Of("gitlab"), 2)
		assert.Error(t, err, "no push reaches a lost session")
		assert.NoError(t, e.Stop(ctx(t), h), "stopping a lost session succeeds")

		// Resume: the same session relaunched with the current set.
		s.Providers, s.Generation = providers.Of("github", "gitlab"), 3 // the task's current set
		_, st := launch(t, e, s)
		assert.Equal(t, uint64(3), st.Generation)
		assert.Equal(t, surfaces["github,gitlab"], connect(t, st).Names(t))
	})

	only(lifecycle, "a restarted orchestrator re-attaches", func(t *testing.T) {
		first := b.New(t, (&recorder{}).handle, nil)
		s := spec("github", 1)
		h, st := launch(t, first, s)
		c := connect(t, st)
		require.NoError(t, first.Close())

		rec := &recorder{}
		second := b.New(t, rec.handle, nil)
		require.NoError(t, second.Reattach(ctx(t), h))
		t.Cleanup(func() { _ = second.Stop(context.Background(), h) })
		st, err := control(second).Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Equal(t, executors.PhaseRunning, st.Phase)

		gen := uint64(1)
		toggle := []string{"gitlab", "github"}
		c.Subscribe(t, func() {
			gen++
			_, err := pushProviders(ctx(t), second, h, providers.Of(toggle[gen%2]), gen)
			require.NoError(t, err)
		})
		res, err := c.Session.CallTool(ctx(t), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		assert.Equal(t, []bool{true}, rec.onLink(), "calls go to the new orchestrator, which re-adopted the session on its link")
		require.NoError(t, second.Stop(ctx(t), h))
	})

	only(lifecycle, "re-attaching to a dead session reports it lost", func(t *testing.T) {
		first := b.New(t, (&recorder{}).handle, nil)
		h, _ := launch(t, first, spec("gitlab", 1))
		require.NoError(t, first.Close())
		b.Kill(t, h)
		second := b.New(t, (&recorder{}).handle, nil)
		require.Eventually(t, func() bool {
			err := second.Reattach(ctx(t), h)
			return errors.Is(err, executors.ErrLost)
		}, time.Minute, 50*time.Millisecond)
	})

	only(lifecycle, "an agent's exit and its log reach the orchestrator", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		s := spec("github", 1)
		s.Agent = &executors.AgentCommand{Argv: b.Agent}
		h, _ := launch(t, e, s)
		var st executors.Status
		require.Eventually(t, func() bool {
			var err error
			st, err = control(e).Inspect(ctx(t), h)
			return err == nil && st.Phase == executors.PhaseAgentExited
		}, time.Minute, 20*time.Millisecond, "the agent exits; agentctl serves on")
		assert.Equal(t, 0, st.AgentExitCode)
		assert.Contains(t, st.AgentOutput, b.Printed, "the last lines of its output")
		var log []byte
		require.NoError(t, control(e).AgentLog(ctx(t), h, true, func(b []byte) error {
			log = append(log, b...)
			return nil
		}), "following the log of an agent that exited ends")
		assert.Equal(t, st.AgentOutput, strings.TrimSpace(string(log)))
	})

	if b.Workspaces != nil {
		only(lifecycle, "a session starts in its workspace; its work is measured, delivered and kept", func(t *testing.T) {
			b.Workspaces.workspace(t, b.New(t, (&recorder{}).handle, nil), spec("github", 1), launch, ctx)
		})
	}

	only(lifecycle, "an agent command the executor cannot find fails the launch with its cause", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		for _, c := range []struct{ argv0, want string }{
			{"no-such-agent", "agent command `no-such-agent` not found on the executor's PATH"},
			{"/nowhere/agent", "agent command `/nowhere/agent` not found on the executor"},
		} {
			s := spec("github", 1)
			s.Agent = &executors.AgentCommand{Argv: []string{c.argv0, "--flag"}}
			_, _, err := e.Launch(ctx(t), s, nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition, "%v", err)
			assert.Contains(t, err.Error(), c.want)
		}
	})

	only(lifecycle, "bad specs are refused before anything starts", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		bad := spec("github", 1)
		bad.Mode = "turbo"
		_, _, err := e.Launch(ctx(t), bad, nil)
		assert.Error(t, err)
		bad = spec("github", 1)
		bad.Agent = &executors.AgentCommand{}
		_, _, err = e.Launch(ctx(t), bad, nil)
		assert.Error(t, err)
		bad = spec("github", 1)
		bad.External, bad.ExternalGeneration = []executors.ExternalTool{docsSearch, {Name: "no schema"}}, 1
		_, _, err = e.Launch(ctx(t), bad, nil)
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument)
		assert.Equal(t, "spec.external_tools.tools[1].name", errdefs.FieldOf(err), "%v", err)
	})
}
