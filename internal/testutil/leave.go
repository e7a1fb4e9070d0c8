package testutil

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolscope/toolscope/internal/procs"
)

// LeaveNothingWait is how long LeaveNothing lets the processes a
// package's tests started finish exiting after the last test ends (a
// session stopped in a cleanup may still be shutting down).
const LeaveNothingWait = 10 * time.Second

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// LeaveNothing runs m's tests, then cleanup, and fails the package (a
// nonzero code, with what was left on stderr) if a process the tests
// started is still alive, a temporary build a Binary made is still on
// disk, an agent session directory (SessionsDirPattern) made while they
// ran, by the test process, a descendant of it or a process now dead, is
// still in the temporary directory with no live process naming it, or a container labelled as toolscope's (the docker executor's, or
// LabelTest) that mounts one of the package's builds still exists. Call it from TestMain: os.Exit(testutil.LeaveNothing(m, ...)).
//
// The test process becomes a child subreaper, so a process its tests
// started stays its descendant even when its parent (a server the test
// killed) is gone; a process whose command line names a Binary's build is
// counted too. What is left is killed (removed) after it is reported, so
// a failing package leaves nothing either.
func LeaveNothing(m *testing.M, cleanup ...func()) int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "leave nothing: become a child subreaper: %v\n", errno)
		return 1
	}
	before := sessionDirs(os.TempDir())
	code := m.Run()
	// The builds' directories, known before cleanup removes them: a
	// container that mounts one is this package's.
	mounted := builds.dirs()
	for _, f := range cleanup {
		f()
	}
	if err := checkLeftovers(LeaveNothingWait, before, mounted); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left something behind: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// checkLeftovers waits up to wait for the processes the tests started to
// exit, for the agents' session directories made since before (sessionDirs)
// to be removed, and for the containers mounting one of mounted to be
// removed; then it reports (and ends or removes) what is left, and the
// builds still on disk.
func checkLeftovers(wait time.Duration, before map[string]bool, mounted []string) error {
	var (
		left       []procs.Process
		dirs       []string
		containers []container
		errs       []error
	)
	deadline := time.Now().Add(wait)
	for {
		ps, err := processes()
		if err != nil {
			return err
		}
		left = started(ps, os.Getpid(), builds.dirs())
		dirs = leftSessionDirs(os.TempDir(), before, ps, os.Getpid())
		containers, err = leftContainers(mounted)
		if err != nil {
			errs = append(errs, err)
		}
		if (len(left) == 0 && len(dirs) == 0 && len(containers) == 0) || err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling /proc and the engine: there is no event for another process's exit
	}
	for _, p := range left {
		errs = append(errs, fmt.Errorf("process %d still running: %s", p.PID, p.Args))
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	for _, dir := range dirs {
		errs = append(errs, fmt.Errorf("agent session directory %s still on disk (a session was never stopped, or its executor did not retire it)", dir))
		_ = os.RemoveAll(dir)
	}
	for _, c := range containers {
		errs = append(errs, fmt.Errorf("container %s %v still there (labels %v): a test did not stop its session or remove its container", short(c.ID), c.Names, c.Labels))
		removeContainer(c.ID)
	}
	for _, dir := range builds.dirs() {
		if _, err := os.Stat(dir); err == nil {
			errs = append(errs, fmt.Errorf("temporary build %s still on disk (call its RemoveBuilds from TestMain)", dir))
		}
	}
	return errors.Join(errs...)
}

func short(id string) string { return id[:min(len(id), 12)] }

// processes lists the processes of /proc.
func processes() ([]procs.Process, error) {
	ps, err := procs.List()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return ps, nil
}

// started returns the live processes (not zombies) that descend from
// root or whose command line names one of names, root excluded, by pid.
func started(ps []procs.Process, root int, names []string) []procs.Process {
	children := map[int][]int{}
	byPID := map[int]procs.Process{}
	for _, p := range ps {
		children[p.PPID] = append(children[p.PPID], p.PID)
		byPID[p.PID] = p
	}
	found := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !found[c] {
				found[c] = true
				queue = append(queue, c)
			}
		}
	}
	for _, p := range ps {
		for _, n := range names {
			if n != "" && strings.Contains(p.Args, n) {
				found[p.PID] = true
			}
		}
	}
	var out []procs.Process
	for pid := range found {
		if p, ok := byPID[pid]; ok && pid != root && p.State != 'Z' && p.State != 'X' {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// StopProcessesNaming ends every process whose command line names dir
// (the agentctl processes of a server's data directory, which outlive the
// server by design): SIGTERM, then SIGKILL for those still alive after
// LeaveNothingWait, and waits until they are gone. It returns the
// command lines of the processes it ended, and fails t if one cannot be
// ended.
func StopProcessesNaming(t testing.TB, dir string) (ended []string) {
	t.Helper()
	signal := syscall.SIGTERM
	deadline := time.Now().Add(LeaveNothingWait)
	sent := map[int]syscall.Signal{}
	for {
		ps, err := processes()
		if err != nil {
			t.Errorf("stop the processes of %s: %v", dir, err)
			return ended
		}
		left := started(ps, -1, []string{dir})
		if len(left) == 0 {
			return ended
		}
		if time.Now().After(deadline) {
			if signal == syscall.SIGKILL {
				t.Errorf("processes of %s still running after SIGKILL: %v", dir, left)
				return ended
			}
			signal, deadline = syscall.SIGKILL, time.Now().Add(LeaveNothingWait)
		}
		for _, p := range left {
			if sent[p.PID] != signal {
				if sent[p.PID] == 0 {
					ended = append(ended, p.Args)
				}
				sent[p.PID] = signal
				_ = syscall.Kill(p.PID, signal)
			}
		}
		time.Sleep(50 * time.Millisecond) // polling /proc: there is no event for another process's exit
	}
}

// builds are the directories Binary.Path made in this test process.
var builds buildDirs

type buildDirs struct {
	mu   sync.Mutex
	list []string
}

func (b *buildDirs) add(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.list = append(b.list, dir)
}

func (b *buildDirs) dirs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.list...)
}

// ProcessesNaming returns the command lines of the live processes whose
// command line names s.
func ProcessesNaming(t testing.TB, s string) []string {
	t.Helper()
	ps, err := processes()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range started(ps, -1, []string{s}) {
		out = append(out, p.Args)
	}
	return out
}
