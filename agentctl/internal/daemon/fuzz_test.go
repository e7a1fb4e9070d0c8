package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// fuzzTools is every built-in tool a session can show (task mode, both
// providers), sorted by name: the order FuzzToolArgumentsValidation picks
// a tool by.
func fuzzTools() []registry.Tool {
	tools := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")}).Tools()
	slices.SortFunc(tools, func(a, b registry.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools
}

// TestFuzzToolsAreTheSurface: the fuzzer covers every tool an agent can
// be shown, and every input schema is closed (so the fuzzer's check that
// nothing outside it is forwarded applies to all of them).
func TestFuzzToolsAreTheSurface(t *testing.T) {
	t.Parallel()
	var names []string
	for _, tool := range fuzzTools() {
		names = append(names, tool.Name)
		_, closed := schemaProperties(t, tool.InputSchema)
		assert.True(t, closed, "%s's input schema refuses unknown arguments: %s", tool.Name, tool.InputSchema)
	}
	assert.Equal(t, toolapi.Surface("github", "gitlab"), names)
}

// schemaProperties returns the top-level properties a tool's input schema
// names, and whether it refuses others.
func schemaProperties(t testing.TB, raw json.RawMessage) (props map[string]bool, closed bool) {
	var schema struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	props = map[string]bool{}
	for name := range schema.Properties {
		props[name] = true
	}
	return props, string(schema.AdditionalProperties) == "false" || string(schema.AdditionalProperties) == "{\"not\":{}}"
}

// validationSeeds are arguments for every tool: valid calls, each argument
// of the wrong JSON type, identity smuggled in as an argument,
// not-objects, look-alikes, huge and deeply nested values.
func validationSeeds(tools []registry.Tool) []testutil.FuzzSeed {
	deep := strings.Repeat(`{"a":[`, 200) + `1` + strings.Repeat(`]}`, 200)
	huge := strings.Repeat("x", 4096) + "\u00e9"
	common := []string{``, `null`, `{}`, `[]`, `"x"`, `42`, `{`, `{} {}`, ` {"x":1}`, `{"repository_id":5}`, `{"repository_id":"G\u0130THUB"}`,
		`{"repository_id":"` + huge + `"}`, `{"body":` + deep + `}`, `{"session_id":"sess_other","task_id":"task_other"}`, "{\"repository_id\":\"\xff\"}"}
	byTool := map[string][]string{
		"task_add_sources": {`{"repository_ids":["repo_a","repo_b"]}`, `{"repository_ids":"repo_a"}`, `{"repository_ids":[1]}`,
			`{"repository_ids":[]}`, `{"repository_ids":null}`, `{"repository_ids":["repo_a"],"task_id":"task_other"}`},
	}
	for _, g := range []toolapi.Group{toolapi.GroupGitHub, toolapi.GroupGitLab} {
		byTool[g.Like(toolapi.GitHubPRCreate)] = []string{`{"branch":"fix-login","title":"Fix login","draft":true}`, `{"branch":"fix-login"}`,
			`{"branch":1,"title":"x"}`, `{"branch":"b","title":["x"]}`, `{"branch":"b","title":"x","draft":"yes"}`,
			`{"branch":"b","title":"x","draft":1e400}`, `{"branch":"b","title":"x","branch":2}`}
		byTool[g.Like(toolapi.GitHubPRStatus)] = []string{`{"repository_id":"repo_a"}`}
		byTool[g.Like(toolapi.GitHubPRReply)] = []string{`{"thread_id":"1","body":"fixed"}`, `{"thread_id":1,"body":"x"}`, `{"thread_id":"1"}`}
		byTool[g.Like(toolapi.GitHubPRRequestReviewers)] = []string{`{"reviewers":["carol"]}`, `{"reviewers":"carol"}`, `{"reviewers":[null]}`, `{"reviewers":[]}`}
		byTool[g.Like(toolapi.GitHubPRSetAutomation)] = []string{`{"auto_merge":true,"prompt_on_closed":false}`, `{"auto_merge":"yes"}`, `{"auto_merge":null}`}
	}
	for _, name := range []string{"task_info", "task_add_sources", toolapi.GitHubPRCreate, toolapi.GitLabMRStatus} {
		byTool[name] = append(byTool[name], common...)
	}
	var out []testutil.FuzzSeed
	for i, tool := range tools {
		args := byTool[tool.Name]
		if len(args) == 0 {
			args = []string{`{}`, `{"x":1}`}
		}
		for j, a := range args {
			out = append(out, testutil.FuzzSeed{Name: fmt.Sprintf("%s-%02d", tool.Name, j), Args: []any{uint8(i), []byte(a)}})
		}
	}
	return out
}

// FuzzToolArgumentsValidation calls each tool's handler — the one a
// session's MCP endpoint runs — with arbitrary arguments, with a fake
// orchestrator attached that answers every call it receives. No call may
// panic or fail with a Go error; a call either is refused as
// invalid_arguments and never forwarded, or is forwarded as a JSON object
// with only the properties the tool's schema names, carrying the
// session's own identity (never one from the arguments).
func FuzzToolArgumentsValidation(f *testing.F) {
	tools := fuzzTools()
	testutil.AddFuzzSeeds(f, validationSeeds(tools))
	d, err := New(Options{Secret: "fuzz-secret", StateDir: f.TempDir()})
	require.NoError(f, err)
	f.Cleanup(d.Close)
	s := &session{id: "sess_fuzz", taskID: "task_fuzz"}
	var (
		forwarded *agentctlv1.ToolCall
		l         *link
	)
	// The fake orchestrator answers on the caller's goroutine: the hub
	// sends a call before it waits for the answer.
	l = d.hub.attach(func(m *agentctlv1.AttachResponse) error {
		if c := m.GetToolCall(); c != nil {
			forwarded = c
			d.hub.deliver(l, &agentctlv1.ToolResult{CallId: c.GetCallId(), Text: "answered"})
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		tl := tools[int(tool)%len(tools)]
		forwarded = nil
		res, err := d.toolHandler(s)(tl)(context.Background(),
			&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tl.Name, Arguments: json.RawMessage(args)}})
		if err != nil {
			t.Fatalf("%s: the handler failed with a Go error: %v", tl.Name, err)
		}
		if res == nil || len(res.Content) != 1 {
			t.Fatalf("%s: no result", tl.Name)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if forwarded == nil {
			if !res.IsError || !strings.HasPrefix(text, "invalid_arguments: ") {
				t.Fatalf("%s(%q) was neither forwarded nor refused as invalid arguments: %q", tl.Name, args, text)
			}
			return
		}
		if res.IsError || text != "answered" {
			t.Fatalf("%s(%q) was forwarded, but the answer was not returned: %q", tl.Name, args, text)
		}
		if forwarded.GetSessionId() != s.id || forwarded.GetTaskId() != s.taskID || forwarded.GetToolName() != tl.Name {
			t.Fatalf("%s(%q) was forwarded as %s/%s/%s, not with the session's identity", tl.Name, args,
				forwarded.GetSessionId(), forwarded.GetTaskId(), forwarded.GetToolName())
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(forwarded.GetArgumentsJson(), &obj); err != nil || obj == nil {
			t.Fatalf("%s(%q) was forwarded, but %q is not a JSON object", tl.Name, args, forwarded.GetArgumentsJson())
		}
		props, closed := schemaProperties(t, tl.InputSchema)
		for name := range obj {
			if closed && !props[name] {
				t.Fatalf("%s(%q) was forwarded with %q, which its schema does not allow", tl.Name, args, name)
			}
		}
	})
}
