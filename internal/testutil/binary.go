package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Binary is a static binary built once per test process from a package of
// the go.work workspace (so it is the code under test, not a release).
// Declare one as a package variable and call Remove from TestMain;
// LeaveNothing fails the package if a build is still on disk.
type Binary struct {
	Package string // import path, e.g. ".../agentctl/cmd/agentctl"
	Name    string // file name of the binary

	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// Path builds the binary on first use and returns its path.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "toolscope-"+b.Name+"-"); b.err != nil {
			return
		}
		builds.add(b.dir)
		b.path = filepath.Join(b.dir, b.Name)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.path, b.Package)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", b.Name, b.err, b.out)
	}
	return b.path
}

// Remove deletes what Path built.
func (b *Binary) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}
