package forge_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// TestEchoedCredentialsNeverReachAnError: providers echo the credential
// header in every error body; no method's *Error carries the credential
// (whole, base64 or a 12-byte piece), whatever its shape — a GitHub token,
// a GitLab legacy token without a prefix. Control: the bodies held it.
func TestEchoedCredentialsNeverReachAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		ghToken = "ghp_EchoedByAProxy0123456789abcdefghijkl"
		legacy  = "Kq2Wm9Xr4Tz7Lp3Vn8Bc" // 20 characters, no prefix
	)
	gh := forgetest.NewGitHub(t, ghToken, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")
	gl := forgetest.NewGitLab(t, legacy, "gl-bot")
	gl.AddProject("acme/web", "main", "fix-login")
	gh.EchoCredentials(true)
	gl.EchoCredentials(true)

	var messages []string
	for _, p := range []struct {
		provider providers.Provider
		url      string
		token    string
		repo     string
	}{{providers.GitHub, gh.URL, ghToken, "acme/api"}, {providers.GitLab, gl.URL, legacy, "acme/web"}} {
		c, err := forge.New(p.provider, p.url, p.token, nil)
		require.NoError(t, err)
		repo := forge.Repo{Path: p.repo}
		missing := forge.Repo{Path: "acme/missing"}
		for name, call := range map[string]func() error{
			"create": func() error {
				_, err := c.Create(ctx, repo, forge.CreateInput{Branch: "no-such-branch", Title: "x"})
				return err
			},
			"status":    func() error { _, err := c.Status(ctx, repo, 99); return err },
			"comments":  func() error { _, err := c.Comments(ctx, missing, 1); return err },
			"reply":     func() error { _, err := c.Reply(ctx, repo, 99, "123", "x"); return err },
			"reviewers": func() error { _, err := c.RequestReviewers(ctx, repo, 99, []string{"erin"}); return err },
			"observe":   func() error { _, err := c.Observe(ctx, repo, 99); return err },
			"merge":     func() error { return c.Merge(ctx, repo, 99) },
		} {
			err := call()
			var fe *forge.Error
			require.True(t, errors.As(err, &fe), "%s %s: %v", p.provider, name, err)
			messages = append(messages, fe.Message)
		}
	}
	scanner := testutil.NewLeakScanner(map[string]string{"github token": ghToken, "gitlab legacy token": legacy})
	echoed := scanner.Find([]byte(strings.Join(append(gh.Echoed(), gl.Echoed()...), "\n")))
	assert.Contains(t, echoed, "github token", "control: GitHub echoed it")
	assert.Contains(t, echoed, "gitlab legacy token", "control: GitLab echoed it")
	for _, m := range messages {
		assert.Empty(t, scanner.Find([]byte(m)), m)
	}
	assert.Contains(t, strings.Join(messages, "\n"), "[redacted]", "the messages keep their sense")
}
