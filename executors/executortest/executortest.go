// Package executortest is the conformance suite every executor backend
// runs. It drives a backend only through executors.Executor and checks the
// result where it matters: with a real MCP client listing tools through the
// session's endpoint, and with the tool calls that reach the orchestrator's
// handler.
package executortest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
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
}

// recorder is an orchestrator's tool-call handler that records calls.
type recorder struct {
	mu    sync.Mutex
	calls []executors.ToolCall
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

// LossDeadline bounds how long after a kill a backend may take to report a
// session lost.
const LossDeadline = 2 * time.Second

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// Run runs the suite. Cases run one after another: backends are heavy.
func Run(t *testing.T, b Backend) {
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

	t.Run("launch carries providers and mode into agentctl's registry", func(t *testing.T) {
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
		again, err := e.Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Equal(t, executors.PhaseRunning, again.Phase)
	})

	t.Run("SetProviders reaches a connected client as list_changed", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		h, st := launch(t, e, spec("github", 1))
		c := connect(t, st)
		gen := uint64(1)
		toggle := []string{"gitlab", "github"}
		c.Subscribe(t, func() {
			gen++
			_, err := e.SetProviders(ctx(t), h, providers.Of(toggle[gen%2]), gen)
			require.NoError(t, err)
		})
		gen++
		res, err := e.SetProviders(ctx(t), h, providers.Of("github", "gitlab"), gen)
		require.NoError(t, err)
		assert.True(t, res.Accepted)
		assert.True(t, res.ToolsChanged)
		c.WaitChanged(t)
		assert.Equal(t, surfaces["github,gitlab"], c.Names(t))
		stale, err := e.SetProviders(ctx(t), h, providers.Of("gitlab"), gen-1)
		require.NoError(t, err)
		assert.False(t, stale.Accepted, "a stale generation is ignored")
		c.ExpectNone(t, "a stale push must not notify")
	})

	t.Run("tool calls reach the orchestrator with the session's identity", func(t *testing.T) {
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
	})

	t.Run("a message reaches the session's listening clients", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		n, ok := e.(executors.Notifier)
		if !ok {
			t.Skipf("%s is not an executors.Notifier", e.Name())
		}
		h, st := launch(t, e, spec("github", 1))
		// Log notifications travel on stateful sessions (2025-11-25 and
		// earlier); 2026-07-28 clients read prompts from the task inbox.
		c := mcptest.Connect(t, mcptest.HTTP(st.MCPURL, st.MCPToken), "2025-11-25")
		c.Listen(t)
		offered, err := n.Notify(ctx(t), h, "review requested on PR #7")
		require.NoError(t, err)
		assert.Equal(t, 1, offered)
		assert.Equal(t, "review requested on PR #7", c.WaitLog(t))
	})

	t.Run("stop", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		h, _ := launch(t, e, spec("github", 1))
		require.NoError(t, e.Stop(ctx(t), h))
		st, err := e.Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Contains(t, []executors.Phase{executors.PhaseStopped, executors.PhaseLost}, st.Phase)
		assert.NoError(t, e.Stop(ctx(t), h), "stopping a stopped session succeeds")
	})

	t.Run("agentctl killed: the session is lost; relaunch repairs it", func(t *testing.T) {
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
			st, err := e.Inspect(ctx(t), h)
			return err == nil && st.Phase == executors.PhaseLost
		}, LossDeadline, 10*time.Millisecond, "a killed agentctl must be reported lost within %s", LossDeadline)
		if !b.ReportsLoss {
			testutil.Figure(t, e.Name()+" executor: agentctl killed", "Inspect reports lost %s after the kill (bound %s)", ms(time.Since(killed)), LossDeadline)
		}
		_, err := e.SetProviders(ctx(t), h, providers.Of("gitlab"), 2)
		assert.Error(t, err, "no push reaches a lost session")
		assert.NoError(t, e.Stop(ctx(t), h), "stopping a lost session succeeds")

		// Resume: the same session relaunched with the current set.
		s.Providers, s.Generation = providers.Of("github", "gitlab"), 3 // the task's current set
		_, st := launch(t, e, s)
		assert.Equal(t, uint64(3), st.Generation)
		assert.Equal(t, surfaces["github,gitlab"], connect(t, st).Names(t))
	})

	t.Run("a restarted orchestrator re-attaches", func(t *testing.T) {
		first := b.New(t, (&recorder{}).handle, nil)
		s := spec("github", 1)
		h, st := launch(t, first, s)
		c := connect(t, st)
		require.NoError(t, first.Close())

		rec := &recorder{}
		second := b.New(t, rec.handle, nil)
		require.NoError(t, second.Reattach(ctx(t), h))
		t.Cleanup(func() { _ = second.Stop(context.Background(), h) })
		st, err := second.Inspect(ctx(t), h)
		require.NoError(t, err)
		assert.Equal(t, executors.PhaseRunning, st.Phase)

		gen := uint64(1)
		toggle := []string{"gitlab", "github"}
		c.Subscribe(t, func() {
			gen++
			_, err := second.SetProviders(ctx(t), h, providers.Of(toggle[gen%2]), gen)
			require.NoError(t, err)
		})
		res, err := c.Session.CallTool(ctx(t), &mcp.CallToolParams{Name: "task_info", Arguments: map[string]any{}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		rec.mu.Lock()
		assert.Len(t, rec.calls, 1, "calls go to the new orchestrator")
		rec.mu.Unlock()
		require.NoError(t, second.Stop(ctx(t), h))
	})

	t.Run("re-attaching to a dead session reports it lost", func(t *testing.T) {
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

	t.Run("bad specs are refused before anything starts", func(t *testing.T) {
		e := b.New(t, (&recorder{}).handle, nil)
		bad := spec("github", 1)
		bad.Mode = "turbo"
		_, _, err := e.Launch(ctx(t), bad, nil)
		assert.Error(t, err)
		bad = spec("github", 1)
		bad.Agent = &executors.AgentCommand{}
		_, _, err = e.Launch(ctx(t), bad, nil)
		assert.Error(t, err)
	})
}
