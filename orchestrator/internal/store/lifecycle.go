package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// OpenChangeRequests lists a workspace's change requests on provider that
// the lifecycle has not seen merged or closed.
func (s *Store) OpenChangeRequests(ctx context.Context, workspaceID string, p providers.Provider) ([]model.ChangeRequest, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT `+prefixed("c", changeColumns)+`
		FROM task_change_requests c
		JOIN tasks t ON t.id = c.task_id
		LEFT JOIN change_request_checkpoints k ON k.task_id = c.task_id AND k.repository_id = c.repository_id
		WHERE t.workspace_id = ? AND c.provider = ? AND coalesce(k.merged, 0) = 0 AND coalesce(k.closed, 0) = 0
		ORDER BY c.created_at`, workspaceID, string(p))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.ChangeRequest
	for rows.Next() {
		cr, err := scanChange(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, cr)
	}
	return out, rows.Err()
}

// Evaluation loads what evaluating one change request needs, with one
// targeted query: its automation options and its checkpoint.
func (s *Store) Evaluation(ctx context.Context, taskID, repoID string) (model.ChangeRequest, model.Checkpoint, error) {
	var cp model.Checkpoint
	var reviewUser, failedSHA, mergedSHA, skipped sql.NullString
	var merged, closed sql.NullBool
	cr, err := scanChange(s.r.QueryRowContext(ctx, `
		SELECT `+prefixed("c", changeColumns)+`, k.review_requested_user, k.merged, k.closed, k.checks_failed_sha, k.auto_merged_sha, k.skipped_reason
		FROM task_change_requests c
		LEFT JOIN change_request_checkpoints k ON k.task_id = c.task_id AND k.repository_id = c.repository_id
		WHERE c.task_id = ? AND c.repository_id = ?`, taskID, repoID),
		&reviewUser, &merged, &closed, &failedSHA, &mergedSHA, &skipped)
	if errors.Is(err, sql.ErrNoRows) {
		return cr, cp, fmt.Errorf("task %q has no change request on repository %q: %w", taskID, repoID, errdefs.ErrNotFound)
	}
	cp = model.Checkpoint{ReviewRequestedUser: reviewUser.String, Merged: merged.Bool, Closed: closed.Bool,
		ChecksFailedSHA: failedSHA.String, AutoMergedSHA: mergedSHA.String, SkippedReason: skipped.String}
	return cr, cp, err
}

// Act records, in one transaction, a change request's new checkpoint, the
// prompts it produced and their events.
func (s *Store) Act(ctx context.Context, taskID, repoID string, cp model.Checkpoint, prompts []model.Prompt, events []model.Event) ([]model.Prompt, error) {
	err := s.write(ctx, func(t *tx) error {
		if _, err := t.ExecContext(ctx, `
			INSERT INTO change_request_checkpoints (task_id, repository_id, review_requested_user, merged, closed,
				checks_failed_sha, auto_merged_sha, skipped_reason, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id, repository_id) DO UPDATE SET review_requested_user = excluded.review_requested_user,
				merged = excluded.merged, closed = excluded.closed, checks_failed_sha = excluded.checks_failed_sha,
				auto_merged_sha = excluded.auto_merged_sha, skipped_reason = excluded.skipped_reason, updated_at = excluded.updated_at`,
			taskID, repoID, cp.ReviewRequestedUser, cp.Merged, cp.Closed, cp.ChecksFailedSHA, cp.AutoMergedSHA, cp.SkippedReason,
			formatTime(t.now)); err != nil {
			return err
		}
		for i := range prompts {
			if err := t.prompt(ctx, taskID, &prompts[i]); err != nil {
				return err
			}
		}
		for _, e := range events {
			e.TaskID = taskID
			if err := t.emit(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	return prompts, err
}

// prompt adds p to the task's inbox in this transaction and assigns its
// id and time. Every prompt is added here, so its text is scrubbed here,
// once, before an agent can read it.
func (t *tx) prompt(ctx context.Context, taskID string, p *model.Prompt) error {
	p.Text = t.scrub.String(p.Text)
	err := t.QueryRowContext(ctx, `INSERT INTO task_prompts (task_id, text, link, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		taskID, p.Text, p.Link, formatTime(t.now)).Scan(&p.ID) // RETURNING: PostgreSQL's driver has no LastInsertId
	if err != nil {
		return err
	}
	p.TaskID, p.CreatedAt = taskID, t.now
	return nil
}

// TakePrompts returns a task's unread prompts, oldest first, and marks
// them read.
func (s *Store) TakePrompts(ctx context.Context, taskID string) ([]model.Prompt, error) {
	var out []model.Prompt
	err := s.write(ctx, func(t *tx) error {
		rows, err := t.QueryContext(ctx, `SELECT id, text, link, created_at FROM task_prompts WHERE task_id = ? AND read_at = '' ORDER BY id`, taskID)
		if err != nil {
			return err
		}
		for rows.Next() {
			p := model.Prompt{TaskID: taskID}
			var created string
			if err := rows.Scan(&p.ID, &p.Text, &p.Link, &created); err != nil {
				rows.Close()
				return err
			}
			p.CreatedAt, _ = parseTime(created)
			out = append(out, p)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `UPDATE task_prompts SET read_at = ? WHERE task_id = ? AND read_at = ''`, formatTime(t.now), taskID)
		return err
	})
	return out, err
}

// prefixed qualifies a column list with a table alias.
func prefixed(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
