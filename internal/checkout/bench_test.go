package checkout

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/gittest"
)

// BenchmarkWorkspace: a session's checkout of a repository of 10,000 files
// and 1,000 commits (100 files and 10 commits under TOOLSCOPE_BENCH_SMOKE),
// served over smart HTTP behind a token by gittest, each case interleaved
// with its floor, plain git with the same environment and credential
// header, in alternating order:
//
//   - cold: the repository's first session, Mirrors.Fetch into a fresh
//     mirrors directory and Create on the session's branch, against
//     `git clone URL DIR`; disk-KiB is what the mirror and the checkout
//     take, clone-disk-KiB the clone;
//   - warm: another session of it, Mirrors.Fetch again (as agentctl does
//     for every session) and Create, against `git worktree add -b BRANCH
//     DIR` in a local clone; disk-extra-KiB is what the checkout adds to
//     the disk (blocks allocated, an inode hard-linked to the mirror
//     counted once), worktree-disk-KiB what the worktree adds to the
//     clone, clone-disk-KiB what the clone takes.
//
// Checkouts are handed to the agent's uid as the tests hand them (nobody
// when run as root): the hand-over is part of what a session costs.
// Every checkout and clone is kept until the end (see below).
func BenchmarkWorkspace(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Fatalf("git is needed (.ci/run installs it): %v", err)
	}
	files, commits := 10_000, 1_000
	if os.Getenv("TOOLSCOPE_BENCH_SMOKE") != "" {
		files, commits = 100, 10 // make bench-smoke: that it runs, not what it measures
	}
	// The repository is built once for the three cases, and removed after.
	host := gittest.New(token, nil)
	defer host.Close()
	buildRepo(b, host, "acme/big", files, commits)
	srv := httptest.NewServer(host)
	defer srv.Close()
	w := &workspaceBench{remote: Remote{URL: srv.URL + "/acme/big.git", User: "x-access-token", Token: token},
		owner: benchOwner(), files: files}

	// Nothing is removed until both cases are done: ext4 without a
	// journal (this machine's disk, say) skips the inodes freed in the last
	// minute (six while their inode table block is dirty) when it
	// allocates one, reading the block of each it skips (recently_deleted),
	// and a checkout made after thousands of files were removed takes
	// several times as long (10,000 files: 0.8 s, then over 10 s).
	root := b.TempDir()
	for _, c := range []struct {
		name string
		run  func(*testing.B, string)
	}{{"cold", w.cold}, {"warm", w.warm}} {
		b.Run(c.name, func(b *testing.B) { c.run(b, filepath.Join(root, c.name)) })
	}
}

// The repository key of the benchmark's mirror.
const benchKey = "github.com/acme/big"

type workspaceBench struct {
	remote Remote
	owner  *Owner
	files  int
}

// benchOwner is the agent's uid, as agent gives it to the tests: nobody
// when run as root, else nil (this user).
func benchOwner() *Owner {
	if os.Geteuid() != 0 {
		return nil
	}
	return &Owner{UID: 65534, GID: 65534}
}

func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// interleave times figure and floor, the floor first every other
// iteration: both see the same machine, and neither always follows the
// other's writes.
func interleave(i int, figure, floor *benchstats.Samples, f, g func()) {
	if i%2 == 0 {
		figure.Time(f)
		floor.Time(g)
	} else {
		floor.Time(g)
		figure.Time(f)
	}
}

// session fetches the mirror and makes a checkout of it at dir on branch.
func (w *workspaceBench) session(b *testing.B, ctx context.Context, m *Mirrors, dir, branch string) {
	mi, err := m.Fetch(ctx, benchKey, w.remote)
	if err != nil {
		b.Fatal(err)
	}
	if err := Create(ctx, mi, dir, Options{Branch: branch, Origin: w.remote.URL, Owner: w.owner}); err != nil {
		b.Fatal(err)
	}
}

// clone is the floor of a first session: git clone of the remote into
// dir, with the credential as Fetch passes it.
func (w *workspaceBench) clone(b *testing.B, ctx context.Context, dir string) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := remoteGit(ctx, filepath.Dir(dir), w.remote, "clone", "--quiet", "--", w.remote.URL, dir); err != nil {
		b.Fatal(err)
	}
}

// worktree is the floor of a further session: git worktree add of a new
// branch from the local clone at base.
func worktree(b *testing.B, ctx context.Context, base, dir, branch string) {
	if _, err := git(ctx, base, nil, "worktree", "add", "--quiet", "-b", branch, dir); err != nil {
		b.Fatal(err)
	}
}

// cold measures a repository's first session, in a directory of its own
// each time: a fresh mirror and one checkout, against a clone.
func (w *workspaceBench) cold(b *testing.B, root string) {
	ctx := benchCtx(b)
	var figure, floor benchstats.Samples
	var first, whole int64
	for i := 0; b.Loop(); i++ {
		it := filepath.Join(root, fmt.Sprint(i))
		mirrors, sessions, clone := filepath.Join(it, "mirrors"), filepath.Join(it, "sessions"), filepath.Join(it, "clone")
		m, err := OpenMirrors(mirrors)
		if err != nil {
			b.Fatal(err)
		}
		interleave(i, &figure, &floor,
			func() { w.session(b, ctx, m, filepath.Join(sessions, "s1", "big"), "toolscope/t1/s1") },
			func() { w.clone(b, ctx, clone) })
		first, whole = usage(b, mirrors, sessions).bytes, usage(b, clone).bytes
		w.checkFiles(b, sessions)
		w.checkFiles(b, clone)
	}
	benchstats.Report(b, figure, floor)
	b.ReportMetric(float64(first)/1024, "disk-KiB")
	b.ReportMetric(float64(whole)/1024, "clone-disk-KiB")
}

