package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/executors/local"
	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/store/pgtest"
)

// BenchmarkBatchNotifiesEveryLiveSession: one task with 1, 10 and 100 live
// local sessions (one agentctl process each) and an MCP client on each;
// from the AddSources call to the last client's list_changed. A task's
// provider set can grow twice (nothing → github → github+gitlab), so each
// setup yields two batches. The floor: as many bare go-sdk servers in this
// process, each changing its tool list, to the last client notified.
// Recomputes per batch are counted from the event log (must be 1);
// call-return is when AddSources returns: commit, every push acknowledged
// and recorded.
func BenchmarkBatchNotifiesEveryLiveSession(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			for b.Loop() {
				batchRound(b, n)
			}
		})
	}
}

// BenchmarkPostgresBatchNotifiesEveryLiveSession is the 10-session round
// of BenchmarkBatchNotifiesEveryLiveSession with the records in
// PostgreSQL (a throw-away cluster on a Unix socket, fsync off).
func BenchmarkPostgresBatchNotifiesEveryLiveSession(b *testing.B) {
	for b.Loop() {
		batchRound(b, 10, store.Options{DatabaseURL: pgtest.Shared(b).NewDatabase(b)})
	}
}

func batchRound(b *testing.B, n int, dbOpts ...store.Options) {
	ctx := context.Background()
	var l *live
	if len(dbOpts) == 0 {
		l = newLive(b, 30*time.Second)
	} else {
		exec, err := local.New(local.Options{Agentctl: executortest.Agentctl(b), StateDir: b.TempDir(), OrchestratorID: b.Name()})
		require.NoError(b, err)
		l = newLiveOnStore(b, exec, service.Options{PushTimeout: 30 * time.Second}, dbOpts[0], nil)
	}
	task := l.task(b, "local0")
	clients := make([]*mcptest.Client, n)
	for i := range clients {
		clients[i] = l.client(b, l.launch(b, task.ID))
		clients[i].Names(b)
	}
	floors, toggles := make([]*mcptest.Client, n), make([]func(), n)
	for i := range floors {
		floors[i], toggles[i] = mcptest.Floor(b)
	}

	var figure, floor, returned benchstats.Samples
	recomputes := 0
	for _, repo := range []string{"github", "gitlab"} {
		before := lastSeq(b, l.st, task.ID)
		figure.Time(func() {
			start := time.Now()
			res, err := l.svc.AddSources(ctx, task.ID, l.ids(repo))
			returned = append(returned, time.Since(start))
			require.NoError(b, err)
			require.Len(b, res.Pushes, n)
			for _, c := range clients {
				c.WaitChanged(b)
			}
		})
		recomputes += l.eventsAfter(b, task.ID, before)[model.EventProvidersRecomputed][""]
		floor.Time(func() {
			for _, toggle := range toggles {
				toggle()
			}
			for _, c := range floors {
				c.WaitChanged(b)
			}
		})
	}
	benchstats.Report(b, figure, floor)
	b.ReportMetric(float64(recomputes)/2, "recomputes/batch")
	b.ReportMetric(benchstats.Micros(returned.Percentile(50)), "call-return-p50-us")
}
