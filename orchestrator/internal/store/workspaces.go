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

// CreateWorkspace records a new workspace named name.
func (s *Store) CreateWorkspace(ctx context.Context, name string) (model.Workspace, error) {
	ws := model.Workspace{ID: newID("ws"), Name: name, AgentSources: model.SourcePolicyAllow}
	err := s.write(ctx, func(t *tx) error {
		ws.CreatedAt = t.now
		_, err := t.ExecContext(ctx, `INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)`,
			ws.ID, ws.Name, formatTime(t.now))
		if isUnique(err) {
			return errdefs.AlreadyExists("workspace named %q", name)
		}
		return err
	})
	return ws, err
}

// GetWorkspace returns a workspace with its connections.
func (s *Store) GetWorkspace(ctx context.Context, id string) (ws model.Workspace, err error) {
	err = s.read(ctx, func(q queryer) error {
		ws, err = scanWorkspace(q.QueryRowContext(ctx, `SELECT id, name, agent_sources, created_at FROM workspaces WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return errdefs.NotFound("workspace", id)
		} else if err != nil {
			return err
		}
		conns, err := connections(ctx, q, id)
		ws.Connections = conns[id]
		return err
	})
	return ws, err
}

// ListWorkspaces returns every workspace, oldest first.
func (s *Store) ListWorkspaces(ctx context.Context) ([]model.Workspace, error) {
	return s.ListWorkspacesPage(ctx, Page{})
}

// ListWorkspacesPage returns the page p of ListWorkspaces, each workspace
// with its connections.
func (s *Store) ListWorkspacesPage(ctx context.Context, p Page) (out []model.Workspace, err error) {
	err = s.read(ctx, func(q queryer) error {
		where, args := p.where(``)
		rows, err := q.QueryContext(ctx, `SELECT id, name, agent_sources, created_at FROM workspaces`+and(where)+` ORDER BY created_at, id`+p.limit(), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			ws, err := scanWorkspace(rows)
			if err != nil {
				return err
			}
			out = append(out, ws)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		conns, err := queryConnections(ctx, q, `workspace_id IN (SELECT id FROM workspaces`+and(where)+` ORDER BY created_at, id`+p.limit()+`)`, args...)
		for i := range out {
			out[i].Connections = conns[out[i].ID]
		}
		return err
	})
	return out, err
}

// SetConnection creates or replaces a workspace's connection to
// c.Provider. Replacing a connection clears its validated username unless
// c carries one.
func (s *Store) SetConnection(ctx context.Context, workspaceID string, c model.Connection) (model.Connection, error) {
	err := s.write(ctx, func(t *tx) error {
		if err := workspaceExists(ctx, t, workspaceID); err != nil {
			return err
		}
		_, err := t.ExecContext(ctx, `
			INSERT INTO connections (workspace_id, provider, api_base_url, credential_kind, credential_ref, username, validated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (workspace_id, provider) DO UPDATE SET
				api_base_url = excluded.api_base_url, credential_kind = excluded.credential_kind,
				credential_ref = excluded.credential_ref, username = excluded.username,
				validated_at = excluded.validated_at`,
			workspaceID, string(c.Provider), c.APIBaseURL, string(c.Credential.Kind), c.Credential.Ref,
			c.Username, formatTime(c.ValidatedAt))
		return err
	})
	return c, err
}

// RemoveConnection deletes a workspace's connection to provider.
func (s *Store) RemoveConnection(ctx context.Context, workspaceID string, p providers.Provider) error {
	return s.write(ctx, func(t *tx) error {
		if err := workspaceExists(ctx, t, workspaceID); err != nil {
			return err
		}
		res, err := t.ExecContext(ctx, `DELETE FROM connections WHERE workspace_id = ? AND provider = ?`, workspaceID, string(p))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("workspace %q has no %s connection: %w", workspaceID, p, errdefs.ErrNotFound)
		}
		return nil
	})
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func workspaceExists(ctx context.Context, q queryer, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errdefs.NotFound("workspace", id)
	}
	return err
}

// connections returns the connections of one workspace, or of all when
// workspaceID is "", keyed by workspace id, in canonical provider order.
func connections(ctx context.Context, q queryer, workspaceID string) (map[string][]model.Connection, error) {
	return queryConnections(ctx, q, `CAST(? AS TEXT) = '' OR workspace_id = ?`, workspaceID, workspaceID)
}

// queryConnections returns the connections that meet cond, keyed by
// workspace id, in canonical provider order.
func queryConnections(ctx context.Context, q queryer, cond string, args ...any) (map[string][]model.Connection, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT workspace_id, provider, api_base_url, credential_kind, credential_ref, username, validated_at
		FROM connections WHERE `+cond+` ORDER BY workspace_id, provider`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]model.Connection{}
	for rows.Next() {
		var (
			wsID, provider, kind, validated string
			c                               model.Connection
		)
		if err := rows.Scan(&wsID, &provider, &c.APIBaseURL, &kind, &c.Credential.Ref, &c.Username, &validated); err != nil {
			return nil, err
		}
		c.Provider = providers.Provider(provider)
		c.Credential.Kind = model.CredentialKind(kind)
		if c.ValidatedAt, err = parseTime(validated); err != nil {
			return nil, err
		}
		out[wsID] = append(out[wsID], c)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanWorkspace(sc scanner) (model.Workspace, error) {
	var (
		ws      model.Workspace
		created string
	)
	if err := sc.Scan(&ws.ID, &ws.Name, &ws.AgentSources, &created); err != nil {
		return ws, err
	}
	var err error
	ws.CreatedAt, err = parseTime(created)
	return ws, err
}
