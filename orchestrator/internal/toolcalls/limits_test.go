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
