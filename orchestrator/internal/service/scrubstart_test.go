package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestARestartedOrchestratorRedactsCredentialsBeforeTheirFirstUse (issue
// 33, item 10): a GitLab token without a prefix has no shape a scrubber
// could catch; it is redacted because its value is known. A restarted
// orchestrator knew it only once the credential was resolved again, so a
// catalog result echoing it reached the agent unredacted until then. Now
// the orchestrator remembers every credential it holds at its start
// (connections' and MCP servers'), and a connection's at once when it is
// recorded, validated or not.
func TestARestartedOrchestratorRedactsCredentialsBeforeTheirFirstUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const token = "Zq8vT2mK9pL4wX7nR3sB" // 20 characters, no glpat- prefix
	const header = "hdr9Fk2Lm7Qw3Zx8Vb4N"
	env := map[string]string{"GL_TOKEN": token, "DOCS_KEY": header}
	dir := t.TempDir()
	open := func() (*store.Store, *connections.Connections, *service.Service) {
		st, err := store.Open(ctx, dir, store.Options{})
		require.NoError(t, err)
		conns := connections.New(st, connections.Options{Credentials: credentials.Resolver{Env: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		}}})
		svc := service.New(st, &events.Broker{}, service.Options{Connections: conns})
		return st, conns, svc
	}
	echo := "the server said: " + token + " and " + header

	st, conns, svc := open()
	ws, err := svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	_, err = svc.SetConnection(ctx, service.ConnectionInput{WorkspaceID: ws.ID, Provider: "gitlab", APIBaseURL: "https://gitlab.example",
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GL_TOKEN"}, SkipValidation: true})
	require.NoError(t, err)
	assert.NotContains(t, conns.Secrets().Scrubber().String(echo), token, "known once recorded, never used")
	_, err = st.CreateMCPServer(ctx, model.MCPServer{Name: "docs", Transport: model.TransportHTTP, HTTP: &model.HTTPTransport{URL: "https://docs.example/mcp",
		Headers: []model.HeaderReference{{Name: "Authorization", Prefix: "Bearer ", Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "DOCS_KEY"}}}}})
	require.NoError(t, err)
	svc.Close()
	require.NoError(t, st.Close())

	// The restart.
	st, conns, svc = open()
	defer func() { svc.Close(); _ = st.Close() }()
	assert.Contains(t, conns.Secrets().Scrubber().String(echo), token, "control: a new process knows nothing yet")
	require.NoError(t, svc.RememberCredentials(ctx))
	out := conns.Secrets().Scrubber().String(echo)
	assert.NotContains(t, out, token, "the connection's credential, before its first use")
	assert.NotContains(t, out, header, "and the MCP server's")
	assert.NotContains(t, out, token[:8], "not even in part")
}
