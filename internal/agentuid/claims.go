package agentuid

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/procs"
)

// Claims are host-wide: every orchestrator on a host that picks agent uids
// from a range records the uid it holds as a file in ClaimDir, created
// exclusively, so two of them never give one uid to two sessions. A claim
// whose holder is gone (its pid is dead and no process runs under the uid)
// is stale and taken over.
//
// Whoever can write into ClaimDir, or put a directory of their own in its
// place, decides which uids are free: they could hand a victim session's
// uid to a second session, whose agent then reads the victim's secrets. So
// ClaimDir lives where no other account can create or replace it —
// /run/toolscope-agent-uids for root, /run being writable by root only —
// and before every use it must be a real directory (not a symbolic link)
// owned by this process's uid, with no permission for group or others,
// under directories that only root or this uid can write to (or sticky
// ones, whose entries others cannot rename or remove). Anything else is
// refused, never used nor repaired. Claims are opened relative to the
// directory checked, O_EXCL|O_NOFOLLOW. The directory is kept once made:
// removing it when the last claim goes would let another account make it
// anew where it can (the temporary directory).
//
// Tests point it elsewhere.
var ClaimDir = defaultClaimDir()

// defaultClaimDir is /run/toolscope-agent-uids for root; without a
// trustworthy /run (or for another uid, which never isolates agents) a
// per-uid directory of the temporary directory, which another account may
// take first: Claim then refuses it, naming it.
func defaultClaimDir() string {
	euid := os.Geteuid()
	if euid == 0 && trustedChain("/run", 0) == nil {
		return "/run/toolscope-agent-uids"
	}
	return filepath.Join(os.TempDir(), "toolscope-agent-uids-"+strconv.Itoa(euid))
}

// held is the uids this process claimed and has not released: its own
// claims are never stale to it, even once their holder (an agentctl it
// started) is gone, since it releases them afterwards — taking one over
// then would let that Release free the new claim.
var held = struct {
	sync.Mutex
	uids map[uint32]bool
}{uids: map[uint32]bool{}}

// Claim takes a uid of r no one on the host holds, trying from a
// pseudo-random offset start, and records the calling process as its
// holder (until Hold names the agentctl that runs under it). It fails with
// errdefs.ErrResourceExhausted when every uid is held, and with
// errdefs.ErrFailedPrecondition when ClaimDir cannot be trusted.
func Claim(r Range, start uint32) (uint32, error) {
	dir, err := openClaims(true)
	if err != nil {
		return 0, err
	}
	defer dir.close()
	if err := dir.lock(); err != nil {
		return 0, err
	}
	size := uint32(r.Size())
	for i := range size {
		uid := r.First + (start+i)%size
		name := claimName(uid)
		f, err := dir.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			if !stale(dir.root, name, uid) {
				continue
			}
			if err := dir.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("agent uid claims: taking over the stale claim %s: %w", filepath.Join(dir.path, name), err)
			}
			f, err = dir.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		}
		if err != nil {
			return 0, fmt.Errorf("agent uid claims: %w", err)
		}
		_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = dir.root.Remove(name)
			return 0, fmt.Errorf("agent uid claims: writing %s: %w", filepath.Join(dir.path, name), err)
		}
		held.Lock()
		held.uids[uid] = true
		held.Unlock()
		return uid, nil
	}
	return 0, fmt.Errorf("every uid of the agent range %s is held on this host (claims in %s): %w", r, dir.path, errdefs.ErrResourceExhausted)
}

// Hold records pid as the holder of uid's claim (the agentctl running
// under it outlives the orchestrator that claimed it). It does nothing
// when ClaimDir cannot be trusted.
func Hold(uid uint32, pid int) {
	dir, err := openClaims(false)
	if err != nil {
		return
	}
	defer dir.close()
	if dir.lock() != nil { // a claimer never reads a claim half written
		return
	}
	f, err := dir.root.OpenFile(claimName(uid), os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = dir.root.OpenFile(claimName(uid), os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	}
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(f, "%d\n", pid)
	_ = f.Close()
}

// Release gives uid's claim back — unless another process took it over
// (it names a live holder other than this process). The directory of
// claims stays.
func Release(uid uint32) {
	held.Lock()
	delete(held.uids, uid)
	held.Unlock()
	dir, err := openClaims(false)
	if err != nil {
		return
	}
	defer dir.close()
	if dir.lock() != nil {
		return
	}
	name := claimName(uid)
	if b, err := dir.root.ReadFile(name); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != os.Getpid() && procs.Alive(pid) {
			return
		}
	}
	_ = dir.root.Remove(name)
}

func claimName(uid uint32) string { return strconv.FormatUint(uint64(uid), 10) }

// stale reports a claim whose holder is gone and under whose uid nothing
// runs, and that this process does not hold.
func stale(root *os.Root, name string, uid uint32) bool {
	held.Lock()
	mine := held.uids[uid]
	held.Unlock()
	if mine {
		return false
	}
	b, err := root.ReadFile(name)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && procs.Alive(pid) {
		return false
	}
	return !running(uid)
}

