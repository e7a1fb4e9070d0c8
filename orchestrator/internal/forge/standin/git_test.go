package standin

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRepositoriesAreServedOverGit: each stand-in serves its seeded
// repositories through the real git http-backend, to the real git, only
// with its token; a pushed branch is then one its API knows.
func TestRepositoriesAreServedOverGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (.ci/run installs it): %v", err)
	}
	type host struct {
		seed   func(path string) (string, error)
		url    func(path string) string
		head   func(path, branch string) (string, bool)
		user   string
		knows  func(path, branch string) bool
		closer func()
		root   func() string
	}
	gh := NewGitHub("gh-token", "octo")
	gl := NewGitLab("gl-token", "tanuki")
	hosts := map[string]host{
		"github": {
			seed: func(p string) (string, error) {
				return gh.SeedRepo(p, map[string]string{"README.md": "hello\n"}, "main")
			},
			url: gh.GitURL, head: gh.Head, user: "x-access-token",
			knows:  func(p, b string) bool { gh.mu.Lock(); defer gh.mu.Unlock(); return gh.repos[p].branches[b] },
			closer: gh.Close, root: func() string { return gh.git.Root() },
		},
		"gitlab": {
			seed: func(p string) (string, error) {
				return gl.SeedProject(p, map[string]string{"README.md": "hello\n"}, "main")
			},
			url: gl.GitURL, head: gl.Head, user: "oauth2",
			knows:  func(p, b string) bool { gl.mu.Lock(); defer gl.mu.Unlock(); return gl.projects[p].branches[b] },
			closer: gl.Close, root: func() string { return gl.git.Root() },
		},
	}
	tokens := map[string]string{"github": "gh-token", "gitlab": "gl-token"}
	for name, h := range hosts {
		t.Run(name, func(t *testing.T) {
			commit, err := h.seed("acme/api")
			require.NoError(t, err)
			head, ok := h.head("acme/api", "main")
			require.True(t, ok)
			assert.Equal(t, commit, head)

			home := t.TempDir()
			run := func(dir, token string, args ...string) (string, error) {
				if token != "" {
					auth := base64.StdEncoding.EncodeToString([]byte(h.user + ":" + token))
					args = append([]string{"-c", "http.extraHeader=Authorization: Basic " + auth}, args...)
				}
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
					"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@localhost", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@localhost"}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			work := t.TempDir()
			out, err := run(work, "", "clone", "-q", h.url("acme/api"), "anonymous")
			require.Error(t, err, "a clone without the token is refused: %s", out)
			out, err = run(work, "wrong", "clone", "-q", h.url("acme/api"), "wrong")
			require.Error(t, err, "a clone with another token is refused: %s", out)
			out, err = run(work, tokens[name], "clone", "-q", h.url("acme/nothing"), "nothing")
			require.Error(t, err, "an unknown repository: %s", out)

			out, err = run(work, tokens[name], "clone", "-q", h.url("acme/api"), "api")
			require.NoError(t, err, out)
			checkout := filepath.Join(work, "api")
			body, err := os.ReadFile(filepath.Join(checkout, "README.md"))
			require.NoError(t, err)
			assert.Equal(t, "hello\n", string(body))

			require.NoError(t, os.WriteFile(filepath.Join(checkout, "fix.go"), []byte("package api\n"), 0o644))
			_, err = run(checkout, "", "add", "fix.go")
			require.NoError(t, err)
			_, err = run(checkout, "", "commit", "-q", "-m", "fix")
			require.NoError(t, err)
			out, err = run(checkout, "wrong", "push", "-q", "origin", "HEAD:refs/heads/feature")
			require.Error(t, err, "a push with another token is refused: %s", out)
			assert.False(t, h.knows("acme/api", "feature"))
			out, err = run(checkout, tokens[name], "push", "-q", "origin", "HEAD:refs/heads/feature")
			require.NoError(t, err, out)
			pushed, err := run(checkout, "", "rev-parse", "HEAD")
			require.NoError(t, err)
			got, ok := h.head("acme/api", "feature")
			require.True(t, ok, "the pushed branch is in the repository")
			assert.Equal(t, strings.TrimSpace(pushed), got)
			assert.True(t, h.knows("acme/api", "feature"), "the API knows the pushed branch")

			h.closer()
			_, err = os.Stat(h.root())
			assert.True(t, os.IsNotExist(err), "Close removes the repositories: %v", err)
		})
	}
}
