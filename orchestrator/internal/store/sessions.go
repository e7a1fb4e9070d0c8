package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

const sessionColumns = `id, task_id, executor, mode, state, agent_argv, agent_work_dir, handle_version, handle_state,
	pushed_providers, pushed_generation, needs_repair, status_message, created_at, updated_at, image,
	agent_profile, agent_model, agent_credential_env, external_generation, agent_exit_code, owner, agent_pass_env, checkouts, agent_auth`

// CreateSession records a new session of an existing task; its ID and
// timestamps are assigned.
func (s *Store) CreateSession(ctx context.Context, sess model.Session) (model.Session, error) {
	sess.ID = newID("sess")
	err := s.write(ctx, func(t *tx) error {
		if _, err := taskProviders(ctx, t, sess.TaskID); err != nil {
			return err
		}
		sess.CreatedAt, sess.UpdatedAt = t.now, t.now
		bound(&sess)
		argv, err := json.Marshal(nonNil(sess.AgentArgv))
		if err != nil {
			return err
		}
		passEnv, err := json.Marshal(nonNil(sess.AgentPassEnv))
		if err != nil {
			return err
		}
		checkouts, err := json.Marshal(sess.Checkouts)
		if err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.TaskID, sess.Executor, string(sess.Mode), string(sess.State), string(argv), sess.AgentWorkDir,
			sess.Handle.Version, sess.Handle.State, sess.Applied.Set.String(), sess.Applied.Generation,
			sess.NeedsRepair, sess.StatusMessage, formatTime(t.now), formatTime(t.now), sess.Image,
			sess.AgentProfile, sess.AgentModel, sess.AgentCredentialEnv, sess.ExternalGeneration, agentExitCode(sess), sess.Owner, string(passEnv), string(checkouts),
			sess.AgentAuth)
		return err
	})
	return sess, err
}

