package store

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestSourcePolicyMigrationKeepsExistingBehaviour: a database from before
// migration 00008 upgrades with every workspace on the allow policy and
// its events without an actor; the migration also goes down cleanly.
func TestSourcePolicyMigrationKeepsExistingBehaviour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	src, err := fs.Sub(migrations, "migrations")
	require.NoError(t, err)
	provider := func(db *sql.DB) *goose.Provider {
		p, err := goose.NewProvider(goose.DialectSQLite3, db, src, goose.WithDisableGlobalRegistry(true))
		require.NoError(t, err)
		return p
	}

	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName), false))
	require.NoError(t, err)
	_, err = provider(db).UpTo(ctx, 6)
	require.NoError(t, err)
	for _, stmt := range []string{
		`INSERT INTO workspaces (id, name, created_at) VALUES ('ws_old', 'old', '2026-01-01T00:00:00Z')`,
		`INSERT INTO repositories (id, workspace_id, provider, host, path, remote_url, created_at)
			VALUES ('repo_old', 'ws_old', 'github', 'github.com', 'acme/api', '', '2026-01-01T00:00:00Z')`,
		`INSERT INTO tasks (id, workspace_id, title, description, provider_generation, created_at, updated_at)
			VALUES ('task_old', 'ws_old', 't', '', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
		`INSERT INTO task_repositories (task_id, repository_id, position, is_primary) VALUES ('task_old', 'repo_old', 0, 1)`,
		`INSERT INTO task_events (task_id, kind, message, created_at) VALUES ('task_old', 'sources.added', 'old batch', '2026-01-01T00:00:00Z')`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())

	st, err := Open(ctx, dir, Options{})
	require.NoError(t, err)
	ws, err := st.GetWorkspace(ctx, "ws_old")
	require.NoError(t, err)
	assert.Equal(t, model.SourcePolicyAllow, ws.AgentSources)
	evs, err := st.Events(ctx, "task_old", 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, model.Actor{}, evs[0].Actor)
	_, err = st.SetSourcePolicy(ctx, "ws_old", model.SourcePolicyApprove, model.Actor{Kind: model.ActorPerson, Name: "p"})
	require.NoError(t, err)
	_, err = st.w.ExecContext(ctx, `UPDATE workspaces SET agent_sources = 'sometimes' WHERE id = 'ws_old'`)
	assert.Error(t, err, "the schema admits only the three policies")

	_, err = provider(st.w.DB).DownTo(ctx, 6)
	require.NoError(t, err)
	require.NoError(t, st.Close())
}
