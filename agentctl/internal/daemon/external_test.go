package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// External tools as the orchestrator's catalog would push them: exposed
// names, the servers' schemas.
const (
	searchSchema = `{"type":"object","properties":{"query":{"type":"string","minLength":1},` +
		`"limit":{"type":"integer","minimum":1}},"required":["query"],"additionalProperties":false}`
	ticketSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
		`"properties":{"title":{"type":"string"}},"required":["title"]}`
	openSchema = `{"type":"object"}`
)

func extTool(name string, readOnly bool, schema string) *agentctlv1.ExternalTool {
	return &agentctlv1.ExternalTool{Name: name, Title: name + " title", Description: "external " + name,
		InputSchemaJson: []byte(schema), ReadOnly: readOnly}
}

var (
	docsSearch    = extTool("docs__search", true, searchSchema)
	ticketsStatus = extTool("tickets__status", true, ticketSchema)
	ticketsCreate = extTool("tickets__create", false, ticketSchema)
)

func extSet(gen uint64, tools ...*agentctlv1.ExternalTool) *agentctlv1.ExternalToolSet {
	return &agentctlv1.ExternalToolSet{Tools: tools, Generation: gen}
}

func (h *harness) pushExternal(t testing.TB, id string, set *agentctlv1.ExternalToolSet) *agentctlv1.SetExternalToolsResponse {
	t.Helper()
	resp, err := h.client.SetExternalTools(context.Background(), &agentctlv1.SetExternalToolsRequest{SessionId: id, ExternalTools: set})
	require.NoError(t, err)
	return resp
}

func (h *harness) state(t testing.TB, id string) *agentctlv1.SessionStatus {
	t.Helper()
	resp, err := h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: id})
	require.NoError(t, err)
	return resp.GetStatus()
}

// withTools is a built-in surface plus external tool names, sorted.
func withTools(surface []string, names ...string) []string {
	out := append(slices.Clone(surface), names...)
	slices.Sort(out)
	return out
}

// listed returns the definition of the named tool as the client lists it.
func listed(t testing.TB, c *mcptest.Client, name string) *mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Session.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("%s is not listed", name)
	return nil
}

func schemaJSON(t testing.TB, schema any) string {
	t.Helper()
	b, err := json.Marshal(schema)
	require.NoError(t, err)
	return string(b)
}

// changedOnce waits for one list_changed and makes sure no second one
// follows.
func changedOnce(t testing.TB, c *mcptest.Client, why string) {
	t.Helper()
	c.WaitChanged(t)
	c.ExpectNone(t, "one change, one notification: "+why)
}

