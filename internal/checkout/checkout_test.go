package checkout

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/gittest"
	"github.com/toolscope/toolscope/internal/testutil"
)

const token = "ghs_checkoutTestToken0123456789abcdefABCDEF"

// server is a git server on loopback that takes only token, with
// acme/api seeded (README.md on main and release), and the mirrors.
type server struct {
	host    *gittest.Host
	url     string
	mirrors *Mirrors
	remote  Remote
}

func newServer(t *testing.T) *server {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (.ci/run installs it): %v", err)
	}
	host := gittest.New(token, nil)
	t.Cleanup(host.Close)
	_, err := host.Seed("acme/api", map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"}, "main", "release")
	require.NoError(t, err)
	srv := httptest.NewServer(host)
	t.Cleanup(srv.Close)
	m, err := OpenMirrors(filepath.Join(t.TempDir(), "mirrors"))
	require.NoError(t, err)
	return &server{host: host, url: srv.URL, mirrors: m,
		remote: Remote{URL: srv.URL + "/acme/api.git", User: "x-access-token", Token: token}}
}

// The repository and branch of the delivery tests' checkout.
const key, branch = "github.com/acme/api", "toolscope/t1/s1"

// checkout fetches acme/api's mirror and makes a checkout of it on branch,
// handed to owner.
func (s *server) checkout(t *testing.T, owner *Owner) string {
	t.Helper()
	m, err := s.mirrors.Fetch(context.Background(), key, s.remote)
	require.NoError(t, err)
	dir := filepath.Join(testutil.TraversableDir(t), "api")
	require.NoError(t, Create(context.Background(), m, dir, Options{Branch: branch, Origin: s.remote.URL, Owner: owner}))
	return dir
}

// agent is the uid a checkout is handed to: nobody when the test runs as
// root (as CI does), else nil (this user).
func agent(t *testing.T) *Owner {
	if os.Geteuid() != 0 {
		return nil
	}
	return &Owner{UID: 65534, GID: 65534}
}

// asAgent runs git in dir as the agent would: under its uid, with its own
// identity.
func asAgent(t *testing.T, o *Owner, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@localhost", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@localhost"}
	if o != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.UID), Gid: uint32(o.GID)}}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "agent: git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// writeAsAgent writes a file of the checkout as the agent.
func writeAsAgent(t *testing.T, o *Owner, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	if o != nil {
		require.NoError(t, os.Chown(path, o.UID, o.GID))
	}
}

// TestSessionsShareOneMirror: the first session's fetch clones the
// repository; a second session of it downloads nothing, and its checkout
// shares the mirror's objects (hard links) instead of copying them. Each
// checkout is on its own branch, made from the default branch or the base
// given, and names the provider's URL as origin with no credential.
func TestSessionsShareOneMirror(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	owner := agent(t)
	sessions := testutil.TraversableDir(t)

	m, err := s.mirrors.Fetch(ctx, "github.com/acme/api", s.remote)
	require.NoError(t, err)
	assert.Equal(t, "main", m.Default)
	require.NoError(t, Create(ctx, m, filepath.Join(sessions, "s1", "api"), Options{Branch: "toolscope/t1/s1", Origin: s.remote.URL, Owner: owner}))
	assert.Equal(t, 1, s.host.Fetches("acme/api"))

	m2, err := s.mirrors.Fetch(ctx, "github.com/acme/api", s.remote)
	require.NoError(t, err)
	require.NoError(t, Create(ctx, m2, filepath.Join(sessions, "s2", "api"), Options{Branch: "toolscope/t1/s2", Base: "release", Origin: s.remote.URL, Owner: owner}))
	assert.Equal(t, 1, s.host.Fetches("acme/api"), "a second session of the repository downloaded it again")

	for _, c := range []struct{ dir, branch string }{{"s1", "toolscope/t1/s1"}, {"s2", "toolscope/t1/s2"}} {
		dir := filepath.Join(sessions, c.dir, "api")
		body, err := os.ReadFile(filepath.Join(dir, "README.md"))
		require.NoError(t, err)
		assert.Equal(t, "hello\n", string(body))
		assert.Equal(t, c.branch, asAgent(t, owner, dir, "branch", "--show-current"), "the agent's git sees its own branch")
		assert.Equal(t, s.remote.URL, asAgent(t, owner, dir, "remote", "get-url", "origin"))
		if owner != nil {
			var st syscall.Stat_t
			require.NoError(t, syscall.Stat(dir, &st))
			assert.Equal(t, uint32(owner.UID), st.Uid, "the checkout is the agent's")
		}
		packs, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
		require.NoError(t, err)
		require.NotEmpty(t, packs)
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(packs[0], &st))
		assert.Greater(t, st.Nlink, uint64(1), "the checkout's objects are the mirror's, linked")
		assert.NotEqual(t, uint32(65534), st.Uid, "a linked object file stays the mirror's: the agent cannot change the mirror through it")
	}

	// The agent cannot enter the mirrors.
	info, err := os.Stat(s.mirrors.dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	// Nothing in a checkout holds the credential.
	scan := testutil.NewLeakScanner(map[string]string{"token": token})
	require.NoError(t, filepath.WalkDir(sessions, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		assert.Empty(t, scan.Find(b), "the credential is in %s", p)
		return nil
	}))
}

