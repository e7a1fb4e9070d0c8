package testutil

import (
	"os"
	"testing"
)

// TraversableDir is a new directory, mode 0755, in the temporary
// directory (whose parents others may traverse, where a test's TempDir is
// 0700 on its way), removed after the test: for what agents under uids of
// their own must reach, such as checkouts and workspaces.
func TraversableDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toolscope-test-shared-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
