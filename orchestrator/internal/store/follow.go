package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// commitChannel is the PostgreSQL notification channel every write
// transaction with events or a catalog change notifies (delivered at its
// commit, to every listener).
const commitChannel = "toolscope_commits"

// Bounds of the follower's reconnection backoff.
const (
	followRetryMin = 100 * time.Millisecond
	followRetryMax = 5 * time.Second
)

// Shared reports whether several processes may write this database
// (PostgreSQL): each must then follow the others' commits.
func (s *Store) Shared() bool { return s.pg != nil }

// FollowCommits calls wake after every transaction that any process on
// the database committed with task events or a catalog change, until ctx
// ends (ADR 0027). On PostgreSQL it
// LISTENs on a connection of its own; wake also runs after each
// (re)connection, since notifications sent while it was away are not
// kept, so the caller reads what it missed by sequence number. Several
// commits may make one wake. SQLite has one process: FollowCommits
// returns at once.
func (s *Store) FollowCommits(ctx context.Context, wake func()) {
	if s.pg == nil {
		return
	}
	backoff := followRetryMin
	for ctx.Err() == nil {
		err := s.listen(ctx, wake, func() { backoff = followRetryMin })
		if ctx.Err() != nil {
			return
		}
		s.opts.Logger.Warn("following the database's commits failed; retrying", "error", hostError(s.path, err).Error(), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, followRetryMax)
	}
}

func (s *Store) listen(ctx context.Context, wake, connected func()) error {
	c, err := pgx.ConnectConfig(ctx, s.pg.Copy())
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(closeCtx)
	}()
	if _, err := c.Exec(ctx, "LISTEN "+commitChannel); err != nil {
		return err
	}
	connected()
	wake()
	for {
		if _, err := c.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