// TestFetchesAreOnePerRepository: sessions fetching one repository at
// once share one clone, and every one of them gets it whole.
func TestFetchesAreOnePerRepository(t *testing.T) {
	s := newServer(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := s.mirrors.Fetch(context.Background(), "github.com/acme/api", s.remote)
			if err == nil && m.Default != "main" {
				err = errors.New("default branch " + m.Default)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, s.host.Fetches("acme/api"))
}

// TestNothingIsHalfMade: a refused fetch leaves no mirror and names the
// repository, never the token; a checkout from a branch the mirror lacks
// leaves no directory; a checkout is never made over an existing one.
func TestNothingIsHalfMade(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()

	bad := s.remote
	bad.Token = "glpat-wrongWrongWrong0123456789"
	_, err := s.mirrors.Fetch(ctx, "github.com/acme/api", bad)
	require.ErrorIs(t, err, ErrFetch)
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), "github.com/acme/api")
	assert.NotContains(t, err.Error(), bad.Token)
	left, err := os.ReadDir(filepath.Join(s.mirrors.dir, "github.com", "acme"))
	require.NoError(t, err)
	for _, e := range left {
		assert.Equal(t, "api.git.lock", e.Name(), "a refused fetch left %s", e.Name())
	}

	_, err = s.mirrors.Fetch(ctx, "github.com/acme/../etc", s.remote)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	_, err = s.mirrors.Fetch(ctx, "github.com/acme/api", Remote{URL: "ext::sh -c touch% /tmp/x"})
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	withUser := s.remote
	withUser.URL = strings.Replace(s.url, "http://", "http://x:"+token+"@", 1) + "/acme/api.git"
	_, err = s.mirrors.Fetch(ctx, "github.com/acme/api", withUser)
	require.ErrorIs(t, err, errdefs.ErrInvalidArgument)
	assert.NotContains(t, err.Error(), token)

	m, err := s.mirrors.Fetch(ctx, "github.com/acme/api", s.remote)
	require.NoError(t, err)
	parent := t.TempDir()
	err = Create(ctx, m, filepath.Join(parent, "api"), Options{Branch: "toolscope/t1/s1", Base: "no-such-branch"})
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed checkout left something behind")

	require.NoError(t, Create(ctx, m, filepath.Join(parent, "api"), Options{Branch: "toolscope/t1/s1"}))
	require.ErrorIs(t, Create(ctx, m, filepath.Join(parent, "api"), Options{Branch: "toolscope/t1/s1"}), ErrExists)
	require.ErrorIs(t, Create(ctx, m, filepath.Join(parent, "x"), Options{Branch: "-x"}), errdefs.ErrInvalidArgument)
	require.ErrorIs(t, Create(ctx, m, filepath.Join(parent, "x"), Options{Branch: "a..b"}), errdefs.ErrInvalidArgument)
}

