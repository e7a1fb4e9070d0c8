package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

const repoColumns = `r.id, r.workspace_id, r.provider, r.host, r.path, r.remote_url, r.created_at`

// CreateRepository records r (its ID and CreatedAt are assigned) in its
// workspace. A repository with the same host and path (case-insensitive)
// in the workspace is ErrAlreadyExists.
func (s *Store) CreateRepository(ctx context.Context, r model.Repository) (model.Repository, error) {
	r.ID = newID("repo")
	err := s.write(ctx, func(t *tx) error {
		if err := workspaceExists(ctx, t, r.WorkspaceID); err != nil {
			return err
		}
		var existing string
		err := t.QueryRowContext(ctx, `SELECT id FROM repositories WHERE workspace_id = ? AND host = ? AND path = ?`,
			r.WorkspaceID, r.Host, r.Path).Scan(&existing)
		if err == nil {
			return errdefs.AlreadyExists("repository %s/%s is already in workspace %s as %s", r.Host, r.Path, r.WorkspaceID, existing)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		r.CreatedAt = t.now
		_, err = t.ExecContext(ctx, `
			INSERT INTO repositories (id, workspace_id, provider, host, path, remote_url, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.WorkspaceID, r.Provider, r.Host, r.Path, r.RemoteURL, formatTime(t.now))
		return err
	})
	return r, err
}

// GetRepository returns one repository.
func (s *Store) GetRepository(ctx context.Context, id string) (model.Repository, error) {
	r, err := scanRepository(s.r.QueryRowContext(ctx, `SELECT `+repoColumns+` FROM repositories r WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, errdefs.NotFound("repository", id)
	}
	return r, err
}

// ListRepositories returns a workspace's repositories, oldest first; with
// model.Every, every workspace's.
func (s *Store) ListRepositories(ctx context.Context, workspaceID string) ([]model.Repository, error) {
	return s.ListRepositoriesPage(ctx, workspaceID, Page{})
}

// ListRepositoriesPage returns the page p of ListRepositories.
func (s *Store) ListRepositoriesPage(ctx context.Context, workspaceID string, p Page) (out []model.Repository, err error) {
	err = s.read(ctx, func(q queryer) error {
		owner, args := `r.workspace_id = ?`, []any{workspaceID}
		if workspaceID == model.Every {
			owner, args = ``, nil
		} else if err := workspaceExists(ctx, q, workspaceID); err != nil {
			return err
		}
		after, afterArgs := p.where(`r.`)
		rows, err := q.QueryContext(ctx,
			`SELECT `+repoColumns+` FROM repositories r`+and(owner, after)+` ORDER BY r.created_at, r.id`+p.limit(),
			append(args, afterArgs...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRepository(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

func scanRepository(sc scanner, extra ...any) (model.Repository, error) {
	var (
		r       model.Repository
		created string
	)
	dest := append([]any{&r.ID, &r.WorkspaceID, &r.Provider, &r.Host, &r.Path, &r.RemoteURL, &created}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	var err error
	r.CreatedAt, err = parseTime(created)
	return r, err
}
