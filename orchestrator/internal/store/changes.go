package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

const changeColumns = `task_id, repository_id, provider, number, url, title, source_branch, target_branch,
	auto_merge, prompt_review_requested, prompt_merged, prompt_closed, auto_fix_checks, created_at, updated_at`

// RecordChangeRequest records the change request a task opened on one of
// its repositories. A task has at most one per repository.
func (s *Store) RecordChangeRequest(ctx context.Context, cr model.ChangeRequest) (model.ChangeRequest, error) {
	err := s.write(ctx, func(t *tx) error {
		cr.CreatedAt, cr.UpdatedAt = t.now, t.now
		a := cr.Automation
		_, err := t.ExecContext(ctx, `INSERT INTO task_change_requests (`+changeColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			cr.TaskID, cr.RepositoryID, string(cr.Provider), cr.Number, cr.URL, cr.Title, cr.SourceBranch, cr.TargetBranch,
			a.AutoMerge, a.PromptOnReviewRequested, a.PromptOnMerged, a.PromptOnClosed, a.AutoFixChecks,
			formatTime(t.now), formatTime(t.now))
		if isUnique(err) {
			return errdefs.AlreadyExists("task %q already has a change request on repository %q", cr.TaskID, cr.RepositoryID)
		}
		return err
	})
	return cr, err
}

// ChangeRequest returns the change request of a task on a repository.
func (s *Store) ChangeRequest(ctx context.Context, taskID, repoID string) (model.ChangeRequest, error) {
	cr, err := scanChange(s.r.QueryRowContext(ctx, `SELECT `+changeColumns+` FROM task_change_requests
		WHERE task_id = ? AND repository_id = ?`, taskID, repoID))
	if errors.Is(err, sql.ErrNoRows) {
		return cr, fmt.Errorf("task %q has no change request on repository %q: %w", taskID, repoID, errdefs.ErrNotFound)
	}
	return cr, err
}

// UpdateAutomation changes a change request's automation settings.
func (s *Store) UpdateAutomation(ctx context.Context, taskID, repoID string, fn func(*model.Automation)) (model.ChangeRequest, error) {
	var cr model.ChangeRequest
	err := s.write(ctx, func(t *tx) error {
		var err error
		cr, err = scanChange(t.QueryRowContext(ctx, `SELECT `+changeColumns+` FROM task_change_requests
			WHERE task_id = ? AND repository_id = ?`, taskID, repoID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("task %q has no change request on repository %q: %w", taskID, repoID, errdefs.ErrNotFound)
		} else if err != nil {
			return err
		}
		fn(&cr.Automation)
		cr.UpdatedAt = t.now
		a := cr.Automation
		_, err = t.ExecContext(ctx, `UPDATE task_change_requests SET auto_merge = ?, prompt_review_requested = ?,
			prompt_merged = ?, prompt_closed = ?, auto_fix_checks = ?, updated_at = ? WHERE task_id = ? AND repository_id = ?`,
			a.AutoMerge, a.PromptOnReviewRequested, a.PromptOnMerged, a.PromptOnClosed, a.AutoFixChecks, formatTime(t.now),
			taskID, repoID)
		return err
	})
	return cr, err
}

func scanChange(sc scanner, extra ...any) (model.ChangeRequest, error) {
	var (
		cr               model.ChangeRequest
		provider         string
		created, updated string
	)
	a := &cr.Automation
	dest := append([]any{&cr.TaskID, &cr.RepositoryID, &provider, &cr.Number, &cr.URL, &cr.Title, &cr.SourceBranch, &cr.TargetBranch,
		&a.AutoMerge, &a.PromptOnReviewRequested, &a.PromptOnMerged, &a.PromptOnClosed, &a.AutoFixChecks, &created, &updated}, extra...)
	err := sc.Scan(dest...)
	if err != nil {
		return cr, err
	}
	cr.Provider = providers.Provider(provider)
	if cr.CreatedAt, err = parseTime(created); err != nil {
		return cr, err
	}
	cr.UpdatedAt, err = parseTime(updated)
	return cr, err
}
