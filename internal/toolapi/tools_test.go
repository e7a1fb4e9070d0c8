package toolapi_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestParity is derived from the table: every provider tool has its
// counterpart in the other provider's group (which names it back) or a
// documented exemption, and the two differ in nothing but the provider:
// the same argument and result types, annotations and refusals, and the
// same title and description but for "pull request" and "merge request".
func TestParity(t *testing.T) {
	t.Parallel()
	other := map[toolapi.Group]toolapi.Group{toolapi.GroupGitHub: toolapi.GroupGitLab, toolapi.GroupGitLab: toolapi.GroupGitHub}
	providerTools := 0
	for _, tool := range toolapi.Tools() {
		if _, ok := tool.Group.Provider(); !ok {
			assert.Empty(t, tool.Counterpart, "%s: a task tool has no counterpart", tool.Name)
			continue
		}
		providerTools++
		reason := toolapi.ParityExemptions[tool.Name]
		if tool.Counterpart == "" {
			assert.NotEmpty(t, reason, "%s has no counterpart in %s and no documented exemption (toolapi.ParityExemptions)",
				tool.Name, other[tool.Group])
			continue
		}
		assert.Empty(t, reason, "%s has a counterpart and an exemption", tool.Name)
		peer, ok := toolapi.Lookup(tool.Counterpart)
		require.True(t, ok, "%s: counterpart %s is not in the table", tool.Name, tool.Counterpart)
		assert.Equal(t, other[tool.Group], peer.Group, "%s: its counterpart is the other provider's", tool.Name)
		assert.Equal(t, tool.Name, peer.Counterpart, "%s and %s name each other", tool.Name, peer.Name)
		assert.Equal(t, tool.Args, peer.Args, "%s and %s take the same arguments", tool.Name, peer.Name)
		assert.Equal(t, tool.Result, peer.Result, "%s and %s answer the same result", tool.Name, peer.Name)
		assert.Equal(t, [3]bool{tool.ReadOnly, tool.Idempotent, tool.OpenWorld}, [3]bool{peer.ReadOnly, peer.Idempotent, peer.OpenWorld},
			"%s and %s differ in read-only, idempotent or open-world", tool.Name, peer.Name)
		assert.Equal(t, tool.Refusals(), peer.Refusals(), "%s and %s refuse alike", tool.Name, peer.Name)
		neutral := func(tl toolapi.Tool, s string) string {
			return strings.ReplaceAll(s, tl.Group.Noun(), "change request")
		}
		assert.Equal(t, neutral(tool, tool.Title), neutral(peer, peer.Title), "%s and %s: titles", tool.Name, peer.Name)
		assert.Equal(t, neutral(tool, tool.Description), neutral(peer, peer.Description), "%s and %s: descriptions", tool.Name, peer.Name)
	}
	assert.Equal(t, 14, providerTools)
	for name := range toolapi.ParityExemptions {
		_, ok := toolapi.Lookup(name)
		assert.True(t, ok, "exemption for %s, which is not a tool", name)
	}
}

