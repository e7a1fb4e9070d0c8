package toolapi_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// properties lists every property path of a JSON schema, depth first.
func properties(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var schema map[string]any
	require.NoError(t, json.Unmarshal(raw, &schema))
	var out []string
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if items, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
		props, _ := s["properties"].(map[string]any)
		for name, sub := range props {
			p := name
			if path != "" {
				p = path + "." + name
			}
			out = append(out, p)
			if m, ok := sub.(map[string]any); ok {
				walk(p, m)
			}
		}
	}
	walk("", schema)
	sort.Strings(out)
	return out
}

var credentialish = regexp.MustCompile(`(?i)token|secret|password|passwd|e-?mail|scope|expir|credential|key|auth|cookie|session_token`)

// TestSessionInfoShapeIsPinnedAndCredentialFree pins session_info's wire
// shape. Adding a field means updating this list, and no field name may
// look like it carries a credential.
func TestSessionInfoShapeIsPinnedAndCredentialFree(t *testing.T) {
	t.Parallel()
	got := properties(t, toolapi.OutputSchema[toolapi.SessionInfo]())
	assert.Equal(t, []string{
		"accounts", "accounts[].provider", "accounts[].username", "accounts[].validated",
		"agent", "mode", "providers", "session_id", "task_id", "workspace_id",
	}, got)
	for _, p := range got {
		assert.NotRegexp(t, credentialish, p)
	}
}

// TestSessionInfoCannotCarryFreeForm walks the Go type: only strings,
// bools, numbers, and slices and structs of them — no map, interface or
// raw JSON that could carry anything.
func TestSessionInfoCannotCarryFreeForm(t *testing.T) {
	t.Parallel()
	var check func(path string, typ reflect.Type)
	check = func(path string, typ reflect.Type) {
		switch typ.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64:
		case reflect.Slice:
			require.NotEqual(t, reflect.Uint8, typ.Elem().Kind(), "%s: raw bytes", path)
			check(path+"[]", typ.Elem())
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				check(path+"."+f.Name, f.Type)
			}
		default:
			t.Errorf("%s: %s can carry free-form data", path, typ.Kind())
		}
	}
	check("SessionInfo", reflect.TypeFor[toolapi.SessionInfo]())
}

func TestTaskInfoShape(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{
		"available", "available[].host", "available[].id", "available[].local_path", "available[].path", "available[].primary", "available[].provider",
		"available[].remote_url",
		"description", "generation",
		"orientation", "orientation[].message", "orientation[].provider", "orientation[].state", "orientation[].tool",
		"providers", "repositories", "repositories[].host", "repositories[].id", "repositories[].local_path",
		"repositories[].path", "repositories[].primary", "repositories[].provider", "repositories[].remote_url",
		"task_id", "title", "workspace_id",
	}, properties(t, toolapi.OutputSchema[toolapi.TaskInfo]()))
}

// TestExternalNames: 1 to 64 letters, digits, '_' or '-'.
func TestExternalNames(t *testing.T) {
	for _, ok := range []string{"a", "docs__search", "A-b_9", strings.Repeat("x", 64)} {
		assert.NoError(t, toolapi.CheckExternalName(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("x", 65), "a b", "a.b", "naïve", "a\n"} {
		assert.Error(t, toolapi.CheckExternalName(bad), "%q", bad)
	}
}

// TestResultTooLargeSaysWhatToDo: the refusal names the tool, the size and
// the limit, and tells the agent to ask for less; the bound is well under
// the 4 MiB an agentctl link carries in one message.
func TestResultTooLargeSaysWhatToDo(t *testing.T) {
	t.Parallel()
	msg := toolapi.ResultTooLarge("github_pr_comments", 5245348, false)
	assert.Equal(t, "the result of github_pr_comments is 5245348 bytes; the limit for one result is 2097152 bytes, so it was not returned: "+
		"ask for less (a narrower query or filter, fewer items or a smaller page, one repository or file at a time) and call again", msg)
	assert.Contains(t, toolapi.ResultTooLarge("docs__search", 3<<20, true), "is more than 3145728 bytes; the limit for one result is 2097152 bytes")
	assert.LessOrEqual(t, toolapi.MaxResultBytes, (4<<20)/2, "room for the envelope under the link's 4 MiB")
	var err error = &toolapi.ResultTooLargeError{Bytes: 15 << 20}
	assert.EqualError(t, err, "the answer is 15728640 bytes")
}
