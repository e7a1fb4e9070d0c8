// Package agentuid is the range of uids agents run under, one per live
// session, so that an agent can read neither agentctl's secret and /proc
// entries nor another session's files and processes (ADR 0011).
// agentctl takes it as --agent-uids FIRST-LAST; the local and docker
// executors pass one when the orchestrator runs as root.
package agentuid

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/toolscope/toolscope/internal/procs"
)

// Range is the uids agentctl runs agents under, one per live session
// (`agentctl serve --agent-uids FIRST-LAST`). agentctl must run as root to
// use it. Each session's agent then runs under a uid of its own, never
// agentctl's: it cannot read agentctl's secret, its /proc entries
// (environ, mem, fds), nor another session's files or processes. The zero
// value is no range: the agent runs under agentctl's own uid.
type Range struct{ First, Last uint32 }

// Set reports whether r names any uid.
func (r Range) Set() bool { return r.First != 0 }

// Size is the number of uids in r.
func (r Range) Size() int {
	if !r.Set() {
		return 0
	}
	return int(r.Last-r.First) + 1
}

func (r Range) String() string {
	if !r.Set() {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Parse parses "FIRST-LAST" or a single uid. Root (0) is never
// an agent's uid.
func Parse(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Range{}, nil
	}
	first, last, found := strings.Cut(s, "-")
	if !found {
		last = first
	}
	f, err1 := strconv.ParseUint(strings.TrimSpace(first), 10, 32)
	l, err2 := strconv.ParseUint(strings.TrimSpace(last), 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return Range{}, fmt.Errorf("--agent-uids %q: use FIRST-LAST, e.g. 100000-100999", s)
	case f == 0:
		return Range{}, fmt.Errorf("--agent-uids %q: uid 0 is root; agents never run as root", s)
	case l < f:
		return Range{}, fmt.Errorf("--agent-uids %q: the last uid is below the first", s)
	case l >= 1<<31-1:
		return Range{}, fmt.Errorf("--agent-uids %q: uids must stay below 2147483647", s)
	}
	return Range{First: uint32(f), Last: uint32(l)}, nil
}

// Default is the range the local and docker executors use when the
// orchestrator runs as root: far above the uids distributions hand out to
// people (1000+) and to rootless containers (100000+ in /etc/subuid).
var Default = Range{First: 1_500_000_000, Last: 1_500_065_535}

// Single is the range of one uid.
func Single(uid uint32) Range { return Range{First: uid, Last: uid} }

// Kill ends every process running under uid (never root's): whatever an
// agent left behind — a daemonized child outside its process group, or an
// agent whose agentctl died — must not outlive its session, nor meet the
// next session given the uid.
func Kill(uid uint32) {
	if uid == 0 {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name()), &st) == nil && st.Uid == uid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Claims are host-wide: every orchestrator and agentctl on a host that
// picks agent uids from a range records the uid it holds as a file in
// ClaimDir, created exclusively, so two of them never give one uid to two
// sessions. A claim whose holder is gone (its pid is dead and no process
// runs under the uid) is stale and taken over.
var ClaimDir = filepath.Join(os.TempDir(), "toolscope-agent-uids")

// Claim takes a uid of r no one on the host holds, trying from a
// pseudo-random offset start, and records pid (the agentctl that will run
// under it, or the caller until then) as its holder.
func Claim(r Range, start uint32) (uint32, error) {
	size := uint32(r.Size())
	for i := range size {
		uid := r.First + (start+i)%size
		path := claimPath(uid)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			// No claims yet, or the last Release removed the directory.
			if err := os.MkdirAll(ClaimDir, 0o700); err != nil {
				return 0, fmt.Errorf("agent uid claims: %w", err)
			}
			f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		}
		if os.IsExist(err) {
			if !stale(path, uid) {
				continue
			}
			_ = os.Remove(path)
			f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		}
		if err != nil {
			continue // another claimer won the race
		}
		_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
		_ = f.Close()
		return uid, nil
	}
	return 0, fmt.Errorf("every uid of the agent range %s is held on this host", r)
}

// Hold records pid as the holder of uid's claim (the agentctl running
// under it outlives the orchestrator that claimed it).
func Hold(uid uint32, pid int) {
	_ = os.WriteFile(claimPath(uid), []byte(strconv.Itoa(pid)+"\n"), 0o600)
}

// Release gives uid's claim back, and removes the directory of claims
// when it was the last.
func Release(uid uint32) {
	_ = os.Remove(claimPath(uid))
	_ = os.Remove(ClaimDir) // fails while it holds claims
}

func claimPath(uid uint32) string {
	return filepath.Join(ClaimDir, strconv.FormatUint(uint64(uid), 10))
}

// stale reports a claim whose holder is gone and under whose uid nothing
// runs.
func stale(path string, uid uint32) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && procs.Alive(pid) {
		return false
	}
	return !running(uid)
}

// running reports whether a process runs under uid.
func running(uid uint32) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name()), &st) == nil && st.Uid == uid {
			return true
		}
	}
	return false
}
