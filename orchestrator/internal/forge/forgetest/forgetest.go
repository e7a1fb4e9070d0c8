// Package forgetest starts the stand-in GitHub and GitLab servers of
// package standin for a test, stopped when the test ends.
package forgetest

import (
	"testing"

	"github.com/toolscope/toolscope/orchestrator/internal/forge/standin"
)

// The stand-in types, for tests.
type (
	GitHub     = standin.GitHub
	GitHubPull = standin.GitHubPull
	GitLab     = standin.GitLab
	GitLabMR   = standin.GitLabMR
)

// NewGitHub starts a stand-in GitHub for the test.
func NewGitHub(t testing.TB, token, login string) *GitHub {
	t.Helper()
	g := standin.NewGitHub(token, login)
	t.Cleanup(g.Close)
	return g
}

// NewGitLab starts a stand-in GitLab for the test.
func NewGitLab(t testing.TB, token, username string) *GitLab {
	t.Helper()
	g := standin.NewGitLab(token, username)
	t.Cleanup(g.Close)
	return g
}
