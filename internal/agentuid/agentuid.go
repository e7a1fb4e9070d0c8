// Package agentuid is the range of uids agents run under, one per live
// session, so that an agent can read neither agentctl's secret and /proc
// entries nor another session's files and processes (ADR 0011).
// agentctl takes it as --agent-uids FIRST-LAST; the local and docker
// executors pass one when the orchestrator runs as root.
package agentuid

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// End ends what a session's agent leaves under uid (never root's): every
// process running under it — a daemonized child outside its process group,
// or an agent whose agentctl died — and every file or directory it owns at
// the top of the host's shared temporary directories (SharedTemp). None
// must outlive its session, nor meet the next session given the uid: the
// agent's own TMPDIR ends with its session directory, but /tmp stays
// writable to it.
func End(uid uint32) {
	if uid == 0 {
		return
	}
	kill(uid)
	for _, dir := range SharedTemp {
		sweep(dir, uid)
	}
}

// SharedTemp are the directories every uid may write on a Linux host.
var SharedTemp = []string{"/tmp", "/var/tmp", "/dev/shm"}

func kill(uid uint32) {
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

// sweep removes the entries of dir that uid owns (links are removed, never
// followed; a directory of uid's goes with everything in it, whoever made
// it: it was uid's to let in).
func sweep(dir string, uid uint32) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) == nil && st.Uid == uid {
			_ = os.RemoveAll(path)
		}
	}
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
