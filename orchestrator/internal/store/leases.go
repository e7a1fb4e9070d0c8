package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Leases (ADR 0027). Every lease time is the database's clock, read in the
// statement that compares or sets it (dialect.nowMillis), never a
// replica's: two replicas whose clocks disagree by any amount still agree
// on whether a lease has expired, so they never both hold one.

// ReplicaLease is the name of the lease a replica renews while it lives;
// the sessions it owns are its own while the lease holds.
func ReplicaLease(replica string) string { return "replica:" + replica }

// nowMillis is the database clock, in milliseconds since the epoch, as an
// SQL expression: clock_timestamp() rather than now(), which is the start
// of the transaction (and a writer may wait for the write lock).
func (d dialect) nowMillis() string {
	if d == dialectPostgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// TakeLease takes or renews the lease name for holder for ttl, by the
// database's clock. It succeeds when the lease is free, expired or
// already holder's; it reports false, with the holder, when another
// holder's lease has not expired.
func (s *Store) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (held bool, current string, err error) {
	if ttl <= 0 {
		return false, "", errdefs.InvalidField("lease_ttl", "%s; give a positive duration", ttl)
	}
	now := s.w.d.nowMillis()
	err = s.write(ctx, func(t *tx) error {
		err := t.QueryRowContext(ctx, `INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, `+now+` + ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
			WHERE leases.holder = excluded.holder OR leases.expires_ms < `+now+`
			RETURNING holder`, name, holder, ttl.Milliseconds()).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			held = false
			return t.QueryRowContext(ctx, `SELECT holder FROM leases WHERE name = ?`, name).Scan(&current)
		}
		held = err == nil
		return err
	})
	return held, current, err
}

// ErrOwnedElsewhere reports a session owned by another live replica. It is
// an errdefs.ErrFailedPrecondition; the message names the owner.
var ErrOwnedElsewhere = fmt.Errorf("session owned by another replica: %w", errdefs.ErrFailedPrecondition)

// OwnedElsewhere returns the error for a session whose owner is replica.
func OwnedElsewhere(sessionID, replica string) error {
	return fmt.Errorf("session %s is owned by replica %s, which acts on it while its lease holds (ask that replica, or wait for it to go away and another to take the session over): %w",
		sessionID, replica, ErrOwnedElsewhere)
}

// Claimed is a session a replica took over, with the replica that owned it.
type Claimed struct {
	Session  model.Session
	Previous string // "" for a session no replica owned
}

// ClaimSessions makes replica the owner of every pending or running
// session that accept takes and whose owner is not alive: no owner, or an
// owner whose replica lease is absent or expired by the database's clock
// (a replica claims only the sessions whose executor it runs). With mine, it also
// returns the active sessions replica already owns (a restart on the same
// replica id). It is one transaction, so of two replicas claiming at once
// each session goes to one.
func (s *Store) ClaimSessions(ctx context.Context, replica string, mine bool, accept func(model.Session) bool) (out []Claimed, err error) {
	now := s.w.d.nowMillis()
	err = s.write(ctx, func(t *tx) error {
		out = out[:0]
		rows, err := t.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions s
			WHERE state IN ('pending', 'running') AND (owner = ?1 OR (owner <> ?1 AND NOT EXISTS (
				SELECT 1 FROM leases l WHERE l.name = 'replica:' || s.owner AND l.expires_ms >= `+now+`)))
			ORDER BY created_at, id`, replica)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sess, err := scanSession(rows)
			if err != nil {
				return err
			}
			if (sess.Owner == replica && !mine) || !accept(sess) {
				continue
			}
			out = append(out, Claimed{Session: sess, Previous: sess.Owner})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for i := range out {
			if out[i].Previous == replica {
				continue
			}
			if _, err := t.ExecContext(ctx, `UPDATE sessions SET owner = ? WHERE id = ?`, replica, out[i].Session.ID); err != nil {
				return err
			}
			out[i].Session.Owner = replica
		}
		return nil
	})
	return out, err
}

// ClaimSession makes replica the owner of one session, unless another
// replica owns it and its lease holds (ErrOwnedElsewhere, naming it):
// what a replica does before it acts on a session someone asked it about
// (stop, resume, its MCP endpoint).
func (s *Store) ClaimSession(ctx context.Context, id, replica string) (model.Session, error) {
	now := s.w.d.nowMillis()
	var sess model.Session
	err := s.write(ctx, func(t *tx) error {
		var err error
		if sess, err = getSession(ctx, t, id); err != nil {
			return err
		}
		if sess.Owner == replica {
			return nil
		}
		if sess.Owner != "" {
			var alive int
			if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM leases WHERE name = ? AND expires_ms >= `+now,
				ReplicaLease(sess.Owner)).Scan(&alive); err != nil {
				return err
			}
			if alive > 0 {
				return OwnedElsewhere(id, sess.Owner)
			}
		}
		sess.Owner = replica
		_, err = t.ExecContext(ctx, `UPDATE sessions SET owner = ? WHERE id = ?`, replica, id)
		return err
	})
	return sess, err
}