// warm measures a further session's time and the bytes it adds to the
// disk; the floor's local clone is a whole git clone.
func (w *workspaceBench) warm(b *testing.B, root string) {
	ctx := benchCtx(b)
	m, err := OpenMirrors(filepath.Join(root, "mirrors"))
	if err != nil {
		b.Fatal(err)
	}
	w.session(b, ctx, m, filepath.Join(root, "sessions", "s0", "big"), "toolscope/t1/s0")
	base := filepath.Join(root, "clone")
	w.clone(b, ctx, base)
	whole := usage(b, base).bytes

	mirrors, sessions, trees := filepath.Join(root, "mirrors"), filepath.Join(root, "sessions"), filepath.Join(root, "worktrees")
	var figure, floor benchstats.Samples
	var extra, tree int64
	for i := 0; b.Loop(); i++ {
		branch := fmt.Sprintf("toolscope/t1/s%d", i+1)
		session, dir := filepath.Join(sessions, fmt.Sprintf("s%d", i+1)), filepath.Join(trees, fmt.Sprintf("s%d", i+1))
		ours, theirs := usage(b, mirrors), usage(b, base)
		interleave(i, &figure, &floor,
			func() { w.session(b, ctx, m, filepath.Join(session, "big"), branch) },
			func() { worktree(b, ctx, base, dir, branch) })
		// The new checkout's files that are the mirror's (hard links) are
		// counted once, as the mirror's.
		extra = usage(b, mirrors, session).bytes - ours.bytes
		tree = usage(b, base, dir).bytes - theirs.bytes
		w.checkFiles(b, session)
		w.checkFiles(b, dir)
	}
	benchstats.Report(b, figure, floor)
	b.ReportMetric(float64(extra)/1024, "disk-extra-KiB")
	b.ReportMetric(float64(tree)/1024, "worktree-disk-KiB")
	b.ReportMetric(float64(whole)/1024, "clone-disk-KiB")
	b.ReportMetric(float64(extra)/float64(tree), "disk-ratio")
}

// checkFiles fails unless dir's work tree holds the repository's files.
func (w *workspaceBench) checkFiles(b *testing.B, dir string) {
	if n := usage(b, dir).files; n != w.files {
		b.Fatalf("%s holds %d files, want %d", dir, n, w.files)
	}
}

// du is what a walk found: the bytes allocated (blocks, each inode once)
// and the regular files outside .git.
type du struct {
	bytes int64
	files int
}

// usage walks roots and sums the blocks allocated to every file and
// directory, an inode reached through several hard links counted once.
func usage(b *testing.B, roots ...string) du {
	b.Helper()
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var u du
	for _, root := range roots {
		if _, err := os.Lstat(root); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("%s: no stat", p)
			}
			if id := (inode{uint64(st.Dev), st.Ino}); !seen[id] {
				seen[id] = true
				u.bytes += st.Blocks * 512
			}
			if d.Type().IsRegular() && d.Name() != ".git" && !strings.Contains(p, string(filepath.Separator)+".git"+string(filepath.Separator)) {
				u.files++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return u
}

// buildRepo makes path, a bare repository of host, with files files over
// commits commits on main, in one git fast-import stream: each commit adds
// its share of the files and changes five earlier ones.
func buildRepo(b *testing.B, host *gittest.Host, path string, files, commits int) {
	b.Helper()
	bare := host.Bare(path)
	if _, err := gittest.Git(host.Root(), "init", "-q", "--bare", "-b", "main", bare); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = bare
	cmd.Env = baseEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewWriterSize(in, 1<<20)
	revs := make([]int, files)
	file := func(j int) {
		var body bytes.Buffer
		fmt.Fprintf(&body, "// Package p%02d holds file %d of the workspace benchmark's repository.\npackage p%02d\n\n", j%100, j, j%100)
		for k := range 20 {
			fmt.Fprintf(&body, "func f%d_%d(x int) int { return x*%d + %d }\n", j, k, k+1, (j*31+k*17)%1000)
		}
		for r := 1; r <= revs[j]; r++ {
			fmt.Fprintf(&body, "// revision %d\n", r)
		}
		fmt.Fprintf(out, "M 100644 inline p%02d/s%d/f%05d.go\ndata %d\n%s\n", j%100, (j/100)%10, j, body.Len(), body.Bytes())
	}
	for c := range commits {
		lo, hi := c*files/commits, (c+1)*files/commits
		msg := fmt.Sprintf("commit %d\n", c)
		fmt.Fprintf(out, "commit refs/heads/main\ncommitter Bench <bench@localhost> %d +0000\ndata %d\n%s", 1_700_000_000+60*c, len(msg), msg)
		for j := lo; j < hi; j++ {
			file(j)
		}
		for k := 0; k < 5 && lo > 0; k++ {
			j := (c*7919 + k*104729) % lo
			revs[j]++
			file(j)
		}
		out.WriteString("\n")
	}
	if err := out.Flush(); err != nil {
		b.Fatalf("git fast-import: %v: %s", err, errb.String())
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v: %s", err, errb.String())
	}
	// One pack, as a provider keeps its repositories.
	if _, err := gittest.Git(bare, "repack", "-a", "-d", "-q"); err != nil {
		b.Fatal(err)
	}
}