// TestExternalToolsAppearAndDisappearWithOneNotificationEach drives a
// session's external tools through pushes, at every protocol version:
// tools appear, disappear and change with exactly one list_changed each;
// a stale or identical push notifies no one; providers and mode are kept.
func TestExternalToolsAppearAndDisappearWithOneNotificationEach(t *testing.T) {
	t.Parallel()
	for _, version := range mcptest.ProtocolVersions {
		t.Run(mcptest.VersionName(version), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{Text: "ok"} })
			sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github")
			sp.ExternalTools = extSet(1, docsSearch)
			st := h.create(t, sp)
			assert.Equal(t, uint64(1), st.GetExternalToolsGeneration())
			github := toolapi.Surface("github")
			assert.Equal(t, withTools(github, "docs__search"), st.GetToolNames())

			c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), version)
			assert.Equal(t, withTools(github, "docs__search"), c.Names(t))
			search := listed(t, c, "docs__search")
			assert.Equal(t, "external docs__search", search.Description)
			assert.Equal(t, "docs__search title", search.Title)
			assert.JSONEq(t, searchSchema, schemaJSON(t, search.InputSchema), "the server's schema, as given")
			require.NotNil(t, search.Annotations)
			assert.True(t, search.Annotations.ReadOnlyHint)
			assert.True(t, *search.Annotations.OpenWorldHint, "an external tool reaches outside the task")

			gen := uint64(1)
			toggle := [][]*agentctlv1.ExternalTool{{docsSearch}, {docsSearch, ticketsStatus}}
			c.Subscribe(t, func() {
				gen++
				h.pushExternal(t, "s1", extSet(gen, toggle[gen%2]...))
			})

			// Appear (and, for tickets__status, disappear) in one push.
			gen++
			resp := h.pushExternal(t, "s1", extSet(gen, docsSearch, ticketsCreate))
			assert.True(t, resp.GetAccepted())
			assert.True(t, resp.GetToolsChanged())
			assert.Equal(t, gen, resp.GetAppliedGeneration())
			changedOnce(t, c, "tickets__create appeared")
			assert.Equal(t, withTools(github, "docs__search", "tickets__create"), c.Names(t))

			// A changed definition is a change.
			gen++
			edited := extTool("docs__search", true, searchSchema)
			edited.Description = "search the handbook"
			resp = h.pushExternal(t, "s1", extSet(gen, edited, ticketsCreate))
			assert.True(t, resp.GetToolsChanged())
			changedOnce(t, c, "docs__search changed")
			assert.Equal(t, "search the handbook", listed(t, c, "docs__search").Description)

			// Disappear.
			gen++
			resp = h.pushExternal(t, "s1", extSet(gen))
			assert.True(t, resp.GetToolsChanged())
			changedOnce(t, c, "every external tool disappeared")
			assert.Equal(t, github, c.Names(t))

			// Identical and stale pushes change nothing.
			gen++
			resp = h.pushExternal(t, "s1", extSet(gen))
			assert.True(t, resp.GetAccepted())
			assert.False(t, resp.GetToolsChanged(), "an identical set changes nothing")
			resp = h.pushExternal(t, "s1", extSet(gen-1, docsSearch))
			assert.False(t, resp.GetAccepted(), "a stale generation is ignored")
			assert.False(t, resp.GetToolsChanged())
			assert.Equal(t, gen, resp.GetAppliedGeneration())
			c.ExpectNone(t, "identical and stale pushes must not notify")
			assert.Equal(t, github, c.Names(t))

			state := h.state(t, "s1")
			assert.Equal(t, gen, state.GetExternalToolsGeneration())
			assert.Equal(t, agentctlv1.SessionMode_SESSION_MODE_TASK, state.GetMode())
			assert.Equal(t, []string{"github"}, state.GetProviderSet().GetProviders(), "providers are kept")
			assert.Equal(t, uint64(1), state.GetProviderSet().GetGeneration())
		})
	}
}

// TestPlanModeKeepsOnlyReadOnlyExternalTools: a plan-mode session lists
// the read-only external tools only, across pushes, and a call to a tool
// it does not list never reaches the orchestrator.
func TestPlanModeKeepsOnlyReadOnlyExternalTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	calls, _ := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{Text: "ok"} })
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_PLAN, 1, "gitlab")
	sp.ExternalTools = extSet(1, docsSearch, ticketsCreate)
	st := h.create(t, sp)
	assert.Equal(t, withTools(planSurface("gitlab"), "docs__search"), st.GetToolNames())
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	assert.Equal(t, st.GetToolNames(), c.Names(t))

	h.pushExternal(t, "s1", extSet(2, ticketsCreate, ticketsStatus))
	assert.Equal(t, withTools(planSurface("gitlab"), "tickets__status"), h.state(t, "s1").GetToolNames())
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual(withTools(planSurface("gitlab"), "tickets__status"), c.Names(t))
	}, 2*time.Minute, 10*time.Millisecond)

	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "tickets__create", Arguments: map[string]any{"title": "x"}})
	if err == nil {
		assert.True(t, res.IsError, "a tool plan mode does not list cannot be called")
	}
	assert.Empty(t, calls, "nothing reached the orchestrator")
}

