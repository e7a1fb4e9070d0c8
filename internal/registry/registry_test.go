package registry_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

var (
	taskOnly = []string{"session_info", "task_add_sources", "task_inbox", "task_info"}
	planOnly = []string{"session_info", "task_inbox", "task_info"}
	ghAll    = []string{"github_pr_automation", "github_pr_comments", "github_pr_create", "github_pr_reply",
		"github_pr_request_reviewers", "github_pr_set_automation", "github_pr_status"}
	glAll = []string{"gitlab_mr_automation", "gitlab_mr_create", "gitlab_mr_discussions", "gitlab_mr_reply",
		"gitlab_mr_request_reviewers", "gitlab_mr_set_automation", "gitlab_mr_status"}
	ghRead = []string{"github_pr_automation", "github_pr_comments", "github_pr_status"}
	glRead = []string{"gitlab_mr_automation", "gitlab_mr_discussions", "gitlab_mr_status"}
)

func surface(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	sort.Strings(out)
	return out
}

// TestToolNamesPerProviderSetAndMode pins the surface: which tools each
// provider set shows in each mode. Raw provider values go through the same
// allowlist agentctl applies to a pushed set.
func TestToolNamesPerProviderSetAndMode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		raw        []string
		task, plan []string
	}{
		{"github", []string{"github"}, surface(taskOnly, ghAll), surface(planOnly, ghRead)},
		{"gitlab", []string{"gitlab"}, surface(taskOnly, glAll), surface(planOnly, glRead)},
		{"both", []string{"gitlab", "github"}, surface(taskOnly, ghAll, glAll), surface(planOnly, ghRead, glRead)},
		{"empty", nil, taskOnly, planOnly},
		{"local", []string{"local"}, taskOnly, planOnly},
		{"unknown", []string{"bitbucket", "gitea", ""}, taskOnly, planOnly},
		{"mixed case and duplicates", []string{"GitHub", " github ", "GITLAB", "gitlab"}, surface(taskOnly, ghAll, glAll), surface(planOnly, ghRead, glRead)},
		{"look-alike", []string{"G\u0130THUB"}, taskOnly, planOnly},
	}
	for _, mode := range []registry.Mode{registry.ModeTask, registry.ModePlan, "bogus"} {
		for _, c := range cases {
			t.Run(string(mode)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				r := registry.Build(registry.Spec{Mode: mode, Providers: providers.Of(c.raw...)})
				want := c.plan
				if mode == registry.ModeTask {
					want = c.task
				}
				assert.Equal(t, want, r.Names())
			})
		}
	}
}

func TestPlanModeKeepsOnlyReadOnlyTools(t *testing.T) {
	t.Parallel()
	external := []registry.Tool{
		{Name: "docs_search", Description: "search docs", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnly: true},
		{Name: "deploy", Description: "deploy", InputSchema: json.RawMessage(`{"type":"object"}`), Destructive: true},
		{Name: "task_info", Description: "an impostor", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnly: true},
	}
	task := registry.Build(registry.Spec{Mode: registry.ModeTask, External: external})
	plan := registry.Build(registry.Spec{Mode: registry.ModePlan, External: external})
	assert.Equal(t, []string{"deploy", "docs_search", "session_info", "task_add_sources", "task_inbox", "task_info"}, task.Names(), "no provider, no provider tools")
	assert.Equal(t, []string{"docs_search", "session_info", "task_inbox", "task_info"}, plan.Names())
	info, ok := task.Lookup("task_info")
	require.True(t, ok)
	assert.Equal(t, "task", info.Group, "a pushed descriptor never replaces a built-in tool")
	for _, r := range []*registry.Registry{task, plan} {
		for _, tool := range r.Tools() {
			if r == plan {
				assert.True(t, tool.ReadOnly, tool.Name)
			}
		}
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	gh := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github")})
	gl := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("gitlab")})
	both := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})

	removed, upserted := both.Diff(gh)
	assert.Empty(t, removed)
	assert.Equal(t, glAll, names(upserted))

	removed, upserted = gl.Diff(gh)
	assert.Equal(t, ghAll, removed)
	assert.Equal(t, glAll, names(upserted))

	removed, upserted = gh.Diff(nil)
	assert.Empty(t, removed)
	assert.Equal(t, gh.Names(), names(upserted))

	again := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of(" GITHUB")})
	assert.True(t, again.Equal(gh), "an equivalent spec shows the same surface")
	assert.False(t, gh.Equal(nil))

	// A changed definition is an upsert even though the name stays.
	tools := gh.Tools()
	tools[0].Description += " (changed)"
	changed := registry.FromTools(tools)
	removed, upserted = changed.Diff(gh)
	assert.Empty(t, removed)
	assert.Equal(t, []string{tools[0].Name}, names(upserted))
	// Whitespace inside a schema is not a change.
	tools = gh.Tools()
	tools[0].InputSchema = json.RawMessage(" \n" + string(tools[0].InputSchema) + " ")
	assert.True(t, registry.FromTools(tools).Equal(gh))
}