// claims is ClaimDir, opened once checked: every claim is made, read and
// removed relative to it, never through its path again.
type claims struct {
	path string
	root *os.Root
	f    *os.File // the directory itself, to lock
}

func (c *claims) close() {
	_ = c.f.Close() // drops the lock
	_ = c.root.Close()
}

// lock serializes the claimers of the host: a stale claim is removed and
// made anew by one of them only, and none reads one that Hold is
// rewriting.
func (c *claims) lock() error {
	if err := syscall.Flock(int(c.f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("agent uid claims: locking %s: %w", c.path, err)
	}
	return nil
}

// openClaims opens ClaimDir once it has checked it, and the directories
// above it, as the comment on ClaimDir says; create makes it (mode 0700)
// when it does not exist.
func openClaims(create bool) (*claims, error) {
	path, err := filepath.Abs(ClaimDir)
	if err != nil {
		return nil, fmt.Errorf("agent uid claims: %w", err)
	}
	euid := os.Geteuid()
	parent, name := filepath.Dir(path), filepath.Base(path)
	// The directories above, as named and with symbolic links resolved:
	// none can be renamed or replaced by another account.
	if err := trustedChain(parent, euid); err != nil {
		return nil, refused(path, err, moveIt)
	}
	resolved, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return nil, fmt.Errorf("agent uid claims: %w", err)
	}
	if resolved != parent {
		if err := trustedChain(resolved, euid); err != nil {
			return nil, refused(path, err, moveIt)
		}
	}
	up, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("agent uid claims: %w", err)
	}
	defer up.Close()
	if create {
		if err := up.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("agent uid claims: %w", err)
		}
	}
	fi, err := up.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("agent uid claims: %w", err)
	}
	if err := private(path, fi, euid); err != nil {
		return nil, err
	}
	root, err := up.OpenRoot(name) // O_NOFOLLOW: never a link put there since
	if err != nil {
		return nil, refused(path, err, fmt.Sprintf(removeIt, path))
	}
	f, err := root.Open(".")
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("agent uid claims: %w", err)
	}
	opened, err := f.Stat()
	if err == nil && !os.SameFile(fi, opened) {
		err = refused(path, errors.New("it was replaced while being opened"), fmt.Sprintf(removeIt, path))
	}
	if err == nil {
		err = private(path, opened, euid)
	}
	if err != nil {
		_ = f.Close()
		_ = root.Close()
		return nil, err
	}
	return &claims{path: path, root: root, f: f}, nil
}

// private checks the directory of claims itself: a real directory owned by
// euid, with no permission bit for group or others.
func private(path string, fi fs.FileInfo, euid int) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	var why error
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		why = fmt.Errorf("it is a symbolic link (to %q) owned by %s, not a directory", target, owner(st))
	case !fi.IsDir():
		why = fmt.Errorf("it is not a directory (mode %s, owned by %s)", fi.Mode(), owner(st))
	case st == nil:
		why = errors.New("its owner cannot be read")
	case int(st.Uid) != euid || fi.Mode().Perm()&0o077 != 0:
		why = fmt.Errorf("it is owned by %s with mode %s (%#o), where it must be owned by uid %d (this process) with mode 0700", owner(st), fi.Mode(), fi.Mode().Perm(), euid)
	default:
		return nil
	}
	return refused(path, why, fmt.Sprintf(removeIt, path))
}

// trustedChain checks dir and every directory above it: each is owned by
// root or euid, and no one else may write to it unless it is sticky (others
// cannot then rename or remove what they do not own). A symbolic link on
// the way is as safe as the directory holding it, checked too; where it
// leads is the caller's to check.
func trustedChain(dir string, euid int) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		case !ok:
			return fmt.Errorf("the owner of %s cannot be read", p)
		case st.Uid != 0 && int(st.Uid) != euid,
			fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
			owners := "root"
			if euid != 0 {
				owners = "root or uid " + strconv.Itoa(euid)
			}
			return fmt.Errorf("%s, above it, is owned by %s with mode %s (%#o), where it must be owned by %s and writable by no one else (unless sticky)",
				p, owner(st), fi.Mode(), fi.Mode().Perm(), owners)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// refused is the error of a ClaimDir that is not used: why, and what to
// do about it.
func refused(path string, why error, todo string) error {
	return fmt.Errorf("agent uid claims: refusing the directory of claims %s: %w; no session gets an agent uid until then. %s: %w",
		path, why, todo, errdefs.ErrFailedPrecondition)
}

// The remedies of refused.
const (
	removeIt = "Another local account may have made or changed it to have two sessions share an agent uid: check who did, then remove it (rm -r %s) and let toolscope make it anew"
	moveIt   = "Another account could replace it with a directory of its own, to have two sessions share an agent uid: make the directories above it writable by root (or this uid) only; toolscope run as root keeps its claims in /run/toolscope-agent-uids"
)

// owner names a file's owner: "uid 1000 (alice)".
func owner(st *syscall.Stat_t) string {
	if st == nil {
		return "an unknown owner"
	}
	id := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return "uid " + id + " (" + u.Username + ")"
	}
	return "uid " + id
}