// TestTableIsWellFormed: names say their group, every tool describes its
// result, and every refusal code is one of the stable codes.
func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	stable := map[string]bool{toolapi.CodeArgumentsTooLarge: true, toolapi.CodeResultTooLarge: true}
	for _, c := range []string{toolapi.CodeSessionNotOnLink, toolapi.CodeUnknownSession, toolapi.CodePermissionDenied,
		toolapi.CodeSessionEnded, toolapi.CodeUnknownTool, toolapi.CodeInvalidArguments, toolapi.CodeReadOnlySession,
		toolapi.CodeInternal, toolapi.CodeProviderNotAttached, toolapi.CodeRepositoryNotAttached, toolapi.CodeProviderMismatch,
		toolapi.CodeAmbiguousRepository, toolapi.CodeNotConnected, toolapi.CodeCredentialUnavailable, toolapi.CodeNoChangeRequest,
		toolapi.CodeAlreadyExists, toolapi.CodeSourceAdditionDenied, toolapi.CodeNoWorkspace, toolapi.CodePushRejected, toolapi.CodePushFailed,
		toolapi.CodeProviderUnauthorized, toolapi.CodeProviderForbidden,
		toolapi.CodeProviderNotFound, toolapi.CodeProviderInvalid, toolapi.CodeRateLimited, toolapi.CodeProviderUnavailable,
		toolapi.CodeProviderFailed} {
		stable[c] = true
	}
	for _, tool := range toolapi.Tools() {
		if p, ok := tool.Group.Provider(); ok {
			assert.True(t, strings.HasPrefix(tool.Name, string(p)+"_"), "%s: a provider tool's name starts with its provider", tool.Name)
		} else {
			assert.Equal(t, toolapi.GroupTask, tool.Group, tool.Name)
		}
		assert.NotEmpty(t, tool.Title, tool.Name)
		assert.NotEmpty(t, tool.Description, tool.Name)
		assert.NotNil(t, tool.Result, "%s: structured results are described", tool.Name)
		for _, c := range tool.Refusals() {
			assert.True(t, stable[c], "%s: refusal %q is not a stable code", tool.Name, c)
		}
		assert.NotContains(t, tool.Refusals(), toolapi.CodeUnknownTool, "%s: a tool in the table exists", tool.Name)
		assert.Equal(t, !tool.ReadOnly, contains(tool.Refusals(), toolapi.CodeReadOnlySession),
			"%s: only a tool that writes is refused to a plan session", tool.Name)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestGeneratedSchemasAreTheTypes: the schemas agentctl serves, computed
// at build time, are exactly what reflection derives from the table's
// types now (a stale schemas_gen.go fails here; 'make docs' fixes it).
func TestGeneratedSchemasAreTheTypes(t *testing.T) {
	t.Parallel()
	for _, tool := range toolapi.Tools() {
		if tool.Args != nil {
			assert.JSONEq(t, string(toolapi.ReflectSchema(tool.Args)), string(tool.InputSchema()), "%s: run 'make docs'", tool.Name)
		} else {
			assert.JSONEq(t, `{"type":"object","properties":{},"additionalProperties":false}`, string(tool.InputSchema()), tool.Name)
		}
		assert.JSONEq(t, string(toolapi.ReflectSchema(tool.Result)), string(tool.OutputSchema()), "%s: run 'make docs'", tool.Name)
		var in map[string]any
		require.NoError(t, json.Unmarshal(tool.InputSchema(), &in))
		assert.Equal(t, false, in["additionalProperties"], "%s refuses unknown arguments", tool.Name)
	}
}

// TestCallToolSchemaIsGenerated: agentctl's own call_tool's schema is
// computed at build time too, so its start-up does no reflection.
func TestCallToolSchemaIsGenerated(t *testing.T) {
	assert.JSONEq(t, string(toolapi.ReflectSchema(reflect.TypeFor[toolapi.CallToolArgs]())),
		string(toolapi.InputSchema[toolapi.CallToolArgs]()), "run 'make docs'")
	allocs := testing.AllocsPerRun(10, func() { toolapi.InputSchema[toolapi.CallToolArgs]() })
	assert.Less(t, allocs, 10.0, "InputSchema[CallToolArgs] derives by reflection (%v allocations)", allocs)
}

// TestSurfaceAndReadOnlyComeFromTheTable pins what the table says.
func TestSurfaceAndReadOnlyComeFromTheTable(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"session_info", "task_add_sources", "task_inbox", "task_info"}, toolapi.Surface())
	assert.Equal(t, toolapi.Surface("github", "gitlab"), toolapi.Surface(" GitLab", "GITHUB", "local"))
	assert.Len(t, toolapi.Surface("github", "gitlab"), 18)
	assert.Equal(t, []string{"github_pr_automation", "github_pr_comments", "github_pr_status", "gitlab_mr_automation",
		"gitlab_mr_discussions", "gitlab_mr_status", "session_info", "task_inbox", "task_info"}, toolapi.ReadOnlyTools())
	assert.False(t, toolapi.ReadOnly("docs__search"))
	p, ok := toolapi.GroupGitLab.Provider()
	assert.True(t, ok)
	assert.Equal(t, providers.GitLab, p)
}

// TestTaskInfoSaysWhenToCallIt: many clients skip the server
// instructions, so task_info's own description tells the model to call it
// first and whenever a tool it expects is missing (issue 32).
func TestTaskInfoSaysWhenToCallIt(t *testing.T) {
	i := slices.IndexFunc(toolapi.Tools(), func(tl toolapi.Tool) bool { return tl.Name == toolapi.TaskInfoTool })
	require.GreaterOrEqual(t, i, 0)
	d := toolapi.Tools()[i].Description
	assert.True(t, strings.HasPrefix(d, "Call first"), d)
	assert.Contains(t, d, "whenever a tool you expect is missing")
}