// TestDefinitionsAreValidAndLean checks every built-in definition: a valid
// 2020-12 object schema that refuses unknown arguments, a short
// description, and annotations that say read-only tools are read-only.
func TestDefinitionsAreValidAndLean(t *testing.T) {
	t.Parallel()
	all := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	total := 0
	for _, tool := range all.Tools() {
		var s jsonschema.Schema
		require.NoError(t, json.Unmarshal(tool.InputSchema, &s), tool.Name)
		_, err := s.Resolve(nil)
		require.NoError(t, err, tool.Name)
		assert.Equal(t, "object", s.Type, tool.Name)
		assert.NotNil(t, s.AdditionalProperties, "%s must refuse unknown arguments", tool.Name)
		assert.LessOrEqual(t, len(tool.Description), 200, tool.Name)
		assert.NotEmpty(t, tool.OutputSchema, "%s: structured results are described", tool.Name)
		assert.True(t, strings.HasPrefix(tool.Name, tool.Group+"_") || tool.Group == "task", "%s: provider tools carry the provider in the name", tool.Name)
		if tool.Group != "task" {
			assert.NotContains(t, string(tool.InputSchema), "task_id", "identity is bound by agentctl, never an argument")
		}
		total += len(tool.Name) + len(tool.Title) + len(tool.Description) + len(tool.InputSchema)
	}
	t.Logf("%d tools, %d bytes of definitions with both providers", all.Len(), total)
}

func names(tools []registry.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// TestParity: every GitHub tool's definition matches its GitLab
// counterpart's, by the table's counterparts (toolapi's TestParity checks
// the table itself), and every provider tool is accounted for.
func TestParity(t *testing.T) {
	t.Parallel()
	all := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	mapped := map[string]bool{}
	for _, entry := range toolapi.Tools() {
		gh, gl := entry.Name, entry.Counterpart
		if entry.Group != toolapi.GroupGitHub {
			continue
		}
		mapped[gh] = true
		if gl == "" {
			assert.NotEmpty(t, toolapi.ParityExemptions[gh], "%s has no GitLab counterpart and no reason", gh)
			continue
		}
		mapped[gl] = true
		ghTool, ok := all.Lookup(gh)
		require.True(t, ok, gh)
		glTool, ok := all.Lookup(gl)
		require.True(t, ok, gl)
		assert.Equal(t, ghTool.ReadOnly, glTool.ReadOnly, "%s and %s differ in read-only", gh, gl)
		assert.Equal(t, ghTool.Destructive, glTool.Destructive, "%s and %s differ in destructive", gh, gl)
		assert.JSONEq(t, string(ghTool.InputSchema), string(glTool.InputSchema), "%s and %s take the same arguments", gh, gl)
	}
	for name := range toolapi.ParityExemptions {
		mapped[name] = true
	}
	for _, tool := range all.Tools() {
		if tool.Group == "github" || tool.Group == "gitlab" {
			assert.True(t, mapped[tool.Name], "%s is missing from the parity map", tool.Name)
		}
	}
}

func TestBuiltinNamesEveryBuiltInToolInAnyModeAndSet(t *testing.T) {
	t.Parallel()
	all := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	for _, name := range all.Names() {
		assert.True(t, registry.Builtin(name), name)
	}
	for _, name := range []string{"docs__search", "", "TASK_INFO", "task_info "} {
		assert.False(t, registry.Builtin(name), "%q", name)
	}
}

// TestReadOnlyIsToolapisTable: agentctl marks read-only, and shows a plan
// session, exactly the built-in tools of toolapi.ReadOnly — the table the
// orchestrator's dispatcher refuses plan sessions' calls from (its
// authorization matrix checks the other side). One table, two readers.
func TestReadOnlyIsToolapisTable(t *testing.T) {
	t.Parallel()
	both := providers.Of("github", "gitlab")
	all := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: both})
	plan := registry.Build(registry.Spec{Mode: registry.ModePlan, Providers: both})
	var want []string
	for _, tool := range all.Tools() {
		assert.Equal(t, toolapi.ReadOnly(tool.Name), tool.ReadOnly, tool.Name)
		if toolapi.ReadOnly(tool.Name) {
			want = append(want, tool.Name)
		}
	}
	assert.Equal(t, toolapi.ReadOnlyTools(), want, "every entry of the table is a built-in tool")
	assert.Equal(t, want, plan.Names(), "a plan session is shown exactly the table's tools")
}

// TestBuildsFingerprintsAreTheDefinitions: the fingerprints Build reuses
// for built-in tools are those of the definitions it returns, so a
// registry rebuilt from its own tools shows the same surface.
func TestBuildsFingerprintsAreTheDefinitions(t *testing.T) {
	t.Parallel()
	for _, mode := range []registry.Mode{registry.ModeTask, registry.ModePlan} {
		r := registry.Build(registry.Spec{Mode: mode, Providers: providers.Of("github", "gitlab")})
		rebuilt := registry.FromTools(r.Tools())
		assert.True(t, rebuilt.Equal(r), "%s", mode)
		removed, upserted := rebuilt.Diff(r)
		assert.Empty(t, removed)
		assert.Empty(t, upserted)
	}
}

