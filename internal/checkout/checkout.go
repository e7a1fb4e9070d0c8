// Package checkout materializes a task's repositories for a session and
// delivers what the session commits, with the real git and without the
// agent ever holding a credential (issue 31):
//
//   - Mirrors keeps one bare mirror per repository, fetched with the
//     connection's credential, in a directory only the process's user may
//     enter. A second session of a repository fetches what changed, never
//     the whole repository again.
//   - Create makes a session's checkout from a mirror: a clone of the
//     mirror (its objects hard-linked, so an extra session costs its work
//     tree) on the session's own branch, handed to the agent's uid. Its
//     origin names the provider's URL, never a credential.
//   - Deliver pushes the session's branch: the mirror fetches the branch
//     from the checkout, reading it as the agent's uid (git upload-pack
//     under that uid), and pushes it from the mirror to the remote with a
//     credential that lives in that one git process's environment. Never a
//     force-push, never the default branch.
//
// Git never runs as this process's user in a directory the agent writes:
// a repository's configuration can name programs git runs (core.fsmonitor,
// core.hooksPath, filters, credential helpers), its objects can point
// anywhere (alternates), and its .git can be a link. The credential is
// never in an argument, a file or a configuration: it reaches git as an
// HTTP header in the environment of the one process that talks to the
// remote (GIT_CONFIG_COUNT), scoped to the repository's URL.
package checkout

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/toolscope/toolscope/internal/errdefs"
)

var (
	// ErrFetch: the remote refused a fetch or could not be reached.
	ErrFetch = fmt.Errorf("fetching the repository failed: %w", errdefs.ErrUnavailable)
	// ErrPush: the remote refused a push or could not be reached.
	ErrPush = fmt.Errorf("pushing the branch failed: %w", errdefs.ErrUnavailable)
	// ErrNotFastForward: the remote branch has commits the checkout's
	// branch lacks; delivering it would rewrite the remote's history.
	ErrNotFastForward = fmt.Errorf("the remote branch has commits this branch does not (a delivery never force-pushes; build on the remote branch instead): %w", errdefs.ErrFailedPrecondition)
	// ErrDefaultBranch: a session never delivers the default branch.
	ErrDefaultBranch = fmt.Errorf("the repository's default branch is never pushed by a session: %w", errdefs.ErrPermissionDenied)
	// ErrNoBranch: the checkout has no such branch (nothing committed on it).
	ErrNoBranch = fmt.Errorf("the checkout has no such branch: %w", errdefs.ErrFailedPrecondition)
	// ErrExists: Create's directory exists (a checkout is never made over
	// another, which may hold work).
	ErrExists = fmt.Errorf("the checkout's directory exists: %w", errdefs.ErrAlreadyExists)
)

// Remote is where a repository is fetched from and delivered to: its
// clone URL and the credential for the one operation at hand.
type Remote struct {
	// URL is the clone URL: http or https, no user, password, query or
	// fragment.
	URL string
	// User and Token are HTTP basic authentication (GitHub: x-access-token
	// and an installation or personal token; GitLab: oauth2 and a token).
	// The token is a secret: it is never logged, written or put in an
	// argument, and errors never carry it.
	User, Token string
}

// check refuses a URL git would take elsewhere than over HTTP, or one
// that carries a credential of its own.
func (r Remote) check() (*url.URL, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: clone URL %q: want http(s)://host/path, with no user, query or fragment", errdefs.ErrInvalidArgument, redact(r.URL, r.Token))
	}
	return u, nil
}

// Owner is the uid and gid a checkout is handed to: the agent's.
type Owner struct{ UID, GID int }

// other reports whether o is a user other than this process's.
func (o *Owner) other() bool { return o != nil && o.UID != os.Geteuid() }

// Mirrors keeps one bare mirror per repository under its directory.
type Mirrors struct {
	dir string

	mu    sync.Mutex
	locks map[string]chan struct{} // one holder per repository
}

// OpenMirrors returns the mirrors under dir, made 0700 if missing: only
// this process's user may enter it, never an agent.
func OpenMirrors(dir string) (*Mirrors, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return &Mirrors{dir: dir, locks: map[string]chan struct{}{}}, nil
}

