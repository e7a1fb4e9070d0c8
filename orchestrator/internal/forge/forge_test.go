package forge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

const token = "test-token-7c1e"

func code(err error) string {
	var fe *forge.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := forgetest.NewGitHub(t, token, "octo-bot")
	fake.AddRepo("acme/api", "main", "fix-login")
	c, err := forge.New(providers.GitHub, fake.URL, token, nil)
	require.NoError(t, err)
	repo := forge.Repo{Path: "acme/api"}

	user, err := c.CurrentUser(ctx)
	require.NoError(t, err)
	assert.Equal(t, "octo-bot", user)

	pr, err := c.Create(ctx, repo, forge.CreateInput{Branch: "fix-login", Title: "Fix login", Body: "Closes #1", Draft: true})
	require.NoError(t, err)
	assert.Equal(t, int64(1), pr.Number)
	assert.Equal(t, "main", pr.Target, "the default branch when base is omitted")
	assert.True(t, pr.Draft)
	_, err = c.Create(ctx, repo, forge.CreateInput{Branch: "no-such-branch", Base: "main", Title: "x"})
	assert.Equal(t, forge.CodeInvalid, code(err))
	assert.Contains(t, err.Error(), "head invalid")

	fake.Update("acme/api", 1, func(p *forgetest.GitHubPull) {
		p.Checks = [][3]string{{"build", "completed", "success"}, {"lint", "completed", "success"}, {"e2e", "in_progress", ""}}
		p.Reviews = [][2]string{{"alice", "COMMENTED"}, {"alice", "APPROVED"}, {"bob", "APPROVED"}}
		p.Mergeable = "blocked"
	})
	first := fake.AddComment("acme/api", 1, "alice", "nit: rename", "login.go", 12)
	for i := range 4 {
		fake.AddComment("acme/api", 1, "bob", "comment", "auth.go", i)
	}
	fake.Resolve("acme/api", 1, first)

	st, err := c.Status(ctx, repo, 1)
	require.NoError(t, err)
	assert.Equal(t, "pending", st.Checks)
	assert.Len(t, st.CheckRuns, 3, "all pages of check runs")
	assert.True(t, st.Approved)
	assert.Equal(t, "blocked", st.Mergeable)
	assert.Equal(t, 4, st.UnresolvedThreads, "five threads, one resolved")

	comments, err := c.Comments(ctx, repo, 1)
	require.NoError(t, err)
	assert.Len(t, comments, 5, "every page of comments (the fake serves two per page)")
	reply, err := c.Reply(ctx, repo, 1, comments[0].ThreadID, "renamed")
	require.NoError(t, err)
	assert.Equal(t, comments[0].ThreadID, reply.ThreadID)
	assert.Equal(t, "octo-bot", reply.Author)

	reviewers, err := c.RequestReviewers(ctx, repo, 1, []string{"carol", "dave"})
	require.NoError(t, err)
	assert.Equal(t, []string{"carol", "dave"}, reviewers)
	_, err = c.RequestReviewers(ctx, repo, 1, []string{"octo-bot"})
	assert.Equal(t, forge.CodeInvalid, code(err), "GitHub refuses a review from the author")

	fake.Update("acme/api", 1, func(p *forgetest.GitHubPull) { p.Checks[2] = [3]string{"e2e", "completed", "failure"} })
	st, err = c.Status(ctx, repo, 1)
	require.NoError(t, err)
	assert.Equal(t, "failing", st.Checks)
}

func TestGitLab(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := forgetest.NewGitLab(t, token, "gl-bot")
	fake.AddProject("acme/platform/web", "main", "fix-login")
	fake.AddUser("erin")
	c, err := forge.New(providers.GitLab, fake.URL, token, nil)
	require.NoError(t, err)
	repo := forge.Repo{Path: "acme/platform/web"}

	user, err := c.CurrentUser(ctx)
	require.NoError(t, err)
	assert.Equal(t, "gl-bot", user)

	mr, err := c.Create(ctx, repo, forge.CreateInput{Branch: "fix-login", Title: "Fix login", Draft: true})
	require.NoError(t, err)
	assert.Equal(t, int64(1), mr.Number)
	assert.Equal(t, "main", mr.Target)
	assert.True(t, mr.Draft)
	assert.Equal(t, "open", mr.State)

	fake.Update("acme/platform/web", 1, func(m *forgetest.GitLabMR) {
		m.Pipeline, m.ApprovedBy, m.MergeStatus = "failed", []string{"frank"}, "ci_must_pass"
	})
	first := fake.AddDiscussion("acme/platform/web", 1, "frank", "use a constant", "login.go", 7)
	for range 3 {
		fake.AddDiscussion("acme/platform/web", 1, "frank", "and here", "auth.go", 1)
	}
	fake.ResolveDiscussion("acme/platform/web", 1, first)

	st, err := c.Status(ctx, repo, 1)
	require.NoError(t, err)
	assert.Equal(t, "failing", st.Checks)
	assert.True(t, st.Approved)
	assert.Equal(t, "ci_must_pass", st.Mergeable)
	assert.Equal(t, 3, st.UnresolvedThreads, "four discussions over two pages, one resolved")

	comments, err := c.Comments(ctx, repo, 1)
	require.NoError(t, err)
	assert.Len(t, comments, 4)
	reply, err := c.Reply(ctx, repo, 1, comments[1].ThreadID, "done")
	require.NoError(t, err)
	assert.Equal(t, comments[1].ThreadID, reply.ThreadID)

	reviewers, err := c.RequestReviewers(ctx, repo, 1, []string{"erin"})
	require.NoError(t, err)
	assert.Equal(t, []string{"erin"}, reviewers)
	_, err = c.RequestReviewers(ctx, repo, 1, []string{"nobody"})
	assert.Equal(t, forge.CodeNotFound, code(err))
}

