package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// emit appends e to its task's event log in this transaction and assigns
// its sequence number and time. Every event is appended here, so its
// message is scrubbed here, once, before it is stored or published, and
// bounded (MaxMessageBytes).
func (t *tx) emit(ctx context.Context, e model.Event) error {
	e.Time = t.now
	e.Message = clip(t.scrub.String(e.Message), MaxMessageBytes)
	if e.RepositoryIDs == nil {
		e.RepositoryIDs = []string{}
	}
	ids, err := json.Marshal(e.RepositoryIDs)
	if err != nil {
		return err
	}
	var seq int64
	err = t.QueryRowContext(ctx, `
		INSERT INTO task_events (task_id, kind, session_id, repository_ids, providers, generation, message, actor, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`, // RETURNING: PostgreSQL's driver has no LastInsertId
		e.TaskID, string(e.Kind), e.SessionID, string(ids), e.Providers.Set.String(), e.Providers.Generation,
		e.Message, e.Actor.String(), formatTime(e.Time)).Scan(&seq)
	if err != nil {
		return err
	}
	e.Seq = uint64(seq)
	t.events = append(t.events, e)
	return nil
}

// Events returns up to limit events of a task with a sequence number above
// afterSeq, in sequence order. The task must exist.
func (s *Store) Events(ctx context.Context, taskID string, afterSeq uint64, limit int) (out []model.Event, err error) {
	if afterSeq > math.MaxInt64 {
		return nil, errdefs.InvalidField("after_sequence", "%d is beyond any sequence number", afterSeq)
	}
	err = s.read(ctx, func(q queryer) error {
		out, err = events(ctx, q, taskID, afterSeq, limit)
		return err
	})
	return out, err
}

func events(ctx context.Context, q queryer, taskID string, afterSeq uint64, limit int) ([]model.Event, error) {
	if err := taskExists(ctx, q, taskID); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+eventColumns+` FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		taskID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	return scanEvents(rows)
}

const eventColumns = `seq, task_id, kind, session_id, repository_ids, providers, generation, message, actor, created_at`

// EventsAfter returns up to limit events of every task with a sequence
// number above afterSeq, in sequence order: what replicas committed,
// read by each replica's follower (ADR 0027). Sequence numbers are taken
// under the write lock and committed in their order, so an event read
// later never has a number below one read before.
func (s *Store) EventsAfter(ctx context.Context, afterSeq uint64, limit int) (out []model.Event, err error) {
	if afterSeq > math.MaxInt64 {
		return nil, errdefs.InvalidField("after_sequence", "%d is beyond any sequence number", afterSeq)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+eventColumns+` FROM task_events WHERE seq > ? ORDER BY seq LIMIT ?`, afterSeq, limit)
	if err != nil {
		return nil, hostError(s.path, err)
	}
	return scanEvents(rows)
}

// LastEventSeq returns the highest sequence number committed (0: none).
func (s *Store) LastEventSeq(ctx context.Context) (uint64, error) {
	var seq sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MAX(seq) FROM task_events`).Scan(&seq); err != nil {
		return 0, hostError(s.path, err)
	}
	return uint64(seq.Int64), nil
}

func scanEvents(rows *sql.Rows) ([]model.Event, error) {
	defer rows.Close()
	var out []model.Event
	for rows.Next() {
		var (
			e                                  model.Event
			kind, ids, provSet, actor, created string
		)
		if err := rows.Scan(&e.Seq, &e.TaskID, &kind, &e.SessionID, &ids, &provSet, &e.Providers.Generation,
			&e.Message, &actor, &created); err != nil {
			return nil, err
		}
		e.Kind = model.EventKind(kind)
		e.Actor = model.ParseActor(actor)
		if err := json.Unmarshal([]byte(ids), &e.RepositoryIDs); err != nil {
			return nil, err
		}
		e.Providers.Set = providers.Of(strings.Split(provSet, ",")...)
		var err error
		if e.Time, err = parseTime(created); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AppendEvents records events of existing tasks in one transaction.
func (s *Store) AppendEvents(ctx context.Context, events ...model.Event) error {
	return s.write(ctx, func(t *tx) error {
		for _, e := range events {
			if _, err := taskProviders(ctx, t, e.TaskID); err != nil {
				return err
			}
			if err := t.emit(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// DefaultAuditKeep is how many tool.called events PruneAudit keeps per
// task: the newest, as many as a session writes in 25 minutes at the
// audit's rate (20 a second), about 10 MB.
const DefaultAuditKeep = 30_000

// PruneAudit removes the tool.called events of each task beyond its keep
// newest ones, and records on the task how many went, so the audit is
// bounded and says where it was cut. It returns how many it removed.
func (s *Store) PruneAudit(ctx context.Context, keep int) (removed int64, err error) {
	if keep <= 0 {
		return 0, nil
	}
	var over []string
	err = s.read(ctx, func(q queryer) error {
		rows, err := q.QueryContext(ctx, `SELECT task_id FROM task_events WHERE kind = ? GROUP BY task_id HAVING COUNT(*) > ?`,
			string(model.EventToolCalled), keep)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			over = append(over, id)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	for _, task := range over {
		err := s.write(ctx, func(t *tx) error {
			var cutoff int64
			err := t.QueryRowContext(ctx, `SELECT seq FROM task_events WHERE task_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1 OFFSET ?`,
				task, string(model.EventToolCalled), keep).Scan(&cutoff)
			if err != nil {
				return err
			}
			res, err := t.ExecContext(ctx, `DELETE FROM task_events WHERE task_id = ? AND kind = ? AND seq <= ?`,
				task, string(model.EventToolCalled), cutoff)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			removed += n
			return t.emit(ctx, model.Event{TaskID: task, Kind: model.EventToolCalled,
				Message: fmt.Sprintf("tool=(pruned) outcome=pruned pruned_calls=%d through_seq=%d", n, cutoff)})
		})
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}
