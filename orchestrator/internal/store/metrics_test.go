package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// SessionCounts is what the sessions' gauges show: the sessions that are
// not stopped, by state and executor, with those needing repair.
func TestSessionCountsByStateAndExecutor(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		t.Parallel()
		ctx := context.Background()
		s := openOptions(t, t.TempDir(), nil, b.options(t))
		f := newFixture(t, s, "acme")
		task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
		require.NoError(t, err)
		for _, sess := range []model.Session{
			{Executor: "local", State: model.SessionRunning},
			{Executor: "local", State: model.SessionRunning, NeedsRepair: true},
			{Executor: "local", State: model.SessionPending},
			{Executor: "local", State: model.SessionStopped},
			{Executor: "docker", State: model.SessionFailed, NeedsRepair: true},
		} {
			sess.TaskID, sess.Mode = task.ID, model.ModeTask
			_, err := s.CreateSession(ctx, sess)
			require.NoError(t, err)
		}
		counts, err := s.SessionCounts(ctx)
		require.NoError(t, err)
		assert.Equal(t, []metrics.SessionCount{
			{State: "failed", Executor: "docker", Sessions: 1, NeedsRepair: 1},
			{State: "pending", Executor: "local", Sessions: 1},
			{State: "running", Executor: "local", Sessions: 2, NeedsRepair: 1},
		}, counts)
	})
}

// A write that finds the database locked by another connection past the
// busy timeout is counted as a busy error; every transaction is timed.
func TestBusyWritesAreCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	s := openOptions(t, dir, nil, store.Options{Metrics: metrics.New(reg)})
	_, err := s.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)

	other, err := sql.Open("sqlite", filepath.Join(dir, store.FileName))
	require.NoError(t, err)
	defer other.Close()
	holder, err := other.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	_, err = s.CreateWorkspace(ctx, "beta") // waits out the 5 s busy timeout
	require.Error(t, err)
	_, err = holder.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)

	assert.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(`
# HELP toolscope_db_busy_errors_total Transactions that failed because the database was busy or locked, by kind (read, write).
# TYPE toolscope_db_busy_errors_total counter
toolscope_db_busy_errors_total{kind="write"} 1
`), "toolscope_db_busy_errors_total"))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "toolscope_db_transaction_duration_seconds" {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "write" {
					assert.EqualValues(t, 2, m.GetHistogram().GetSampleCount(), "both writes timed")
				}
			}
		}
	}
}
