// Package gittest serves bare git repositories over git's smart HTTP
// protocol through the real `git http-backend`, behind a token, as GitHub
// and GitLab serve theirs: the git server of the tests (the forge
// stand-ins' and the checkouts'). Only tests and stand-ins use it.
package gittest

import (
	"bytes"
	"compress/gzip"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Host serves repositories at /<owner>/<name>.git. Every request needs
// HTTP basic authentication whose password is the host's token (any user
// name: GitHub takes x-access-token, GitLab oauth2). Pushes are taken;
// after each, the onPush given to New learns the repository's branches, so
// that a stand-in's API knows a pushed branch. The zero Host is not usable.
type Host struct {
	token  string
	onPush func(path string, branches []string)

	once sync.Once
	root string // bare repositories: <root>/<path>.git
	err  error

	// mu serializes pushes with the report of their branches.
	mu      sync.Mutex
	fetches map[string]int // packs served per repository
}

// New returns a host that takes token; onPush may be nil. Its
// repositories live in a temporary directory, made on first use and
// removed by Close.
func New(token string, onPush func(path string, branches []string)) *Host {
	return &Host{token: token, onPush: onPush, fetches: map[string]int{}}
}

// gitPath matches the three requests of the smart HTTP protocol.
var gitPath = regexp.MustCompile(`^/([^/]+/[^/]+)\.git/(info/refs|git-upload-pack|git-receive-pack)$`)

func (h *Host) dir() (string, error) {
	h.once.Do(func() { h.root, h.err = os.MkdirTemp("", "toolscope-gittest-") })
	return h.root, h.err
}

// Root is the directory holding the bare repositories.
func (h *Host) Root() string { root, _ := h.dir(); return root }

// Close removes the repositories.
func (h *Host) Close() {
	if root, err := h.dir(); err == nil {
		_ = os.RemoveAll(root)
	}
}

// Git runs git in dir with a configuration of its own (no user's or
// system's) and returns its trimmed output.
func Git(dir string, args ...string) (string, error) {
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

// Seed creates the bare repository path ("owner/name") with one commit
// holding files on every branch (the first is HEAD, the default branch),
// and returns that commit.
func (h *Host) Seed(path string, files map[string]string, branches ...string) (string, error) {
	if len(branches) == 0 {
		branches = []string{"main"}
	}
	root, err := h.dir()
	if err != nil {
		return "", err
	}
	bare := h.Bare(path)
	work, err := os.MkdirTemp(root, "seed-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if _, err := Git(root, "init", "-q", "--bare", "-b", branches[0], bare); err != nil {
		return "", err
	}
	if _, err := Git(bare, "config", "http.receivepack", "true"); err != nil {
		return "", err
	}
	if _, err := Git(work, "init", "-q", "-b", branches[0]); err != nil {
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
	if _, err := Git(work, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := Git(work, "commit", "-q", "--allow-empty", "-m", "initial commit"); err != nil {
		return "", err
	}
	refs := []string{"push", "-q", bare}
	for _, b := range branches {
		refs = append(refs, "HEAD:refs/heads/"+b)
	}
	if _, err := Git(work, refs...); err != nil {
		return "", err
	}
	return Git(work, "rev-parse", "HEAD")
}

// Bare is the directory of repository path.
func (h *Host) Bare(path string) string { return filepath.Join(h.Root(), path+".git") }

// Head returns the commit a branch of a repository points at, and whether
// it exists.
func (h *Host) Head(path, branch string) (string, bool) {
	sha, err := Git(h.Bare(path), "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	return sha, err == nil && sha != ""
}

// Fetches is the number of packs of path served: fetches that asked for
// objects, not those that only listed refs and found nothing new.
func (h *Host) Fetches(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches[path]
}

// Handles reports whether r is a request of git's smart HTTP protocol.
func (h *Host) Handles(r *http.Request) bool { return gitPath.MatchString(r.URL.Path) }

// ServeHTTP answers a smart HTTP request through git http-backend.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := gitPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	_, pass, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(h.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	path := m[1]
	root, err := h.dir()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := os.Stat(filepath.Join(root, path+".git")); err != nil {
		http.NotFound(w, r)
		return
	}
	push := m[2] == "git-receive-pack"
	if m[2] == "git-upload-pack" && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if wantsPack(r.Header.Get("Content-Encoding"), body) {
			h.mu.Lock()
			h.fetches[path]++
			h.mu.Unlock()
		}
	}
	if push {
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	backend := &cgi.Handler{Path: gitBinary(), Args: []string{"http-backend"}, Root: "/",
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=gittest", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	backend.ServeHTTP(w, r)
	if push && h.onPush != nil {
		out, err := Git(filepath.Join(root, path+".git"), "for-each-ref", "--format=%(refname:short)", "refs/heads")
		if err == nil {
			h.onPush(path, strings.Fields(out))
		}
	}
}

// wantsPack reports whether an upload-pack request asks for objects: in
// protocol v2 a "command=fetch" (not "command=ls-refs"), in v0 any.
func wantsPack(encoding string, body []byte) bool {
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return true
		}
		if body, err = io.ReadAll(zr); err != nil {
			return true
		}
	}
	return bytes.Contains(body, []byte("command=fetch")) || !bytes.Contains(body, []byte("command="))
}

// gitBinary is git's path, for the CGI handler (which takes no PATH look-up).
func gitBinary() string {
	if p, err := exec.LookPath("git"); err == nil {
		return p
	}
	return "git"
}
