package standin

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// gitHost serves a stand-in's repositories over git's smart HTTP protocol,
// through the real `git http-backend`, as GitHub and GitLab serve theirs
// next to their APIs: https://host/<owner>/<name>.git. Every request needs
// HTTP basic authentication whose password is the stand-in's token (any
// user name: GitHub takes x-access-token, GitLab oauth2). Pushes are
// taken; after each, heads reports the repository's branches to its
// stand-in, so that a pushed branch is one the API knows.
type gitHost struct {
	token string
	heads func(path string, branches []string) // called after a push

	once sync.Once
	root string // bare repositories: <root>/<path>.git
	err  error
	// mu serializes pushes with the report of their branches.
	mu sync.Mutex
}

// gitPath matches the three requests of the smart HTTP protocol.
var gitPath = regexp.MustCompile(`^/([^/]+/[^/]+)\.git/(info/refs|git-upload-pack|git-receive-pack)$`)

// dir returns the bare repositories' directory, made on first use.
func (h *gitHost) dir() (string, error) {
	h.once.Do(func() { h.root, h.err = os.MkdirTemp("", "toolscope-standin-git-") })
	return h.root, h.err
}

// close removes the repositories.
func (h *gitHost) close() {
	if h.root != "" {
		_ = os.RemoveAll(h.root)
	}
}

// git runs git with a configuration of its own (no user's or system's).
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=stand-in", "GIT_AUTHOR_EMAIL=stand-in@localhost",
		"GIT_COMMITTER_NAME=stand-in", "GIT_COMMITTER_EMAIL=stand-in@localhost"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// seed creates the bare repository path with one commit holding files on
// every branch (the first is HEAD), and returns the commit.
func (h *gitHost) seed(path string, files map[string]string, branches []string) (string, error) {
	root, err := h.dir()
	if err != nil {
		return "", err
	}
	bare := filepath.Join(root, path+".git")
	work, err := os.MkdirTemp(root, "seed-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if _, err := git(root, "init", "-q", "--bare", "-b", branches[0], bare); err != nil {
		return "", err
	}
	if _, err := git(bare, "config", "http.receivepack", "true"); err != nil {
		return "", err
	}
	if _, err := git(work, "init", "-q", "-b", branches[0]); err != nil {
		return "", err
	}
	for name, body := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := git(work, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := git(work, "commit", "-q", "--allow-empty", "-m", "initial commit"); err != nil {
		return "", err
	}
	refs := []string{"push", "-q", bare}
	for _, b := range branches {
		refs = append(refs, "HEAD:refs/heads/"+b)
	}
	if _, err := git(work, refs...); err != nil {
		return "", err
	}
	return git(work, "rev-parse", "HEAD")
}

// Head returns the commit a branch of a seeded repository points at, and
// whether it exists.
func (h *gitHost) head(path, branch string) (string, bool) {
	if h.root == "" {
		return "", false
	}
	sha, err := git(filepath.Join(h.root, path+".git"), "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	return sha, err == nil && sha != ""
}

// handles reports whether r is a request of git's smart HTTP protocol.
func (h *gitHost) handles(r *http.Request) bool { return gitPath.MatchString(r.URL.Path) }

// serve answers a smart HTTP request through git http-backend.
func (h *gitHost) serve(w http.ResponseWriter, r *http.Request) {
	_, pass, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(h.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="stand-in"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	path := gitPath.FindStringSubmatch(r.URL.Path)[1]
	root := h.root
	if root == "" {
		http.NotFound(w, r)
		return
	}
	if _, err := os.Stat(filepath.Join(root, path+".git")); err != nil {
		http.NotFound(w, r)
		return
	}
	push := strings.HasSuffix(r.URL.Path, "/git-receive-pack")
	if push {
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	backend := &cgi.Handler{Path: gitBinary(), Args: []string{"http-backend"}, Root: "/",
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=stand-in", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	backend.ServeHTTP(w, r)
	if push && h.heads != nil {
		out, err := git(filepath.Join(root, path+".git"), "for-each-ref", "--format=%(refname:short)", "refs/heads")
		if err == nil {
			h.heads(path, strings.Fields(out))
		}
	}
}

// gitBinary is git's path, for the CGI handler (which takes no PATH look-up).
func gitBinary() string {
	if p, err := exec.LookPath("git"); err == nil {
		return p
	}
	return "git"
}
