package toolcalls

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
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
		assert.Equal(t, toolapi.CodeInvalidArguments, r.Code, "%s %v: %s", c.tool, c.args, r.Text)
	}
	assert.Equal(t, before, f.gh.Requests(), "no refused call reached the provider")
}

// TestFreeTextArgumentsAreBounded: the free text an agent sends a
// provider (titles, branches, bodies, replies, usernames) is refused over
// its limit (package textlimit) or with a control character, with
// invalid_arguments naming the field, before any provider request.
func TestFreeTextArgumentsAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	created := f.call("github_pr_create", map[string]any{"title": "t", "branch": "fix-login"})
	require.False(t, created.IsError, "%s: %s", created.Code, created.Text)
	before, beforeGL := f.gh.Requests(), f.gl.Requests()
	long := strings.Repeat("b", textlimit.Text.Max+1)
	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"gitlab_mr_create", map[string]any{"title": "fix \x1b[31mlogin", "branch": "fix-login"}, "title"},
		{"gitlab_mr_create", map[string]any{"title": strings.Repeat("t", textlimit.Title.Max+1), "branch": "fix-login"}, "title"},
		{"gitlab_mr_create", map[string]any{"title": "t", "branch": "fix\x00login"}, "branch"},
		{"gitlab_mr_create", map[string]any{"title": "t", "branch": "fix-login", "base": "main\n"}, "base"},
		{"gitlab_mr_create", map[string]any{"title": "t", "branch": "fix-login", "body": long}, "body"},
		{"gitlab_mr_create", map[string]any{"title": "t", "branch": "fix-login", "body": "ok\x07"}, "body"},
		{"github_pr_reply", map[string]any{"thread_id": "1", "body": long}, "body"},
		{"github_pr_reply", map[string]any{"thread_id": "1\x1b", "body": "done"}, "thread_id"},
		{"github_pr_request_reviewers", map[string]any{"reviewers": []string{"carol", "dave\x00"}}, "reviewers[1]"},
	} {
		r := f.call(c.tool, c.args)
		require.True(t, r.IsError, "%s %v: %s", c.tool, c.field, r.Text)
		assert.Equal(t, toolapi.CodeInvalidArguments, r.Code, "%s %s: %s", c.tool, c.field, r.Text)
		assert.True(t, strings.HasPrefix(r.Text, "invalid "+c.field+": "), "%s: %s", c.field, r.Text)
	}
	assert.Equal(t, before, f.gh.Requests(), "no refused call reached GitHub")
	assert.Equal(t, beforeGL, f.gl.Requests(), "no refused call reached GitLab")
	ok := f.call("gitlab_mr_create", map[string]any{"title": "t", "branch": "fix-login", "body": long[1:]})
	assert.False(t, ok.IsError, "a body at the limit is sent: %s: %s", ok.Code, ok.Text)
}