// TestDeliveryPushesOnlyTheSessionsBranch: what the agent commits reaches
// the remote's branch through Deliver, and nothing else does: not the
// default branch, not a rewritten history, not another repository's
// objects through a checkout the agent rigged; git's configuration in the
// checkout runs nothing of this process's; the token is in no argument of
// any git this package runs.
func TestDeliveryPushesOnlyTheSessionsBranch(t *testing.T) {
	// A git on the PATH that records each command line, and the
	// environment of each fetch that reads the checkout (its upload-pack,
	// which git finds in its own exec path, inherits it).
	wrap := testutil.TraversableDir(t)
	argv, environ := filepath.Join(wrap, "argv"), filepath.Join(wrap, "environ")
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>" + argv + "\ncase \"$*\" in *--upload-pack=*) env >>" + environ + ";; esac\nexec " + real + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(wrap, "git"), []byte(script), 0o755))
	for _, p := range []string{argv, environ} {
		require.NoError(t, os.WriteFile(p, nil, 0o666))
		require.NoError(t, os.Chmod(p, 0o666))
	}
	t.Setenv("PATH", wrap+":"+os.Getenv("PATH"))

	s := newServer(t)
	ctx := context.Background()
	owner := agent(t)
	dir := s.checkout(t, owner)
	mainBefore, _ := s.host.Head("acme/api", "main")

	// Nothing committed on the branch yet: delivering it pushes the base.
	writeAsAgent(t, owner, filepath.Join(dir, "fix.txt"), "the fix\n")
	asAgent(t, owner, dir, "add", "fix.txt")
	asAgent(t, owner, dir, "commit", "-q", "-m", "fix")
	commit := asAgent(t, owner, dir, "rev-parse", "HEAD")

	d, err := s.mirrors.Deliver(ctx, key, s.remote, dir, branch, owner)
	require.NoError(t, err)
	assert.Equal(t, Delivery{Ref: "refs/heads/" + branch, Commit: commit}, d)
	got, ok := s.host.Head("acme/api", branch)
	require.True(t, ok, "the branch is not on the remote")
	assert.Equal(t, commit, got)

	// Again, unchanged: up to date.
	d, err = s.mirrors.Deliver(ctx, key, s.remote, dir, branch, owner)
	require.NoError(t, err)
	assert.True(t, d.UpToDate)

	// A checkout of the delivered branch made again (the session on
	// another host, or its workspace lost) continues it, whatever base it
	// is given (the task's pull request's branch, opened meanwhile).
	m, err := s.mirrors.Fetch(ctx, key, s.remote)
	require.NoError(t, err)
	again := filepath.Join(testutil.TraversableDir(t), "api")
	require.NoError(t, Create(ctx, m, again, Options{Branch: branch, Base: "main", Origin: s.remote.URL, Owner: owner}))
	assert.Equal(t, commit, asAgent(t, owner, again, "rev-parse", "HEAD"))

	// The default branch is never delivered, whatever the checkout holds.
	asAgent(t, owner, dir, "branch", "-f", "main", "HEAD")
	_, err = s.mirrors.Deliver(ctx, key, s.remote, dir, "main", owner)
	require.ErrorIs(t, err, ErrDefaultBranch)

	// A rewritten history is refused, not forced.
	writeAsAgent(t, owner, filepath.Join(dir, "fix.txt"), "another fix\n")
	asAgent(t, owner, dir, "commit", "-q", "-a", "--amend", "-m", "rewritten")
	_, err = s.mirrors.Deliver(ctx, key, s.remote, dir, branch, owner)
	require.ErrorIs(t, err, ErrNotFastForward)
	got, _ = s.host.Head("acme/api", branch)
	assert.Equal(t, commit, got, "the remote branch was rewritten")

	// A branch the checkout does not have.
	_, err = s.mirrors.Deliver(ctx, key, s.remote, dir, "toolscope/t1/other", owner)
	require.ErrorIs(t, err, ErrNoBranch)

	// The checkout's configuration names programs: none runs as this
	// process's user while delivering.
	asAgent(t, owner, dir, "reset", "-q", "--hard", commit)
	writeAsAgent(t, owner, filepath.Join(dir, "more.txt"), "more\n")
	asAgent(t, owner, dir, "add", "more.txt")
	asAgent(t, owner, dir, "commit", "-q", "-m", "more")
	next := asAgent(t, owner, dir, "rev-parse", "HEAD")
	marks := testutil.TraversableDir(t)
	require.NoError(t, os.Chmod(marks, 0o777))
	marker := filepath.Join(marks, "ran")
	hook := "sh -c 'id -u >>" + marker + "'"
	for _, kv := range [][2]string{{"core.fsmonitor", hook}, {"uploadpack.packObjectsHook", hook}, {"core.sshCommand", hook},
		{"credential.helper", "!" + hook}, {"core.hooksPath", marks}} {
		asAgent(t, owner, dir, "config", kv[0], kv[1])
	}
	for _, h := range []string{"pre-push", "post-update", "pre-upload-pack", "reference-transaction"} {
		require.NoError(t, os.WriteFile(filepath.Join(marks, h), []byte("#!/bin/sh\nid -u >>"+marker+"\n"), 0o755))
	}
	d, err = s.mirrors.Deliver(ctx, key, s.remote, dir, branch, owner)
	require.NoError(t, err)
	assert.Equal(t, next, d.Commit)
	if b, err := os.ReadFile(marker); err == nil {
		assert.NotContains(t, strings.Fields(string(b)), strconv.Itoa(os.Geteuid()), "the checkout's configuration ran a program as this process's user")
	}

	if owner != nil {
		// The agent points its checkout at the mirror of another
		// repository (which it cannot read itself): the delivery reads
		// as the agent, so it gets nothing from there.
		other := filepath.Join(s.mirrors.dir, "github.com", "acme", "api.git")
		require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(dir, "git.old")))
		require.NoError(t, os.Symlink(other, filepath.Join(dir, ".git")))
		_, err = s.mirrors.Deliver(ctx, key, s.remote, dir, "release", owner)
		require.Error(t, err)
		_, onRemote := s.host.Head("acme/api", "release")
		assert.True(t, onRemote)
	}

	mainAfter, _ := s.host.Head("acme/api", "main")
	assert.Equal(t, mainBefore, mainAfter, "the default branch changed")

	lines, err := os.ReadFile(argv)
	require.NoError(t, err)
	require.NotEmpty(t, lines)
	header := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	scan := testutil.NewLeakScanner(map[string]string{"token": token, "header": header})
	assert.Empty(t, scan.Find(lines), "the token is on a git command line")
	env, err := os.ReadFile(environ)
	require.NoError(t, err)
	require.NotEmpty(t, env, "no fetch from the checkout ran through the wrapper")
	assert.Empty(t, scan.Find(env), "the credential is in the environment of the git reading the checkout")
}