// TestProvidersAndExternalToolsPushesInterleave: provider and external
// pushes are independent, each ordered by its own generation; whatever
// order they arrive in, even racing, the session ends with the highest
// generation of both, and every listing in between is a whole surface.
func TestProvidersAndExternalToolsPushesInterleave(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))

	// In turn: each push keeps the other's input.
	h.push(t, "s1", 2, "gitlab")
	h.pushExternal(t, "s1", extSet(2, docsSearch))
	h.push(t, "s1", 3, "github")
	assert.Equal(t, withTools(toolapi.Surface("github"), "docs__search"), h.state(t, "s1").GetToolNames())
	h.pushExternal(t, "s1", extSet(3))
	assert.Equal(t, toolapi.Surface("github"), h.state(t, "s1").GetToolNames())

	// Racing.
	sets := [][]string{{"github"}, {"gitlab"}, {"github", "gitlab"}, {}}
	externals := [][]*agentctlv1.ExternalTool{{docsSearch}, {ticketsCreate, ticketsStatus}, {}}
	surfaces := map[string]bool{}
	for _, set := range sets {
		for _, ext := range externals {
			var names []string
			for _, e := range ext {
				names = append(names, e.GetName())
			}
			surfaces[strings.Join(withTools(toolapi.Surface(set...), names...), ",")] = true
		}
	}
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	const first, last = uint64(4), uint64(205) // last: gitlab, and two external tools
	type push struct {
		external bool
		gen      uint64
	}
	work := make(chan push, 2*int(last-first+1))
	for g := first; g <= last; g++ {
		work <- push{false, g}
		work <- push{true, g}
	}
	close(work)
	var (
		workers sync.WaitGroup
		lister  sync.WaitGroup
		done    = make(chan struct{})
		bad     []string
		lists   int
	)
	for range 8 {
		workers.Go(func() {
			for p := range work {
				var err error
				if p.external {
					_, err = h.client.SetExternalTools(context.Background(), &agentctlv1.SetExternalToolsRequest{
						SessionId: "s1", ExternalTools: extSet(p.gen, externals[p.gen%3]...)})
				} else {
					_, err = h.client.SetProviders(context.Background(), &agentctlv1.SetProvidersRequest{
						SessionId: "s1", ProviderSet: &agentctlv1.ProviderSet{Providers: sets[p.gen%4], Generation: p.gen}})
				}
				assert.NoError(t, err)
			}
		})
	}
	lister.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			names := strings.Join(c.Names(t), ",")
			lists++
			if !surfaces[names] {
				bad = append(bad, names)
			}
		}
	})
	workers.Wait()
	close(done)
	lister.Wait()

	state := h.state(t, "s1")
	assert.Equal(t, last, state.GetProviderSet().GetGeneration())
	assert.Equal(t, last, state.GetExternalToolsGeneration())
	want := withTools(toolapi.Surface("gitlab"), "tickets__create", "tickets__status")
	assert.Equal(t, want, state.GetToolNames(), "the latest providers with the latest external tools")
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, c.Names(t)) }, time.Minute, 10*time.Millisecond)
	assert.Empty(t, bad, "a listing showed a surface no pair of pushes makes")
	t.Logf("%d listings during %d racing pushes", lists, 2*(last-first+1))
}