// hasProperty reports whether the JSON schema names a property called
// name at any depth.
func hasProperty(t *testing.T, raw json.RawMessage, name string) bool {
	t.Helper()
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				if _, ok := props[name]; ok {
					return true
				}
			}
			for _, sub := range v {
				if walk(sub) {
					return true
				}
			}
		case []any:
			for _, sub := range v {
				if walk(sub) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}

// TestZeroSpecIsTheSafestSurface pins what a surface assembled from no
// capability serves: the read-only task tools, with hosted schemas (no
// colocated-only field). An unknown mode or transport is no wider.
func TestZeroSpecIsTheSafestSurface(t *testing.T) {
	t.Parallel()
	zero := registry.Build(registry.Spec{})
	assert.Equal(t, planOnly, zero.Names())
	for _, tool := range zero.Tools() {
		for _, f := range toolapi.ColocatedOnly {
			assert.False(t, hasProperty(t, tool.InputSchema, f.Name), "%s: input names %s", tool.Name, f.Name)
			assert.False(t, hasProperty(t, tool.OutputSchema, f.Name), "%s: output names %s", tool.Name, f.Name)
		}
	}
	hosted := registry.Build(registry.Spec{Mode: registry.ModePlan, Transport: toolapi.TransportHosted})
	assert.True(t, zero.Equal(hosted), "the zero spec is the hosted plan-mode surface with no provider and no catalog tool")
	bogus := registry.Build(registry.Spec{Mode: "bogus", Transport: "bogus"})
	assert.True(t, zero.Equal(bogus), "an unknown mode and transport are the narrowest")
}

// TestTransportIsOneInput: the transport changes schemas, never which
// tools are shown, and only the tools whose schemas name a
// colocated-only field differ.
func TestTransportIsOneInput(t *testing.T) {
	t.Parallel()
	both := providers.Of("github", "gitlab")
	external := []registry.Tool{{Name: "docs_search", InputSchema: json.RawMessage(`{"type":"object","properties":{"local_path":{"type":"string"}}}`), ReadOnly: true}}
	colocated := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: both, External: external, Transport: toolapi.TransportColocated})
	hosted := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: both, External: external, Transport: toolapi.TransportHosted})
	assert.Equal(t, colocated.Names(), hosted.Names())
	removed, upserted := hosted.Diff(colocated)
	assert.Empty(t, removed)
	var changed []string
	for _, u := range upserted {
		changed = append(changed, u.Name)
	}
	assert.Equal(t, []string{toolapi.TaskInfoTool}, changed, "only task_info's result names a colocated-only field")
	ti, _ := colocated.Lookup(toolapi.TaskInfoTool)
	assert.True(t, hasProperty(t, ti.OutputSchema, "local_path"))
	ti, _ = hosted.Lookup(toolapi.TaskInfoTool)
	assert.False(t, hasProperty(t, ti.OutputSchema, "local_path"))
	ext, _ := hosted.Lookup("docs_search")
	assert.True(t, hasProperty(t, ext.InputSchema, "local_path"), "a catalog tool's schema is its server's, on either transport")
}

// TestBuiltinSchemasAreSharedAndCallersCopied: every registry of the
// process shares the built-in tools' schema bytes (a copy per registry was
// ≈10 KB of every session's heap, and more garbage on every push), while
// a caller's external tool is copied: changing its slices afterwards
// changes no registry.
func TestBuiltinSchemasAreSharedAndCallersCopied(t *testing.T) {
	input := []byte(`{"type":"object"}`)
	spec := registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab"),
		Transport: toolapi.TransportColocated, External: []registry.Tool{{Name: "docs__search", InputSchema: input}}}
	a, b := registry.Build(spec), registry.Build(spec)
	builtins := 0
	for _, ta := range a.Tools() {
		tb, ok := b.Lookup(ta.Name)
		require.True(t, ok, ta.Name)
		if !registry.Builtin(ta.Name) {
			assert.NotSame(t, &ta.InputSchema[0], &tb.InputSchema[0], "%s: a caller's schema is copied per registry", ta.Name)
			continue
		}
		builtins++
		assert.Same(t, &ta.InputSchema[0], &tb.InputSchema[0], "%s: input schema copied", ta.Name)
		if len(ta.OutputSchema) > 0 {
			assert.Same(t, &ta.OutputSchema[0], &tb.OutputSchema[0], "%s: output schema copied", ta.Name)
		}
	}
	assert.Equal(t, 18, builtins)

	copy(input, `{"type":"string"}`)
	ext, ok := a.Lookup("docs__search")
	require.True(t, ok)
	assert.JSONEq(t, `{"type":"object"}`, string(ext.InputSchema))
}