// TestProviderCallsPerConnectionAreBounded: one agent's 500 simultaneous
// calls on a slow provider reach it at most MaxConcurrent at a time; the
// next MaxQueued wait for a place and then succeed; the rest are refused
// at once with rate_limited and a retry hint.
func TestProviderCallsPerConnectionAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	created := f.call("github_pr_create", map[string]any{"title": "t", "branch": "fix-login"})
	require.False(t, created.IsError, "%s: %s", created.Code, created.Text)
	limits := forge.DefaultLimiterOptions

	release := f.gh.Hold()
	defer release()
	const calls = 500
	var (
		mu      sync.Mutex
		results []Result
		refused atomic.Int32
		wg      sync.WaitGroup
	)
	for range calls {
		wg.Go(func() {
			r := f.d.Handle(context.Background(), Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "github_pr_status",
				Arguments: json.RawMessage(`{}`), OnLink: true})
			if r.Code == forge.CodeRateLimited {
				refused.Add(1)
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
	}
	want := int32(calls - limits.MaxConcurrent - limits.MaxQueued)
	require.Eventually(t, func() bool {
		now, _ := f.gh.InFlight()
		return refused.Load() == want && now == limits.MaxConcurrent
	}, 2*time.Minute, 5*time.Millisecond, "waiting for %d calls refused and %d at the provider", want, limits.MaxConcurrent)
	release()
	wg.Wait()

	_, peak := f.gh.InFlight()
	ok := 0
	for _, r := range results {
		switch {
		case !r.IsError:
			ok++
		case r.Code == forge.CodeRateLimited:
			assert.Contains(t, r.Text, "retry after 1s")
		default:
			t.Errorf("unexpected result %s: %s", r.Code, r.Text)
		}
	}
	f.results = append(f.results, results...)
	assert.LessOrEqual(t, peak, limits.MaxConcurrent, "requests in flight at the provider at once")
	assert.Equal(t, limits.MaxConcurrent+limits.MaxQueued, ok, "the calls in flight and queued succeed")
	testutil.Figure(t, "limit: provider calls per connection",
		"500 simultaneous calls on a held provider: at most %d at the provider at once, %d queued then answered, %d refused rate_limited (retry after 1s)",
		peak, ok-limits.MaxConcurrent, refused.Load())
}

// TestOversizedResultsAreRefusedAndAudited replays the finding: twenty
// 256 KiB review comments on the task's pull request made one
// github_pr_comments result of over 5 MiB, which ended the agentctl link's
// stream (its limit is 4 MiB a message) and was audited ok. Now a result
// over toolapi.MaxResultBytes, counted as sent, is answered
// result_too_large with the tool, the size and the limit, the audit says
// result_too_large, and what leaves through CallHandler stays within the
// bound; a result under the bound is answered as before.
func TestOversizedResultsAreRefusedAndAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	created := f.call("github_pr_create", map[string]any{"title": "t", "branch": "fix-login"})
	require.False(t, created.IsError, "%s: %s", created.Code, created.Text)
	number := int(structured[toolapi.ChangeRequest](t, created).Number)
	comment := strings.Repeat("review nit ", (256<<10)/len("review nit "))

	// Seven such comments (1.75 MiB): answered.
	for range 7 {
		f.gh.AddComment("acme/api", number, "mallory", comment, "login.go", 3)
	}
	r := f.call("github_pr_comments", map[string]any{})
	require.False(t, r.IsError, "%s: %.300s", r.Code, r.Text)
	out := f.d.result(r)
	assert.Len(t, structured[toolapi.Comments](t, r).Comments, 7)
	assert.LessOrEqual(t, len(out.Text)+len(out.Structured), toolapi.MaxResultBytes)

	// Twenty: refused, and the refusal is what is sent and audited.
	for range 13 {
		f.gh.AddComment("acme/api", number, "mallory", comment, "login.go", 3)
	}
	r = f.call("github_pr_comments", map[string]any{})
	require.True(t, r.IsError)
	assert.Equal(t, toolapi.CodeResultTooLarge, r.Code)
	assert.Nil(t, r.Structured)
	assert.Regexp(t, `^the result of github_pr_comments is 5\d{6} bytes; the limit for one result is 2097152 bytes, so it was not returned: ask for less`, r.Text)
	direct := f.d.CallHandler(ctx, executors.ToolCall{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "github_pr_comments",
		Arguments: json.RawMessage(`{}`), OnLink: true})
	assert.True(t, direct.IsError)
	assert.Equal(t, toolapi.CodeResultTooLarge, direct.Code)
	assert.Empty(t, direct.Structured)
	assert.Less(t, len(direct.Text), 1024, "the refusal is small: %s", direct.Text)

	events, err := f.st.Events(ctx, f.task.ID, 0, 1000)
	require.NoError(t, err)
	var outcomes []string
	for _, e := range events {
		if e.Kind == model.EventToolCalled && strings.HasPrefix(e.Message, "tool=github_pr_comments ") {
			outcomes = append(outcomes, strings.Fields(e.Message)[1])
			assert.Equal(t, []string{f.github.ID}, e.RepositoryIDs, "the target repository is still recorded")
		}
	}
	assert.Equal(t, []string{"outcome=ok", "outcome=result_too_large", "outcome=result_too_large"}, outcomes)
	testutil.Figure(t, "limit: result size", "20 review comments of 256 KiB: github_pr_comments answered %s (%d bytes sent), audited %s; 7 of them (%d bytes) answered",
		direct.Code, len(direct.Text), outcomes[1], len(out.Text)+len(out.Structured))
}