// TestWorkIsWhatTheRemoteLacks: a checkout's work is its uncommitted paths
// and the commits of its branch on none of the remote's branches; a
// delivery makes them pushed, work others push to the remote meanwhile
// changes nothing, and what the checkout's configuration makes git run
// runs as the agent, never as this process's user.
func TestWorkIsWhatTheRemoteLacks(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	owner := agent(t)
	dir := s.checkout(t, owner)
	base := asAgent(t, owner, dir, "rev-parse", "HEAD")
	work := func() Work {
		t.Helper()
		w, err := s.mirrors.Work(ctx, key, dir, branch, owner)
		require.NoError(t, err)
		return w
	}
	assert.Equal(t, Work{Head: base}, work())
	assert.False(t, work().Undelivered())

	// A changed file, a new one and a new directory of two files.
	writeAsAgent(t, owner, filepath.Join(dir, "README.md"), "changed\n")
	writeAsAgent(t, owner, filepath.Join(dir, "new.txt"), "new\n")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "pkg"), 0o755))
	if owner != nil {
		require.NoError(t, os.Chown(filepath.Join(dir, "pkg"), owner.UID, owner.GID))
	}
	writeAsAgent(t, owner, filepath.Join(dir, "pkg", "a.go"), "package pkg\n")
	writeAsAgent(t, owner, filepath.Join(dir, "pkg", "b.go"), "package pkg\n")
	assert.Equal(t, Work{Head: base, Uncommitted: 3}, work())
	assert.True(t, work().Undelivered())

	asAgent(t, owner, dir, "add", "-A")
	assert.Equal(t, 3+1, work().Uncommitted, "staged paths are counted one each") // pkg is two files now
	asAgent(t, owner, dir, "commit", "-q", "-m", "one")
	asAgent(t, owner, dir, "commit", "-q", "--allow-empty", "-m", "two")
	head := asAgent(t, owner, dir, "rev-parse", "HEAD")
	assert.Equal(t, Work{Head: head, Unpushed: 2}, work())

	// Someone pushes to the default branch; the mirror sees it, the
	// checkout does not have it: still two.
	bare := s.host.Bare("acme/api")
	tree, err := gittest.Git(bare, "rev-parse", "main^{tree}")
	require.NoError(t, err)
	moved, err := gittest.Git(bare, "commit-tree", tree, "-p", "main", "-m", "someone else's")
	require.NoError(t, err)
	_, err = gittest.Git(bare, "update-ref", "refs/heads/main", moved)
	require.NoError(t, err)
	_, err = s.mirrors.Fetch(ctx, key, s.remote)
	require.NoError(t, err)
	assert.Equal(t, Work{Head: head, Unpushed: 2}, work())

	// Delivered: pushed.
	_, err = s.mirrors.Deliver(ctx, key, s.remote, dir, branch, owner)
	require.NoError(t, err)
	assert.Equal(t, Work{Head: head}, work())

	// The checkout's configuration names a program for git status to run.
	marks := testutil.TraversableDir(t)
	require.NoError(t, os.Chmod(marks, 0o777))
	marker := filepath.Join(marks, "ran")
	asAgent(t, owner, dir, "config", "core.fsmonitor", "sh -c 'id -u >>"+marker+"'")
	assert.Equal(t, Work{Head: head}, work())
	if owner != nil {
		b, err := os.ReadFile(marker)
		require.NoError(t, err, "git status ran no fsmonitor: this test proves nothing")
		assert.NotContains(t, strings.Fields(string(b)), strconv.Itoa(os.Geteuid()), "the checkout's configuration ran a program as this process's user")
	}

	// The branch is gone (the agent renamed it).
	asAgent(t, owner, dir, "branch", "-q", "-m", branch, "mine")
	_, err = s.mirrors.Work(ctx, key, dir, branch, owner)
	require.ErrorIs(t, err, ErrNoBranch)
}