// TestErrorsBecomeStableCodes: provider answers map to codes an agent can
// act on, a rate limit carries its retry-after, and the Limiter keeps the
// connection quiet until then.
func TestErrorsBecomeStableCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gh := forgetest.NewGitHub(t, token, "octo-bot")
	gh.AddRepo("acme/api", "main")
	gl := forgetest.NewGitLab(t, token, "gl-bot")
	gl.AddProject("acme/web", "main")

	for _, tc := range []struct {
		name   string
		client func(tok string) forge.Client
		fail   func(status, retry int)
		repo   forge.Repo
	}{
		{"github", func(tok string) forge.Client { c, _ := forge.New(providers.GitHub, gh.URL, tok, nil); return c },
			func(s, r int) { gh.FailNext("GET", "/pulls/1", s, r) }, forge.Repo{Path: "acme/api"}},
		{"gitlab", func(tok string) forge.Client { c, _ := forge.New(providers.GitLab, gl.URL, tok, nil); return c },
			func(s, r int) { gl.FailNext("GET", "/merge_requests/1", s, r) }, forge.Repo{Path: "acme/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client("wrong-token").CurrentUser(ctx)
			assert.Equal(t, forge.CodeUnauthorized, code(err))
			c := tc.client(token)
			_, err = c.Status(ctx, forge.Repo{Path: "acme/nothing"}, 1)
			assert.Equal(t, forge.CodeNotFound, code(err))
			for status, want := range map[int]string{403: forge.CodeForbidden, 422: forge.CodeInvalid, 503: forge.CodeUnavailable, 500: forge.CodeUnavailable} {
				tc.fail(status, 0)
				_, err = c.Status(ctx, tc.repo, 1)
				assert.Equal(t, want, code(err), "status %d", status)
			}
			tc.fail(429, 7)
			_, err = c.Status(ctx, tc.repo, 1)
			var fe *forge.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, forge.CodeRateLimited, fe.Code)
			assert.Equal(t, 7*time.Second, fe.RetryAfter)
			assert.Contains(t, fe.Message, "retry after 7s")

			l := forge.NewLimiter(forge.LimiterOptions{})
			_, blocked := l.Blocked("conn")
			assert.False(t, blocked)
			l.Observe("conn", err)
			wait, blocked := l.Blocked("conn")
			assert.True(t, blocked)
			assert.InDelta(t, 7*time.Second, wait, float64(time.Second))
		})
	}
}

// TestLimiterBoundsCallsInFlight: places are per connection; a call
// beyond the places and the queue is refused at once with a retry hint; a
// queued call takes the first place released, or ends with its context.
func TestLimiterBoundsCallsInFlight(t *testing.T) {
	t.Parallel()
	l := forge.NewLimiter(forge.LimiterOptions{MaxConcurrent: 1, MaxQueued: 1})
	ctx := context.Background()
	first, err := l.Acquire(ctx, "ws/github", "github")
	require.NoError(t, err)
	other, err := l.Acquire(ctx, "ws/gitlab", "gitlab")
	require.NoError(t, err, "another connection has its own places")
	other()

	queued := make(chan error, 1)
	go func() {
		for {
			release, err := l.Acquire(ctx, "ws/github", "github")
			var fe *forge.Error
			if errors.As(err, &fe) {
				continue // the probe below held the queue's place for a moment
			}
			if err == nil {
				release()
			}
			queued <- err
			return
		}
	}()
	// A probe whose context has ended waits nowhere: it is refused if the
	// queue is full, else it ends with its context.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	var fe *forge.Error
	require.Eventually(t, func() bool {
		_, err := l.Acquire(ended, "ws/github", "github")
		return errors.As(err, &fe)
	}, 2*time.Minute, time.Millisecond, "the queue fills")
	assert.Equal(t, forge.CodeRateLimited, fe.Code)
	assert.Equal(t, time.Second, fe.RetryAfter)
	assert.Contains(t, fe.Message, "1 github calls are already in flight on this workspace's connection and 1 are waiting")
	first()
	require.NoError(t, <-queued, "the queued call took the released place")

	hold, err := l.Acquire(ctx, "ws/github", "github")
	require.NoError(t, err)
	defer hold()
	_, err = l.Acquire(ended, "ws/github", "github")
	assert.ErrorIs(t, err, context.Canceled)
}

// TestCloneOfComesFromTheConnection: the clone URL is the connection's
// instance's, whatever the API's root; the key names host and path.
func TestCloneOfComesFromTheConnection(t *testing.T) {
	for _, c := range []struct{ api, path, key, url string }{
		{"https://api.github.com", "acme/api", "github.com/acme/api", "https://github.com/acme/api.git"},
		{"https://ghe.example.com/api/v3/", "acme/api", "ghe.example.com/acme/api", "https://ghe.example.com/acme/api.git"},
		{"https://gitlab.com/api/v4", "group/sub/proj", "gitlab.com/group/sub/proj", "https://gitlab.com/group/sub/proj.git"},
		{"http://127.0.0.1:8080/api/v4", "acme/api", "127.0.0.1-8080/acme/api", "http://127.0.0.1:8080/acme/api.git"},
	} {
		got, err := forge.CloneOf(c.api, c.path)
		require.NoError(t, err, c.api)
		assert.Equal(t, forge.Clone{Key: c.key, URL: c.url}, got, c.api)
	}
	for _, bad := range []string{"", "ssh://github.com", "https://user:pw@github.com", "github.com"} {
		_, err := forge.CloneOf(bad, "acme/api")
		assert.Error(t, err, bad)
	}
}
