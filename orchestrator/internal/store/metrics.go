package store

import (
	"context"
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolscope/toolscope/orchestrator/internal/metrics"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// PostgreSQL's codes of a transaction that lost to another one: a lock
// not available, a deadlock, a serialization failure.
const (
	pgLockNotAvailable     = "55P03"
	pgDeadlockDetected     = "40P01"
	pgSerializationFailure = "40001"
)

// observe records a transaction of kind ("read", "write") begun at start
// that ended with *err.
func (s *Store) observe(kind string, start time.Time, err *error) {
	s.opts.Metrics.Tx(kind, time.Since(start), isBusy(*err))
}

// isBusy reports whether err is the database being busy or locked by
// another connection (SQLite's busy timeout ran out) or, on PostgreSQL, a
// transaction that lost to another one.
func isBusy(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return isPostgresCode(err, pgLockNotAvailable) || isPostgresCode(err, pgDeadlockDetected) ||
		isPostgresCode(err, pgSerializationFailure)
}

// SessionCounts counts the sessions that are not stopped by state and
// executor, with those needing repair: what the sessions' gauges show at
// each scrape (metrics.WatchSessions).
func (s *Store) SessionCounts(ctx context.Context) ([]metrics.SessionCount, error) {
	var out []metrics.SessionCount
	err := s.read(ctx, func(q queryer) error {
		rows, err := q.QueryContext(ctx, `SELECT state, executor, COUNT(*), CAST(SUM(needs_repair) AS BIGINT) FROM sessions
			WHERE state <> ? GROUP BY state, executor ORDER BY state, executor`, string(model.SessionStopped))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c metrics.SessionCount
			if err := rows.Scan(&c.State, &c.Executor, &c.Sessions, &c.NeedsRepair); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}