// TestExternalToolDescriptorsAreRefusedNamingTheField: a set with one bad
// descriptor is refused whole, at launch and on push, with a FieldError
// naming the descriptor's field; a refused push leaves the session as it
// was, a refused launch leaves no session.
func TestExternalToolDescriptorsAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "github"))
	h.pushExternal(t, "s1", extSet(5, docsSearch))
	before := h.state(t, "s1")

	withOutput := func(schema string) *agentctlv1.ExternalTool {
		tl := extTool("reports__get", true, openSchema)
		tl.OutputSchemaJson = []byte(schema)
		return tl
	}
	cases := []struct {
		name  string
		tools []*agentctlv1.ExternalTool
		field string // below the set
	}{
		{"no name", []*agentctlv1.ExternalTool{docsSearch, extTool("", true, openSchema)}, "tools[1].name"},
		{"a space in the name", []*agentctlv1.ExternalTool{extTool("docs search", true, openSchema)}, "tools[0].name"},
		{"a dot in the name", []*agentctlv1.ExternalTool{extTool("docs.search", true, openSchema)}, "tools[0].name"},
		{"a non-ASCII name", []*agentctlv1.ExternalTool{extTool("döcs", true, openSchema)}, "tools[0].name"},
		{"a name of 65 characters", []*agentctlv1.ExternalTool{extTool(strings.Repeat("a", 65), true, openSchema)}, "tools[0].name"},
		{"a duplicate name", []*agentctlv1.ExternalTool{docsSearch, ticketsCreate, extTool("docs__search", false, openSchema)}, "tools[2].name"},
		{"no input schema", []*agentctlv1.ExternalTool{docsSearch, extTool("a", true, "")}, "tools[1].input_schema_json"},
		{"input schema not JSON", []*agentctlv1.ExternalTool{extTool("a", true, `{"type":`)}, "tools[0].input_schema_json"},
		{"input schema an array", []*agentctlv1.ExternalTool{extTool("a", true, `[{"type":"object"}]`)}, "tools[0].input_schema_json"},
		{"input schema null", []*agentctlv1.ExternalTool{extTool("a", true, `null`)}, "tools[0].input_schema_json"},
		{"input schema true", []*agentctlv1.ExternalTool{extTool("a", true, `true`)}, "tools[0].input_schema_json"},
		{"input schema without a type", []*agentctlv1.ExternalTool{extTool("a", true, `{"properties":{}}`)}, "tools[0].input_schema_json"},
		{"input schema of type string", []*agentctlv1.ExternalTool{extTool("a", true, `{"type":"string"}`)}, "tools[0].input_schema_json"},
		{"input schema of a type list", []*agentctlv1.ExternalTool{extTool("a", true, `{"type":["object","null"]}`)}, "tools[0].input_schema_json"},
		{"a remote reference", []*agentctlv1.ExternalTool{extTool("a", true,
			`{"type":"object","properties":{"x":{"$ref":"https://schemas.example.com/x.json"}}}`)}, "tools[0].input_schema_json"},
		{"a dangling reference", []*agentctlv1.ExternalTool{extTool("a", true,
			`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`)}, "tools[0].input_schema_json"},
		{"an invalid pattern", []*agentctlv1.ExternalTool{extTool("a", true,
			`{"type":"object","properties":{"x":{"type":"string","pattern":"("}}}`)}, "tools[0].input_schema_json"},
		// The go-sdk panics on these in AddTool; agentctl refuses them first.
		{"a header annotation on an object", []*agentctlv1.ExternalTool{extTool("a", true,
			`{"type":"object","properties":{"x":{"type":"object","x-mcp-header":"X-Thing"}}}`)}, "tools[0].input_schema_json"},
		{"nesting too deep for the SDK", []*agentctlv1.ExternalTool{extTool("a", true,
			`{"type":"object","properties":{"x":`+strings.Repeat(`{"items":`, 1100)+`{}`+strings.Repeat(`}`, 1100)+`}}`)}, "tools[0].input_schema_json"},
		{"output schema not JSON", []*agentctlv1.ExternalTool{withOutput(`{`)}, "tools[0].output_schema_json"},
		{"output schema of type array", []*agentctlv1.ExternalTool{withOutput(`{"type":"array"}`)}, "tools[0].output_schema_json"},
		{"output schema with a dangling reference", []*agentctlv1.ExternalTool{withOutput(`{"type":"object","$ref":"#/$defs/nope"}`)}, "tools[0].output_schema_json"},
	}
	for i, c := range cases {
		_, err := h.client.SetExternalTools(context.Background(), &agentctlv1.SetExternalToolsRequest{
			SessionId: "s1", ExternalTools: extSet(uint64(10+i), c.tools...)})
		require.Error(t, err, c.name)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", c.name, err)
		assert.Equal(t, "external_tools."+c.field, errdefs.FieldOf(err), "%s: %v", c.name, err)

		sp := spec(fmt.Sprintf("bad%d", i), agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
		sp.ExternalTools = extSet(1, c.tools...)
		_, err = h.client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{Spec: sp})
		require.Error(t, err, c.name)
		assert.Equal(t, "spec.external_tools."+c.field, errdefs.FieldOf(err), "%s: %v", c.name, err)
		_, err = h.client.GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: sp.GetSessionId()})
		assert.ErrorIs(t, err, errdefs.ErrNotFound, "%s: a refused launch leaves no session", c.name)
	}
	after := h.state(t, "s1")
	assert.Equal(t, before.GetExternalToolsGeneration(), after.GetExternalToolsGeneration(), "refused pushes apply nothing")
	assert.Equal(t, before.GetToolNames(), after.GetToolNames())

	_, err := h.client.SetExternalTools(context.Background(), &agentctlv1.SetExternalToolsRequest{SessionId: "s1"})
	assert.Equal(t, "external_tools", errdefs.FieldOf(err))
	_, err = h.client.SetExternalTools(context.Background(), &agentctlv1.SetExternalToolsRequest{SessionId: "nope", ExternalTools: extSet(1)})
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	assert.NotContains(t, h.logs.String(), "panic")

	// Accepted at the edges: 64 characters, '-', draft-07, local references.
	edge := extSet(100,
		extTool(strings.Repeat("a", 64), true, openSchema),
		extTool("Docs-Search_2", true, ticketSchema),
		extTool("refs", false, `{"type":"object","$defs":{"id":{"type":"string"}},"properties":{"id":{"$ref":"#/$defs/id"}}}`),
		withOutput(`{"type":"object","properties":{"total":{"type":"integer"}}}`))
	assert.True(t, h.pushExternal(t, "s1", edge).GetToolsChanged())
	assert.Subset(t, h.state(t, "s1").GetToolNames(), []string{strings.Repeat("a", 64), "Docs-Search_2", "refs", "reports__get"})
}