// Mirror is a repository's mirror.
type Mirror struct {
	// Path is the bare repository.
	Path string
	// Default is the repository's default branch, as of the first fetch.
	Default string
}

// keyPattern is a repository key: host and path segments of letters,
// digits, '.', '_' and '-', never "." or "..".
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$`)

func (m *Mirrors) path(key string) (string, error) {
	if !keyPattern.MatchString(key) || strings.Contains(key, "..") {
		return "", fmt.Errorf("%w: repository key %q: want host/owner/name", errdefs.ErrInvalidArgument, key)
	}
	return filepath.Join(m.dir, filepath.FromSlash(key)+".git"), nil
}

// lock holds key's mirror for this process until the returned function
// is called, and for other processes through a lock file.
func (m *Mirrors) lock(ctx context.Context, key, mirror string) (func(), error) {
	m.mu.Lock()
	ch, ok := m.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		m.locks[key] = ch
	}
	m.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := os.MkdirAll(filepath.Dir(mirror), 0o700); err != nil {
		<-ch
		return nil, err
	}
	f, err := os.OpenFile(mirror+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		<-ch
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		<-ch
		return nil, err
	}
	return func() { f.Close(); <-ch }, nil
}

// Fetch brings key's mirror up to date with the remote's branches and
// tags, cloning it the first time (into a temporary directory renamed into
// place when whole, so a failed first fetch leaves no mirror).
func (m *Mirrors) Fetch(ctx context.Context, key string, r Remote) (Mirror, error) {
	mirror, err := m.path(key)
	if err != nil {
		return Mirror{}, err
	}
	if _, err := r.check(); err != nil {
		return Mirror{}, err
	}
	unlock, err := m.lock(ctx, key, mirror)
	if err != nil {
		return Mirror{}, err
	}
	defer unlock()
	if _, err := os.Stat(mirror); errors.Is(err, fs.ErrNotExist) {
		tmp, err := os.MkdirTemp(filepath.Dir(mirror), ".clone-")
		if err != nil {
			return Mirror{}, err
		}
		defer os.RemoveAll(tmp)
		if _, err := remoteGit(ctx, filepath.Dir(mirror), r, "clone", "--bare", "--quiet", "--", r.URL, tmp); err != nil {
			return Mirror{}, fmt.Errorf("%s: %w", key, err)
		}
		// The checkouts hard-link the mirror's objects: never prune them.
		if _, err := git(ctx, tmp, nil, "config", "gc.auto", "0"); err != nil {
			return Mirror{}, err
		}
		if err := os.Rename(tmp, mirror); err != nil {
			return Mirror{}, err
		}
	} else if err != nil {
		return Mirror{}, err
	} else if _, err := remoteGit(ctx, mirror, r, "fetch", "--quiet", "--prune", "--no-write-fetch-head", "--", r.URL,
		"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"); err != nil {
		return Mirror{}, fmt.Errorf("%s: %w", key, err)
	}
	return m.describe(ctx, mirror)
}

func (m *Mirrors) describe(ctx context.Context, mirror string) (Mirror, error) {
	head, err := git(ctx, mirror, nil, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		return Mirror{}, err
	}
	return Mirror{Path: mirror, Default: head}, nil
}

// Options say how Create makes a checkout.
type Options struct {
	// Branch is the session's branch, made at Base.
	Branch string
	// Base is the mirror's branch a new Branch starts from (the task's
	// open pull request's branch, say); empty: the default branch. When
	// the mirror has Branch itself (it was delivered before), the
	// checkout continues it whatever Base says.
	Base string
	// Origin is the URL the checkout names as its origin (the provider's
	// clone URL, with no credential: the agent cannot fetch or push with
	// it, and delivers through the tool).
	Origin string
	// Owner is the agent's uid and gid; nil leaves the checkout this
	// process's.
	Owner *Owner
}

// Create makes dir a checkout of mirror on o.Branch, whole or not at all:
// it is made beside dir and renamed into place. A dir that exists is
// refused (ErrExists): it may hold a session's work.
func Create(ctx context.Context, mirror Mirror, dir string, o Options) error {
	if err := checkBranch(o.Branch); err != nil {
		return err
	}
	// The session's branch, if it was delivered before (a checkout made
	// again elsewhere continues it), else Base, else the default branch.
	base := cmp.Or(o.Base, mirror.Default)
	if _, err := git(ctx, mirror.Path, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+o.Branch); err == nil {
		base = o.Branch
	}
	if err := checkBranch(base); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s: %w", dir, ErrExists)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// A path, not a file:// URL: git hard-links the objects (and copies
	// them across file systems).
	if _, err := git(ctx, filepath.Dir(tmp), nil, "clone", "--quiet", "--no-checkout", "--origin", "origin", "--", mirror.Path, tmp); err != nil {
		return err
	}
	if _, err := git(ctx, tmp, nil, "checkout", "--quiet", "--no-track", "-b", o.Branch, "refs/remotes/origin/"+base); err != nil {
		return fmt.Errorf("%w: branch %q of the mirror: %v", errdefs.ErrNotFound, base, err)
	}
	if o.Origin != "" {
		if _, err := git(ctx, tmp, nil, "remote", "set-url", "origin", o.Origin); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if o.Owner != nil {
		if err := HandOver(tmp, *o.Owner); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dir)
}

// HandOver gives the checkout at dir to owner, except the object files
// git hard-linked from the mirror: those stay this process's (read-only to
// everyone, as git makes them), so that the agent can replace them in its
// checkout but never change the mirror's. Create hands a new checkout
// over; a relaunched session's agent may have another uid, and takes its
// kept checkout over with this.
func HandOver(dir string, owner Owner) error {
	objects := filepath.Join(dir, ".git", "objects") + string(filepath.Separator)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasPrefix(p, objects) && ownedByUs(d) {
			return nil // the mirror's (an agent's own commits are handed over)
		}
		return os.Lchown(p, owner.UID, owner.GID)
	})
}

// ownedByUs reports whether d belongs to this process's user.
func ownedByUs(d fs.DirEntry) bool {
	fi, err := d.Info()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// Delivery is what Deliver pushed.
type Delivery struct {
	// Ref is the remote's ref: refs/heads/<branch>.
	Ref string
	// Commit is the commit it points at now.
	Commit string
	// UpToDate: the remote branch was already at Commit.
	UpToDate bool
}

// Deliver pushes branch of the checkout at dir to key's remote: the mirror
// fetches the branch from the checkout (reading it as owner, the agent's
// uid, when that is another user) and pushes it to r without force. The
// default branch is refused; so is a branch whose remote has commits the
// checkout's lacks (ErrNotFastForward). The caller decides which branch
// a session may deliver: its own, never one the agent names.
func (m *Mirrors) Deliver(ctx context.Context, key string, r Remote, dir, branch string, owner *Owner) (Delivery, error) {
	mirror, err := m.path(key)
	if err != nil {
		return Delivery{}, err
	}
	if _, err := r.check(); err != nil {
		return Delivery{}, err
	}
	if err := checkBranch(branch); err != nil {
		return Delivery{}, err
	}
	unlock, err := m.lock(ctx, key, mirror)
	if err != nil {
		return Delivery{}, err
	}
	defer unlock()
	mi, err := m.describe(ctx, mirror)
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: no mirror (fetch it first): %w", key, err)
	}
	if branch == mi.Default {
		return Delivery{}, fmt.Errorf("%s: %q: %w", key, branch, ErrDefaultBranch)
	}
	stage := "refs/toolscope/deliver/" + branch
	uploadPack := "git upload-pack"
	if owner.other() {
		uploadPack = fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups -- git upload-pack", owner.UID, owner.GID)
	}
	// The untrusted side is git upload-pack, which runs no program its
	// repository's configuration names; under the agent's uid it reads
	// only what the agent can. The objects are checked as they arrive.
	if _, err := git(ctx, mirror, nil, "-c", "fetch.fsckObjects=true", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--upload-pack="+uploadPack, "--", dir, "+refs/heads/"+branch+":"+stage); err != nil {
		if strings.Contains(err.Error(), "couldn't find remote ref") {
			return Delivery{}, fmt.Errorf("%s: %q: %w", key, branch, ErrNoBranch)
		}
		return Delivery{}, fmt.Errorf("%s: reading the checkout's branch %q: %w", key, branch, err)
	}
	commit, err := git(ctx, mirror, nil, "rev-parse", "--verify", stage)
	if err != nil {
		return Delivery{}, err
	}
	ref := "refs/heads/" + branch
	out, err := remoteGit(ctx, mirror, r, "push", "--porcelain", "--no-verify", "--", r.URL, stage+":"+ref)
	if err != nil {
		if strings.Contains(out+err.Error(), "non-fast-forward") || strings.Contains(out+err.Error(), "fetch first") {
			return Delivery{}, fmt.Errorf("%s: %q: %w", key, branch, ErrNotFastForward)
		}
		return Delivery{}, fmt.Errorf("%s: %q: %w", key, branch, err)
	}
	// The mirror knows the branch now, for the next checkout of it.
	if _, err := git(ctx, mirror, nil, "update-ref", ref, commit); err != nil {
		return Delivery{}, err
	}
	return Delivery{Ref: ref, Commit: commit, UpToDate: strings.Contains(out, "[up to date]")}, nil
}

// Work is what a checkout holds that its remote does not: what removing
// the checkout would lose.
type Work struct {
	// Head is the commit the session's branch points at.
	Head string
	// Uncommitted is how many paths differ from the branch's last commit:
	// changed, staged, deleted or new (a new directory counts once).
	Uncommitted int
	// Unpushed is how many commits of the branch are on none of the
	// remote's branches, as the mirror last saw them (and as the checkout
	// saw them when made): a delivered commit is pushed.
	Unpushed int
}

// Undelivered reports whether the checkout holds work its remote lacks.
func (w Work) Undelivered() bool { return w.Uncommitted > 0 || w.Unpushed > 0 }

// Work measures branch's work in the checkout at dir, made from key's
// mirror. Git reads the checkout as owner (the agent's uid, when that is
// another user): whatever the checkout's configuration makes git run
// runs as the agent, so the caller measures while the agent's uid is the
// session's, and ends what runs under it after. It reads only the
// mirror's refs, and copies nothing into it.
func (m *Mirrors) Work(ctx context.Context, key, dir, branch string, owner *Owner) (Work, error) {
	mirror, err := m.path(key)
	if err != nil {
		return Work{}, err
	}
	if err := checkBranch(branch); err != nil {
		return Work{}, err
	}
	tips, err := git(ctx, mirror, nil, "for-each-ref", "--format=^%(objectname)", "refs/heads/")
	if err != nil {
		return Work{}, fmt.Errorf("%s: no mirror (fetch it first): %w", key, err)
	}
	var head bytes.Buffer
	if err := agentGit(ctx, dir, owner, "", &head, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}"); err != nil {
		return Work{}, fmt.Errorf("%s: %q: %w", key, branch, ErrNoBranch)
	}
	w := Work{Head: strings.TrimSpace(head.String())}
	// The remote's branches the checkout knows: the mirror's now (a tip
	// the checkout lacks, the remote's newer work, is ignored) and the
	// mirror's when the checkout was made (origin's).
	var count bytes.Buffer
	if err := agentGit(ctx, dir, owner, tips+"\n", &count, "rev-list", "--count", "--ignore-missing", w.Head, "--not", "--remotes=origin", "--stdin"); err != nil {
		return Work{}, fmt.Errorf("%s: counting the unpushed commits of %q: %w", key, branch, err)
	}
	if w.Unpushed, err = strconv.Atoi(strings.TrimSpace(count.String())); err != nil {
		return Work{}, fmt.Errorf("%s: git rev-list --count said %q", key, count.String())
	}
	// Each path is one NUL-terminated entry; the output is counted, not
	// kept (a checkout may have any number of new files).
	var paths nulCounter
	if err := agentGit(ctx, dir, owner, "", &paths, "status", "--porcelain", "-z", "--no-renames", "--untracked-files=normal"); err != nil {
		return Work{}, fmt.Errorf("%s: the uncommitted changes of %q: %w", key, branch, err)
	}
	w.Uncommitted = int(paths)
	return w, nil
}

// nulCounter counts the NUL bytes written to it.
type nulCounter int

func (c *nulCounter) Write(p []byte) (int, error) {
	*c += nulCounter(bytes.Count(p, []byte{0}))
	return len(p), nil
}

// agentGit runs git in dir, a directory the agent writes, as owner (this
// process's user if nil): with baseEnv, taking no optional locks, stdin
// as its input and stdout its output; an error carries its last lines of
// standard error.
func agentGit(ctx context.Context, dir string, owner *Owner, stdin string, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "GIT_OPTIONAL_LOCKS=0")
	cmd.Stdin = strings.NewReader(stdin)
	var errb tail
	cmd.Stdout, cmd.Stderr = stdout, &errb
	if owner.other() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner.UID), Gid: uint32(owner.GID), Groups: []uint32{}}}
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %v: %s", subcommand(args), err, strings.TrimSpace(string(errb)))
	}
	return nil
}

// tail keeps the last 2 KiB written to it.
type tail []byte

func (t *tail) Write(p []byte) (int, error) {
	*t = append(*t, p...)
	if len(*t) > 2048 {
		*t = append((*t)[:0], (*t)[len(*t)-2048:]...)
	}
	return len(p), nil
}

// checkBranch refuses what is not a branch name git takes.
func checkBranch(b string) error {
	if b == "" || strings.HasPrefix(b, "-") || len(b) > 255 {
		return fmt.Errorf("%w: branch %q", errdefs.ErrInvalidArgument, b)
	}
	cmd := exec.Command("git", "check-ref-format", "refs/heads/"+b)
	cmd.Env = baseEnv()
	if cmd.Run() != nil {
		return fmt.Errorf("%w: branch %q is not a name git takes", errdefs.ErrInvalidArgument, b)
	}
	return nil
}

// baseEnv is git's whole environment: no user's or system's configuration,
// no prompt, no trace, no locale.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=/", "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}
}

// git runs git in dir with baseEnv and extra, and returns its trimmed
// output; an error carries its last lines of standard error.
func git(ctx context.Context, dir string, extra []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 2048 {
			msg = "…" + msg[len(msg)-2048:]
		}
		return strings.TrimSpace(out.String()), fmt.Errorf("git %s: %v: %s", subcommand(args), err, msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// subcommand is the git command args run: the first argument that is not
// an option or an option's value.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c" || args[i] == "-C":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return "git"
}

// remoteGit runs git against r: the credential is an HTTP header for r's
// URL only, in this one process's environment; only r's scheme is allowed
// (no ext::, no file, no redirect elsewhere with it). Its errors wrap
// ErrFetch or ErrPush and never carry the token.
func remoteGit(ctx context.Context, dir string, r Remote, args ...string) (string, error) {
	u, err := r.check()
	if err != nil {
		return "", err
	}
	extra := []string{"GIT_ALLOW_PROTOCOL=" + u.Scheme, "GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=credential.helper", "GIT_CONFIG_VALUE_0=",
		"GIT_CONFIG_KEY_1=http.followRedirects", "GIT_CONFIG_VALUE_1=initial",
		"GIT_CONFIG_KEY_2=http." + r.URL + ".extraHeader"}
	if r.Token != "" {
		extra = append(extra, "GIT_CONFIG_VALUE_2=Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte(r.User+":"+r.Token)))
	} else {
		extra = append(extra, "GIT_CONFIG_VALUE_2=")
	}
	out, err := git(ctx, dir, extra, args...)
	if err != nil {
		sentinel := ErrFetch
		if subcommand(args) == "push" {
			sentinel = ErrPush
		}
		return redact(out, r.Token), fmt.Errorf("%w: %s", sentinel, redact(err.Error(), r.Token))
	}
	return out, nil
}

// redact removes a secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	s = strings.ReplaceAll(s, secret, "[redacted]")
	return strings.ReplaceAll(s, strconv.Quote(secret), "[redacted]")
}
