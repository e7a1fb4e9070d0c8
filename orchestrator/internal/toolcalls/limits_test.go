package toolcalls

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// TestOversizedArgumentsAreRefused: the orchestrator checks the argument
// bound again (a call need not come through a current agentctl), before it
// reads anything or reaches a provider.
func TestOversizedArgumentsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := strings.Repeat("x", toolapi.MaxArgumentBytes)
	args, _ := json.Marshal(map[string]any{"repository_id": f.github.ID, "title": "t", "body": body})
	before := f.gh.Requests()
	r := f.callAs(f.session.ID, f.task.ID, "github_pr_create", args)
	assert.True(t, r.IsError)
	assert.Equal(t, toolapi.CodeArgumentsTooLarge, r.Code)
	assert.Contains(t, r.Text, "the limit is 1048576")
	assert.Equal(t, before, f.gh.Requests(), "no request reached the provider")
}

// TestArgumentsAreCheckedAsStrictlyAsAgentctlsSchemas: the orchestrator
// does not rely on agentctl's schema validation. Unknown arguments and
// blank reviewers are refused before any provider request (both were found
// by FuzzToolArguments).
func TestArgumentsAreCheckedAsStrictlyAsAgentctlsSchemas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	created := f.call("github_pr_create", map[string]any{"title": "t", "branch": "fix-login"})
	assert.False(t, created.IsError, "%s: %s", created.Code, created.Text)
	before := f.gh.Requests()
	for _, c := range []struct {
		tool string
		args any
	}{
		{"task_info", map[string]any{"task_id": "task_other"}},
		{"session_info", map[string]any{"x": 1}},
		{"task_inbox", map[string]any{"all": true}},
		{"github_pr_status", map[string]any{"number": 7}},
		{"github_pr_comments", map[string]any{"repository_id": f.github.ID, "page": 2}},
		{"github_pr_automation", map[string]any{"merge": true}},
		{"github_pr_request_reviewers", map[string]any{"reviewers": []any{nil}}},
		{"github_pr_request_reviewers", map[string]any{"reviewers": []string{"carol", "  "}}},
	} {
		r := f.call(c.tool, c.args)
		assert.True(t, r.IsError, "%s %v: %s", c.tool, c.args, r.Text)
		assert.Equal(t, CodeInvalidArguments, r.Code, "%s %v: %s", c.tool, c.args, r.Text)
	}
	assert.Equal(t, before, f.gh.Requests(), "no refused call reached the provider")
}