// TestExternalToolNamedLikeABuiltinIsDropped: a descriptor never shadows
// a built-in tool, whether that tool is shown or not; the rest of the set
// applies, and the daemon logs what it dropped.
func TestExternalToolNamedLikeABuiltinIsDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	calls, _ := orchestrator(t, h, func(*agentctlv1.ToolCall) *agentctlv1.ToolResult { return &agentctlv1.ToolResult{Text: "ok"} })
	st := h.create(t, spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1, "gitlab"))
	resp := h.pushExternal(t, "s1", extSet(2,
		extTool("task_info", true, openSchema), extTool(toolapi.GitHubPRCreate, false, openSchema), docsSearch))
	assert.True(t, resp.GetAccepted())
	assert.Equal(t, withTools(toolapi.Surface("gitlab"), "docs__search"), h.state(t, "s1").GetToolNames(),
		"github_pr_create is not shown without github, even as an external tool")
	assert.Contains(t, h.logs.String(), "external tools named like built-in tools are not exposed")
	assert.Contains(t, h.logs.String(), toolapi.GitHubPRCreate)

	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")
	info := listed(t, c, "task_info")
	want, _ := registry.Build(registry.Spec{Mode: registry.ModeTask}).Lookup("task_info")
	assert.Equal(t, want.Description, info.Description, "the built-in definition, not the descriptor's")
	_, isErr := callText(t, c, "task_info", map[string]any{"anything": 1})
	assert.True(t, isErr, "the built-in's closed schema applies")
	assert.Empty(t, calls)

	h.push(t, "s1", 2, "github")
	gh := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github")})
	create, _ := gh.Lookup(toolapi.GitHubPRCreate)
	require.Eventually(t, func() bool { return slices.Contains(c.Names(t), toolapi.GitHubPRCreate) }, time.Minute, 10*time.Millisecond)
	assert.Equal(t, create.Description, listed(t, c, toolapi.GitHubPRCreate).Description)
}

