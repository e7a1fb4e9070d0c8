package toolcalls

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// databaseFDs counts this process's open file descriptors on the database
// files (the database, its -wal and -shm) of the data directory dir.
func databaseFDs(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	db := filepath.Join(dir, store.FileName)
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, db) {
			n++
		}
	}
	return n
}

// TestABurstOfCallsLeavesTheDatabaseFDsWithinTheBound: 3,000 concurrent
// session_info calls through the dispatcher (one agent's burst) open at
// most the reader pool's connections, and leave at most that many behind.
// Each connection holds up to three descriptors: the database, its -wal
// and its -shm.
func TestABurstOfCallsLeavesTheDatabaseFDsWithinTheBound(t *testing.T) {
	f := newFixture(t)
	const calls = 3000
	bound := 3 * (store.DefaultMaxReaders + 1) // the readers and the writer
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan Result, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := f.d.Handle(context.Background(), Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "session_info", OnLink: true})
			if r.IsError {
				errs <- r
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for r := range errs {
		t.Errorf("session_info failed: %s: %s", r.Code, r.Text)
		break
	}
	after := databaseFDs(t, f.dir)
	testutil.Figure(t, "database fds after a burst of 3,000 session_info calls", "%d (bound %d: %d readers and the writer, 3 files each)",
		after, bound, store.DefaultMaxReaders)
	assert.LessOrEqual(t, after, bound, "database file descriptors left open after the burst")
}