// UpdateSession reads a session, lets fn change it, and writes it back in
// one transaction, with the events fn returns. The id, task and creation
// time cannot change. If fn fails nothing is written.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*model.Session) ([]model.Event, error)) (model.Session, error) {
	var sess model.Session
	err := s.write(ctx, func(t *tx) error {
		var err error
		if sess, err = getSession(ctx, t, id); err != nil {
			return err
		}
		events, err := fn(&sess)
		if err != nil {
			return err
		}
		sess.UpdatedAt = t.now
		bound(&sess)
		checkouts, err := json.Marshal(sess.Checkouts)
		if err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `UPDATE sessions SET state = ?, handle_version = ?, handle_state = ?,
			pushed_providers = ?, pushed_generation = ?, needs_repair = ?, status_message = ?, updated_at = ?,
			external_generation = ?, agent_exit_code = ?, checkouts = ?
			WHERE id = ?`,
			string(sess.State), sess.Handle.Version, sess.Handle.State, sess.Applied.Set.String(), sess.Applied.Generation,
			sess.NeedsRepair, sess.StatusMessage, formatTime(t.now), sess.ExternalGeneration, agentExitCode(sess), string(checkouts), id)
		if err != nil {
			return err
		}
		for _, e := range events {
			e.TaskID, e.SessionID = sess.TaskID, sess.ID
			if err := t.emit(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	return sess, err
}

// AbandonSession deletes a pending session that never started (its
// launch was refused: it has no handle) and records e on its task, in one
// transaction, so that only sessions that ran are listed (ADR 0015). A
// session that is not pending, or has a handle, is kept:
// FailedPrecondition.
func (s *Store) AbandonSession(ctx context.Context, id string, e model.Event) error {
	return s.write(ctx, func(t *tx) error {
		sess, err := getSession(ctx, t, id)
		if err != nil {
			return err
		}
		if sess.State != model.SessionPending || len(sess.Handle.State) > 0 {
			return errdefs.FailedPrecondition("session %s is %s, not a launch that never started", id, sess.State)
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return err
		}
		e.TaskID, e.SessionID = sess.TaskID, sess.ID
		return t.emit(ctx, e)
	})
}

// ActiveSessions returns every session that is pending or running, oldest
// first: the ones a restarted orchestrator re-attaches.
func (s *Store) ActiveSessions(ctx context.Context) ([]model.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE state IN ('pending', 'running') ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// GetSession returns one session.
func (s *Store) GetSession(ctx context.Context, id string) (model.Session, error) {
	return getSession(ctx, s.r, id)
}

// SessionSurface returns a session and the version of its desired
// surface, read in one transaction.
func (s *Store) SessionSurface(ctx context.Context, id string) (sess model.Session, v model.SurfaceVersion, err error) {
	err = s.read(ctx, func(q queryer) error {
		if sess, err = getSession(ctx, q, id); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, `SELECT workspace_id, provider_generation FROM tasks WHERE id = ?`, sess.TaskID).
			Scan(&v.WorkspaceID, &v.ProviderGeneration); err != nil {
			return err
		}
		v.CatalogGeneration, err = catalogGeneration(ctx, q)
		return err
	})
	return sess, v, err
}

// ListSessions returns a task's sessions, oldest first; with model.Every,
// every task's.
func (s *Store) ListSessions(ctx context.Context, taskID string) ([]model.Session, error) {
	return s.ListSessionsPage(ctx, taskID, Page{})
}

// ListSessionsPage returns the page p of ListSessions.
func (s *Store) ListSessionsPage(ctx context.Context, taskID string, p Page) (out []model.Session, err error) {
	err = s.read(ctx, func(q queryer) error {
		owner, args := `task_id = ?`, []any{taskID}
		if taskID == model.Every {
			owner, args = ``, nil
		} else if err := taskExists(ctx, q, taskID); err != nil {
			return err
		}
		after, afterArgs := p.where(``)
		rows, err := q.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions`+and(owner, after)+` ORDER BY created_at, id`+p.limit(),
			append(args, afterArgs...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sess, err := scanSession(rows)
			if err != nil {
				return err
			}
			out = append(out, sess)
		}
		return rows.Err()
	})
	return out, err
}

// bound clips what the orchestrator writes into a session from what
// executors and agentctls tell it: its status message and its
// checkouts' errors.
func bound(sess *model.Session) {
	sess.StatusMessage = clip(sess.StatusMessage, MaxMessageBytes)
	for i := range sess.Checkouts.Repositories {
		c := &sess.Checkouts.Repositories[i]
		c.Error = clip(c.Error, maxCheckoutErrorBytes)
		if c.Work != nil {
			c.Work.Error = clip(c.Work.Error, maxCheckoutErrorBytes)
		}
	}
}

// agentExitCode is the agent_exit_code column of a session: NULL until
// its agent's exit is recorded.
func agentExitCode(sess model.Session) sql.NullInt64 {
	return sql.NullInt64{Int64: int64(sess.AgentExitCode), Valid: sess.AgentExited}
}

func getSession(ctx context.Context, q queryer, id string) (model.Session, error) {
	sess, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sess, errdefs.NotFound("session", id)
	}
	return sess, err
}

func scanSession(sc scanner) (model.Session, error) {
	var (
		sess                                    model.Session
		mode, state, argv, pushed, created, upd string
		passEnv, checkouts                      string
		exitCode                                sql.NullInt64
	)
	err := sc.Scan(&sess.ID, &sess.TaskID, &sess.Executor, &mode, &state, &argv, &sess.AgentWorkDir,
		&sess.Handle.Version, &sess.Handle.State, &pushed, &sess.Applied.Generation, &sess.NeedsRepair,
		&sess.StatusMessage, &created, &upd, &sess.Image, &sess.AgentProfile, &sess.AgentModel, &sess.AgentCredentialEnv,
		&sess.ExternalGeneration, &exitCode, &sess.Owner, &passEnv, &checkouts, &sess.AgentAuth)
	if err != nil {
		return sess, err
	}
	sess.AgentExited, sess.AgentExitCode = exitCode.Valid, int(exitCode.Int64)
	sess.Mode, sess.State = model.Mode(mode), model.SessionState(state)
	sess.Applied.Set = providers.Of(strings.Split(pushed, ",")...)
	if err := json.Unmarshal([]byte(argv), &sess.AgentArgv); err != nil {
		return sess, err
	}
	if err := json.Unmarshal([]byte(passEnv), &sess.AgentPassEnv); err != nil {
		return sess, err
	}
	if len(sess.AgentPassEnv) == 0 {
		sess.AgentPassEnv = nil
	}
	if err := json.Unmarshal([]byte(checkouts), &sess.Checkouts); err != nil {
		return sess, err
	}
	if sess.CreatedAt, err = parseTime(created); err != nil {
		return sess, err
	}
	sess.UpdatedAt, err = parseTime(upd)
	return sess, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