// TestExternalToolCallsAreValidatedThenForwardedWithIdentity: a call to an
// external tool is checked against the descriptor's input schema and the
// argument bound in agentctl, then forwarded over Attach under its
// exposed name with the session's identity; the orchestrator's answer
// (text, structured result, refusal code) reaches the client unchanged.
func TestExternalToolCallsAreValidatedThenForwardedWithIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	calls, _ := orchestrator(t, h, func(call *agentctlv1.ToolCall) *agentctlv1.ToolResult {
		if call.GetToolName() == "tickets__create" {
			return &agentctlv1.ToolResult{IsError: true, ErrorCode: "tool_disabled", Text: "an administrator disabled tickets__create"}
		}
		return &agentctlv1.ToolResult{Text: "2 hits", StructuredJson: []byte(`{"hits":["a","b"]}`)}
	})
	sp := spec("s1", agentctlv1.SessionMode_SESSION_MODE_TASK, 1)
	sp.ExternalTools = extSet(1, docsSearch, ticketsCreate, extTool("bulk__put", false, openSchema))
	st := h.create(t, sp)
	c := mcptest.Connect(t, mcptest.HTTP(st.GetMcpUrl(), h.token(t, "s1")), "")

	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs__search",
		Arguments: map[string]any{"query": "deploy", "limit": 2}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	assert.Equal(t, "2 hits", res.Content[0].(*mcp.TextContent).Text)
	assert.JSONEq(t, `{"hits":["a","b"]}`, schemaJSON(t, res.StructuredContent))
	call := <-calls
	assert.Equal(t, "s1", call.GetSessionId())
	assert.Equal(t, "task_s1", call.GetTaskId())
	assert.Equal(t, "docs__search", call.GetToolName(), "the exposed name")
	assert.JSONEq(t, `{"query":"deploy","limit":2}`, string(call.GetArgumentsJson()))

	text, isErr := callText(t, c, "tickets__create", map[string]any{"title": "flaky test"})
	assert.True(t, isErr)
	assert.Equal(t, "tool_disabled: an administrator disabled tickets__create", text)
	assert.Equal(t, "tickets__create", (<-calls).GetToolName())

	for _, bad := range []struct {
		args  any
		field string
	}{
		{map[string]any{}, "query"},
		{map[string]any{"query": ""}, "query"},
		{map[string]any{"query": 42}, "query"},
		{map[string]any{"query": "x", "limit": 0}, "limit"},
		{map[string]any{"query": "x", "session_id": "s_other"}, "session_id"},
	} {
		text, isErr := callText(t, c, "docs__search", bad.args)
		assert.True(t, isErr, "%v", bad.args)
		assert.True(t, strings.HasPrefix(text, "invalid_arguments: "), text)
		assert.Contains(t, text, bad.field, "the error names the field")
	}
	text, isErr = callText(t, c, "tickets__create", map[string]any{"body": "no title"})
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, "invalid_arguments: "), "draft-07 schemas validate too: %s", text)

	huge := strings.Repeat("x", toolapi.MaxArgumentBytes)
	text, isErr = callText(t, c, "bulk__put", map[string]any{"data": huge})
	assert.True(t, isErr)
	assert.True(t, strings.HasPrefix(text, toolapi.CodeArgumentsTooLarge+": "), "%.80s", text)
	assert.Empty(t, calls, "no refused call reached the orchestrator")

	// A tool removed by a push cannot be called any more.
	h.pushExternal(t, "s1", extSet(2, ticketsCreate))
	require.Eventually(t, func() bool { return !slices.Contains(c.Names(t), "docs__search") }, time.Minute, 10*time.Millisecond)
	res, err = c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs__search", Arguments: map[string]any{"query": "x"}})
	if err == nil {
		assert.True(t, res.IsError)
	}
	assert.Empty(t, calls, "a removed tool's call never reached the orchestrator")
}
