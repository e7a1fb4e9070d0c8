package toolapi_test

import (
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// pathLike is what a property name that may name something on the
// agent's machine looks like: a path, a directory, a file, a command, an
// address.
var pathLike = regexp.MustCompile(`(?i)path|dir|folder|file|command|cmd|argv|exec|cwd|home|socket|mount|url|uri`)

func names(fields []toolapi.Field) map[string]bool {
	m := map[string]bool{}
	for _, f := range fields {
		m[f.Name] = true
	}
	return m
}

// requiredNames lists every "required" entry of a schema, depth first.
func requiredNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if req, ok := v["required"].([]any); ok {
				for _, r := range req {
					out = append(out, r.(string))
				}
			}
			for _, sub := range v {
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(doc)
	return out
}

// TestHostedSchemasOmitTheColocatedOnlyFields compares, tool by tool and
// field by field, the schemas a colocated surface publishes with those a
// hosted one does, against the written lists: the hosted schema is the
// colocated one without exactly the ColocatedOnly fields (issue 19). A
// path-like field in no list fails the test: a new one must be
// classified before it ships.
func TestHostedSchemasOmitTheColocatedOnlyFields(t *testing.T) {
	t.Parallel()
	local, kept := names(toolapi.ColocatedOnly), names(toolapi.HostedFields)
	for name := range local {
		assert.False(t, kept[name], "%s is both colocated-only and kept on hosted surfaces", name)
	}
	seen := map[string]bool{}
	for _, tool := range toolapi.Tools() {
		cin, cout := tool.Schemas(toolapi.TransportColocated)
		assert.JSONEq(t, string(tool.InputSchema()), string(cin), "%s: a colocated surface publishes the table's input schema", tool.Name)
		assert.JSONEq(t, string(tool.OutputSchema()), string(cout), "%s: a colocated surface publishes the table's output schema", tool.Name)
		for _, transport := range []toolapi.Transport{toolapi.TransportHosted, "", "bogus"} {
			hin, hout := tool.Schemas(transport)
			for _, pair := range [][2]json.RawMessage{{cin, hin}, {cout, hout}} {
				colocated, hostedProps := properties(t, pair[0]), properties(t, pair[1])
				var want []string
				for _, p := range colocated {
					leaf := path.Base(strings.ReplaceAll(strings.ReplaceAll(p, ".", "/"), "[]", ""))
					seen[leaf] = true
					if pathLike.MatchString(leaf) {
						assert.True(t, local[leaf] || kept[leaf],
							"%s: field %s looks like it names something on the agent's machine: classify %q in toolapi.ColocatedOnly or toolapi.HostedFields",
							tool.Name, p, leaf)
					}
					if !local[leaf] {
						want = append(want, p)
					}
				}
				assert.Equal(t, want, hostedProps, "%s over %q: the colocated fields but the colocated-only ones", tool.Name, transport)
				for _, r := range requiredNames(t, pair[1]) {
					assert.False(t, local[r], "%s over %q still requires %s", tool.Name, transport, r)
				}
			}
		}
	}
	for _, f := range slices.Concat(toolapi.ColocatedOnly, toolapi.HostedFields) {
		assert.True(t, seen[f.Name], "%s (%s) is in a list but in no tool's schema: remove it", f.Name, f.GoField)
		assert.NotEmpty(t, f.Why, "%s: say why", f.Name)
	}
}

// TestHostedSchemaLeavesOtherSchemasAlone: a schema naming no
// colocated-only field is returned byte for byte (external tools' and
// most built-in tools' schemas).
func TestHostedSchemaLeavesOtherSchemasAlone(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"type":"object","properties":{"path":{"type":"string"}}}`, `not json`, ``} {
		assert.Equal(t, raw, string(toolapi.HostedSchema(json.RawMessage(raw))))
	}
	got := toolapi.HostedSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"object","properties":{"local_path":{},"b":{}},"required":["local_path","b"]}}}`))
	assert.JSONEq(t, `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{}},"required":["b"]}}}`, string(got))
}
