package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/apitoken"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestCredentialFileInsideTheDataDirIsRefused: the data directory holds
// agentctl secrets, so a connection may not name a file in it, directly,
// through "..", or through a symbolic link from outside.
func TestCredentialFileInsideTheDataDirIsRefused(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	broker := &events.Broker{}
	st, err := store.Open(context.Background(), dataDir, store.Options{OnCommit: broker.Publish})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc := service.New(st, broker, service.Options{DataDir: dataDir})
	t.Cleanup(svc.Close)
	ws, err := svc.CreateWorkspace(t.Context(), "acme")
	require.NoError(t, err)

	secret := filepath.Join(dataDir, "sessions", "ses_x", "secret")
	require.NoError(t, os.MkdirAll(filepath.Dir(secret), 0o700))
	require.NoError(t, os.WriteFile(secret, []byte("launch-secret"), 0o600))
	outside := t.TempDir()
	link := filepath.Join(outside, "innocent")
	require.NoError(t, os.Symlink(filepath.Join(dataDir, "sessions"), link))

	for _, ref := range []string{
		secret,
		filepath.Join(dataDir, "toolscope.db"),
		filepath.Join(outside, "..", filepath.Base(filepath.Dir(dataDir)), "data", "sessions", "ses_x", "secret"),
		filepath.Join(link, "ses_x", "secret"),
		filepath.Join(dataDir, "not-yet-there"),
	} {
		_, err := svc.SetConnection(t.Context(), service.ConnectionInput{WorkspaceID: ws.ID, Provider: "github", SkipValidation: true,
			Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: ref}})
		assert.Equal(t, "credential.file_path", errdefs.FieldOf(err), ref)
		if assert.Error(t, err, ref) {
			assert.Contains(t, err.Error(), "data directory")
			assert.NotContains(t, err.Error(), ref, "the reference is not echoed")
		}
	}
	got, err := svc.GetWorkspace(t.Context(), ws.ID)
	require.NoError(t, err)
	assert.Empty(t, got.Connections, "nothing was recorded")

	ok := filepath.Join(outside, "token")
	_, err = svc.SetConnection(t.Context(), service.ConnectionInput{WorkspaceID: ws.ID, Provider: "github", SkipValidation: true,
		Credential: model.CredentialRef{Kind: model.CredentialFile, Ref: ok}})
	assert.NoError(t, err, "a file elsewhere is fine")
}

func TestCreateAPIToken(t *testing.T) {
	svc := newService(t)
	ctx := model.WithActor(t.Context(), model.Actor{Kind: model.ActorPerson, Name: "local:0", Role: model.RoleAdmin})
	tok, secret, err := svc.CreateAPIToken(ctx, "ci", "", 0)
	require.NoError(t, err)
	assert.Regexp(t, apitoken.Pattern, secret)
	assert.Equal(t, model.RoleMember, tok.Role, "member by default")
	assert.Equal(t, "person:local:0", tok.CreatedBy)
	assert.WithinDuration(t, time.Now().Add(service.DefaultTokenTTL), tok.ExpiresAt, time.Minute)

	for _, c := range []struct {
		name  string
		role  model.Role
		ttl   time.Duration
		field string
	}{
		{"", model.RoleMember, 0, "name"},
		{"has space", model.RoleMember, 0, "name"},
		{"local:0", model.RoleAdmin, 0, "name"},
		{"x", "root", 0, "role"},
		{"x", model.RoleViewer, service.MaxTokenTTL + time.Hour, "ttl"},
		{"x", model.RoleViewer, -time.Hour, "ttl"},
		{"x", model.RoleViewer, time.Millisecond, "ttl"},
	} {
		_, _, err := svc.CreateAPIToken(ctx, c.name, c.role, c.ttl)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%+v", c)
	}
	_, _, err = svc.CreateAPIToken(ctx, "ci", model.RoleViewer, time.Hour)
	assert.ErrorIs(t, err, errdefs.ErrAlreadyExists)
	list, err := svc.ListAPITokens(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1)

	_, err = svc.RevokeAPIToken(ctx, "nope")
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	revoked, err := svc.RevokeAPIToken(ctx, tok.ID)
	require.NoError(t, err)
	assert.False(t, revoked.RevokedAt.IsZero())
	_, err = svc.RevokeAPIToken(ctx, "ci")
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
}
