package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// catalogWorld is a service with real connections to real providers, an
// orchestrator environment of its own, and a count of change hook calls.
type catalogWorld struct {
	svc     *service.Service
	st      *store.Store
	env     map[string]string
	logs    *testutil.SyncBuffer
	changes atomic.Int64
	ws      model.Workspace
}

func newCatalogWorld(t *testing.T, withPool bool) *catalogWorld {
	t.Helper()
	w := &catalogWorld{env: map[string]string{}, logs: &testutil.SyncBuffer{}}
	broker := &events.Broker{}
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	w.st, err = store.Open(context.Background(), t.TempDir(), store.Options{OnCommit: broker.Publish, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.st.Close() })
	env := func(name string) (string, bool) { v, ok := w.env[name]; return v, ok }
	opts := service.Options{Logger: log, Connections: connections.New(w.st, connections.Options{Credentials: credentials.Resolver{Env: env}}),
		OnCatalogChange: func(context.Context) { w.changes.Add(1) }}
	if withPool {
		pool := catalog.New(catalog.Options{Credentials: credentials.Resolver{Env: env}, WorkDir: t.TempDir(),
			Timeout: 10 * time.Second, TerminateTimeout: 500 * time.Millisecond, Logger: log})
		t.Cleanup(func() { _ = pool.Close() })
		opts.Catalog = pool
	}
	w.svc = service.New(w.st, broker, opts)
	t.Cleanup(w.svc.Close)
	w.ws, err = w.svc.CreateWorkspace(context.Background(), "acme")
	require.NoError(t, err)
	return w
}

func (w *catalogWorld) generation(t *testing.T) uint64 {
	t.Helper()
	g, err := w.st.CatalogGeneration(context.Background())
	require.NoError(t, err)
	return g
}

func (w *catalogWorld) tools(t *testing.T) map[string]model.CatalogTool {
	t.Helper()
	list, err := w.svc.ListCatalogTools(context.Background(), "")
	require.NoError(t, err)
	out := map[string]model.CatalogTool{}
	for _, ct := range list {
		out[ct.ExternalName] = ct
	}
	return out
}

func spec(name, description, schema string) catalogtest.ToolSpec {
	return catalogtest.ToolSpec{Name: name, Description: description, InputSchema: json.RawMessage(schema)}
}

const (
	objQ      = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
	objQOrder = `{"required":["q"],"properties":{"q":{"type":"string"}},"type":"object"}`
	objID     = `{"type":"object","properties":{"id":{"type":"integer"}}}`
)

// discoveryRounds drives a provider whose tool list setTools replaces
// through rounds of changes, checking the counts, enablement, availability
// and that the change hook ran exactly when the generation moved.
func discoveryRounds(t *testing.T, w *catalogWorld, prov model.MCPServer, setTools func(...catalogtest.ToolSpec)) {
	t.Helper()
	ctx := context.Background()
	setTools(spec("search", "find documents", objQ), spec("fetch", "fetch one", objID),
		catalogtest.ToolSpec{Name: "stats", Title: "Statistics", Description: "count", ReadOnly: true,
			InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)})
	created, counts, err := w.svc.CreateMCPServer(ctx, prov)
	require.NoError(t, err)
	assert.Empty(t, created.DiscoveryError)
	assert.False(t, created.Enabled, "a new provider is disabled")
	assert.False(t, created.DiscoveredAt.IsZero())
	assert.Equal(t, model.DiscoveryCounts{New: 3, Total: 3}, counts)
	for name, ct := range w.tools(t) {
		assert.False(t, ct.Enabled, "new tools are disabled: %s", name)
		assert.True(t, ct.Available, name)
		assert.Equal(t, "docs__"+name, ct.ExposedName)
	}
	stats := w.tools(t)["stats"]
	assert.Equal(t, "Statistics", stats.Title)
	assert.True(t, stats.ReadOnly)
	assert.JSONEq(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`, string(stats.OutputSchema))
	assert.Equal(t, catalog.SchemaHash(stats.InputSchema, stats.OutputSchema), stats.SchemaHash)

	// The administrator enables the provider and two tools, and assigns one.
	_, err = w.svc.SetMCPServerEnabled(ctx, "docs", true)
	require.NoError(t, err)
	for _, name := range []string{"docs__search", "docs__stats"} {
		_, err = w.svc.SetCatalogToolEnabled(ctx, name, true)
		require.NoError(t, err)
	}
	_, err = w.svc.AssignCatalogTool(ctx, "docs__search", w.ws.ID, true)
	require.NoError(t, err)

	rounds := []struct {
		name   string
		tools  []catalogtest.ToolSpec
		counts model.DiscoveryCounts
	}{
		{"nothing changed", []catalogtest.ToolSpec{spec("search", "find documents", objQ), spec("fetch", "fetch one", objID),
			catalogtest.ToolSpec{Name: "stats", Title: "Statistics", Description: "count", ReadOnly: true,
				InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"properties":{"n":{"type":"integer"}},"type":"object"}`)}},
			model.DiscoveryCounts{Unchanged: 3, Total: 3}},
		{"key order only", []catalogtest.ToolSpec{spec("search", "find documents", objQOrder), spec("fetch", "fetch one", objID),
			catalogtest.ToolSpec{Name: "stats", Title: "Statistics", Description: "count", ReadOnly: true,
				InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
			model.DiscoveryCounts{Unchanged: 3, Total: 3}},
		{"description and schema changed, stats removed, index added", []catalogtest.ToolSpec{
			spec("search", "find documents by text", objQ), spec("fetch", "fetch one", objQ), spec("index", "index one", objID)},
			model.DiscoveryCounts{New: 1, Changed: 2, Unavailable: 1, Total: 3}},
		{"stats still gone", []catalogtest.ToolSpec{
			spec("search", "find documents by text", objQ), spec("fetch", "fetch one", objQ), spec("index", "index one", objID)},
			model.DiscoveryCounts{Unchanged: 3, Total: 3}},
		{"stats restored, search removed", []catalogtest.ToolSpec{spec("fetch", "fetch one", objQ), spec("index", "index one", objID),
			catalogtest.ToolSpec{Name: "stats", Title: "Statistics", Description: "count", ReadOnly: true,
				InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
			model.DiscoveryCounts{Unchanged: 2, Unavailable: 1, Restored: 1, Total: 3}},
		{"everything back", []catalogtest.ToolSpec{spec("search", "find documents by text", objQ), spec("fetch", "fetch one", objQ),
			spec("index", "index one", objID), catalogtest.ToolSpec{Name: "stats", Title: "Statistics", Description: "count", ReadOnly: true,
				InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
			model.DiscoveryCounts{Unchanged: 3, Restored: 1, Total: 4}},
	}
	for _, r := range rounds {
		setTools(r.tools...)
		genBefore, hooksBefore := w.generation(t), w.changes.Load()
		p, counts, err := w.svc.RefreshMCPServer(ctx, "docs")
		require.NoError(t, err, r.name)
		assert.Equal(t, r.counts, counts, r.name)
		assert.Empty(t, p.DiscoveryError, r.name)
		bumped := w.generation(t) - genBefore
		assert.Equal(t, int64(bumped), w.changes.Load()-hooksBefore, "one hook call per generation bump: %s", r.name)
		assert.Equal(t, counts.AffectsSessions(), bumped == 1, r.name)

		tools := w.tools(t)
		assert.True(t, tools["search"].Enabled, "enablement survives refresh (%s)", r.name)
		assert.True(t, tools["stats"].Enabled, "enablement survives refresh and unavailability (%s)", r.name)
		assert.False(t, tools["fetch"].Enabled, r.name)
		assert.Equal(t, []string{w.ws.ID}, tools["search"].WorkspaceIDs, "assignments survive (%s)", r.name)
		for _, spec := range r.tools {
			assert.True(t, tools[spec.Name].Available, "%s listed in %s", spec.Name, r.name)
		}
	}
	tools := w.tools(t)
	assert.False(t, tools["index"].Enabled, "a tool added later is disabled too")
	assert.Equal(t, "find documents by text", tools["search"].Description)

	// Test changes nothing: not the catalog, not the provider, not the
	// generation.
	setTools(spec("brand-new", "x", `{"type":"object"}`))
	before, gen := w.tools(t), w.generation(t)
	provBefore, err := w.svc.GetMCPServer(ctx, "docs")
	require.NoError(t, err)
	res, err := w.svc.TestMCPServer(ctx, "docs")
	require.NoError(t, err)
	assert.Equal(t, []string{"brand-new"}, res.ToolNames)
	assert.NotEmpty(t, res.ServerName)
	assert.Equal(t, before, w.tools(t))
	assert.Equal(t, gen, w.generation(t))
	provAfter, err := w.svc.GetMCPServer(ctx, "docs")
	require.NoError(t, err)
	assert.Equal(t, provBefore, provAfter)
}

func TestDiscoveryRoundsOverStdio(t *testing.T) {
	t.Parallel()
	w := newCatalogWorld(t, true)
	files := catalogtest.NewStdioFiles(t)
	w.env["DOCS_TOOLS"], w.env["DOCS_STARTS"], w.env["DOCS_PAGE"] = files.ToolsFile, files.StartsFile, "2"
	prov := model.MCPServer{Name: "docs", Stdio: &model.StdioTransport{
		Command: catalogtest.StdioServer(t), Env: []model.EnvReference{
			{Name: "TOOLS_FILE", FromEnv: "DOCS_TOOLS"}, {Name: "STARTS_FILE", FromEnv: "DOCS_STARTS"}, {Name: "PAGE_SIZE", FromEnv: "DOCS_PAGE"},
		},
	}}
	discoveryRounds(t, w, prov, func(specs ...catalogtest.ToolSpec) { files.SetTools(t, specs...) })
	// Seven discoveries and a test: two processes, the pooled one and the
	// test's own.
	assert.Len(t, files.Starts(t), 2)
}

func TestDiscoveryRoundsOverHTTP(t *testing.T) {
	t.Parallel()
	w := newCatalogWorld(t, true)
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{PageSize: 2})
	prov := model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: srv.URL}}
	discoveryRounds(t, w, prov, srv.SetTools)
}

func TestFailedDiscoveryIsRecordedAndKeepsTheCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newCatalogWorld(t, true)
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	srv.SetTools(spec("search", "find", objQ), spec("fetch", "fetch", objID))
	_, counts, err := w.svc.CreateMCPServer(ctx, model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: srv.URL}})
	require.NoError(t, err)
	require.Equal(t, 2, counts.New)
	_, err = w.svc.SetCatalogToolEnabled(ctx, "docs__search", true)
	require.NoError(t, err)
	before, gen := w.tools(t), w.generation(t)

	srv.Close() // the server is gone
	p, _, err := w.svc.RefreshMCPServer(ctx, "docs")
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.NotEmpty(t, p.DiscoveryError)
	got, err := w.svc.GetMCPServer(ctx, "docs")
	require.NoError(t, err)
	assert.Equal(t, err == nil, true)
	assert.Equal(t, p.DiscoveryError, got.DiscoveryError)
	assert.Equal(t, before, w.tools(t), "the catalog is kept")
	assert.Equal(t, gen, w.generation(t))

	// A provider whose server cannot start is recorded, with why.
	p, counts, err = w.svc.CreateMCPServer(ctx, model.MCPServer{Name: "broken", Stdio: &model.StdioTransport{
		Command: catalogtest.StdioServer(t), Env: []model.EnvReference{{Name: "TOOLS_FILE", FromEnv: "BROKEN_TOOLS"}},
	}})
	require.NoError(t, err, "a failed first discovery does not refuse the provider")
	assert.Zero(t, counts)
	assert.Contains(t, p.DiscoveryError, "environment variable BROKEN_TOOLS (the server's TOOLS_FILE) is not set")
	assert.True(t, p.DiscoveredAt.IsZero())

	// Fixing it and updating the provider discovers its tools.
	files := catalogtest.NewStdioFiles(t)
	files.SetTools(t, spec("lookup", "look up", objQ))
	w.env["BROKEN_TOOLS"] = files.ToolsFile
	p, counts, err = w.svc.UpdateMCPServer(ctx, model.MCPServer{ID: "broken", Stdio: p.Stdio})
	require.NoError(t, err)
	assert.Empty(t, p.DiscoveryError)
	assert.Equal(t, model.DiscoveryCounts{New: 1, Total: 1}, counts)

	// Without connections, discovery fails as such.
	bare := newCatalogWorld(t, false)
	p, _, err = bare.svc.CreateMCPServer(ctx, model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: "http://127.0.0.1:9/mcp"}})
	require.NoError(t, err)
	assert.Contains(t, p.DiscoveryError, "does not connect to MCP servers")
	_, err = bare.svc.TestMCPServer(ctx, "docs")
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
}

func TestCatalogChangesCallTheHookOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newCatalogWorld(t, true)
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	srv.SetTools(spec("search", "find", objQ))
	_, _, err := w.svc.CreateMCPServer(ctx, model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: srv.URL}})
	require.NoError(t, err)
	assert.Zero(t, w.changes.Load(), "new tools are disabled: no session can see a change")

	steps := []struct {
		name string
		do   func() error
		hook bool
	}{
		{"enable provider", func() error { _, err := w.svc.SetMCPServerEnabled(ctx, "docs", true); return err }, true},
		{"enable it again", func() error { _, err := w.svc.SetMCPServerEnabled(ctx, "docs", true); return err }, false},
		{"enable tool", func() error { _, err := w.svc.SetCatalogToolEnabled(ctx, "docs__search", true); return err }, true},
		{"assign", func() error { _, err := w.svc.AssignCatalogTool(ctx, "docs__search", w.ws.ID, true); return err }, true},
		{"assign again", func() error { _, err := w.svc.AssignCatalogTool(ctx, "docs__search", w.ws.ID, true); return err }, false},
		{"assign to no workspace", func() error { _, err := w.svc.AssignCatalogTool(ctx, "docs__search", "ws_nope", true); return err }, false},
		{"unassign", func() error { _, err := w.svc.AssignCatalogTool(ctx, "docs__search", w.ws.ID, false); return err }, true},
		{"disable tool", func() error { _, err := w.svc.SetCatalogToolEnabled(ctx, "docs__search", false); return err }, true},
		{"refresh, nothing new", func() error { _, _, err := w.svc.RefreshMCPServer(ctx, "docs"); return err }, false},
		{"disable provider", func() error { _, err := w.svc.SetMCPServerEnabled(ctx, "docs", false); return err }, true},
	}
	for _, s := range steps {
		before := w.changes.Load()
		err := s.do()
		if s.name == "assign to no workspace" {
			assert.ErrorIs(t, err, errdefs.ErrNotFound)
		} else {
			require.NoError(t, err, s.name)
		}
		want := int64(0)
		if s.hook {
			want = 1
		}
		assert.Equal(t, want, w.changes.Load()-before, s.name)
	}
}

func TestMCPServerRequestsNameTheFieldAndNeverEchoSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newCatalogWorld(t, false)
	exe := catalogtest.StdioServer(t)
	notExec := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))
	token := "ghp_" + strings.Repeat("A", 36)
	stdio := func(mod func(*model.StdioTransport)) model.MCPServer {
		s := &model.StdioTransport{Command: exe}
		mod(s)
		return model.MCPServer{Name: "docs", Stdio: s}
	}
	httpP := func(url string, headers ...model.HeaderReference) model.MCPServer {
		return model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: url, Headers: headers}}
	}
	envRef := func(name string) model.CredentialRef {
		return model.CredentialRef{Kind: model.CredentialEnv, Ref: name}
	}
	cases := []struct {
		field string
		in    model.MCPServer
	}{
		{"server.name", model.MCPServer{Name: "", HTTP: &model.HTTPTransport{URL: "https://x.example/mcp"}}},
		{"server.name", model.MCPServer{Name: "Docs", HTTP: &model.HTTPTransport{URL: "https://x.example/mcp"}}},
		{"server.name", model.MCPServer{Name: "my_docs", HTTP: &model.HTTPTransport{URL: "https://x.example/mcp"}}},
		{"server.name", model.MCPServer{Name: strings.Repeat("d", 33), HTTP: &model.HTTPTransport{URL: "https://x.example/mcp"}}},
		{"server.transport", model.MCPServer{Name: "docs"}},
		{"server.transport", model.MCPServer{Name: "docs", Stdio: &model.StdioTransport{Command: exe},
			HTTP: &model.HTTPTransport{URL: "https://x.example/mcp"}}},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = "" })},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = "docs-mcp" })},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = "/nonexistent/docs-mcp" })},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = notExec })},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = filepath.Dir(exe) })},
		{"server.stdio.command", stdio(func(s *model.StdioTransport) { s.Command = "/bin/" + token })},
		{"server.stdio.args[1]", stdio(func(s *model.StdioTransport) { s.Args = []string{"--stdio", "--token=" + token} })},
		{"server.stdio.args[0]", stdio(func(s *model.StdioTransport) { s.Args = []string{"a\x00b"} })},
		{"server.stdio.working_dir", stdio(func(s *model.StdioTransport) { s.WorkingDir = "relative" })},
		{"server.stdio.working_dir", stdio(func(s *model.StdioTransport) { s.WorkingDir = exe })},
		{"server.stdio.env[0].name", stdio(func(s *model.StdioTransport) { s.Env = []model.EnvReference{{Name: "1BAD", FromEnv: "X"}} })},
		{"server.stdio.env[1].name", stdio(func(s *model.StdioTransport) {
			s.Env = []model.EnvReference{{Name: "KEY", FromEnv: "A"}, {Name: "KEY", FromEnv: "B"}}
		})},
		{"server.stdio.env[0].from_env", stdio(func(s *model.StdioTransport) { s.Env = []model.EnvReference{{Name: "KEY", FromEnv: token}} })},
		{"server.stdio.env[0].from_env", stdio(func(s *model.StdioTransport) { s.Env = []model.EnvReference{{Name: "KEY", FromEnv: "a-b"}} })},
		{"server.stdio.env[0].from_env", stdio(func(s *model.StdioTransport) { s.Env = []model.EnvReference{{Name: "KEY"}} })},
		{"server.http.url", httpP("")},
		{"server.http.url", httpP("ftp://x.example/mcp")},
		{"server.http.url", httpP("/mcp")},
		{"server.http.url", httpP("https://user:" + token + "@x.example/mcp")},
		{"server.http.url", httpP("https://" + token + "@x.example/mcp")},
		{"server.http.url", httpP("https://x.example/mcp?key=" + token)},
		{"server.http.url", httpP("https://x.example/mcp#" + token)},
		{"server.http.url", httpP("https://x.example/" + token)},
		{"server.http.headers[0].name", httpP("https://x.example/mcp", model.HeaderReference{Name: "Bad Header", Value: envRef("T")})},
		{"server.http.headers[0].name", httpP("https://x.example/mcp", model.HeaderReference{Name: "mcp-session-id", Value: envRef("T")})},
		{"server.http.headers[1].name", httpP("https://x.example/mcp", model.HeaderReference{Name: "X-Key", Value: envRef("A")},
			model.HeaderReference{Name: "x-key", Value: envRef("B")})},
		{"server.http.headers[0].value", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization"})},
		{"server.http.headers[0].value.env_var", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization", Value: envRef(token)})},
		{"server.http.headers[0].value.env_var", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization", Value: envRef("A B")})},
		{"server.http.headers[0].value.file_path", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization",
			Value: model.CredentialRef{Kind: model.CredentialFile, Ref: "token.txt"}})},
		{"server.http.headers[0].prefix", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization",
			Prefix: "Bearer " + token, Value: envRef("T")})},
		{"server.http.headers[0].prefix", httpP("https://x.example/mcp", model.HeaderReference{Name: "Authorization",
			Prefix: "Bearer\r\nX: y", Value: envRef("T")})},
	}
	for _, c := range cases {
		_, _, err := w.svc.CreateMCPServer(ctx, c.in)
		require.Error(t, err, c.field)
		assert.ErrorIs(t, err, errdefs.ErrInvalidArgument, c.field)
		assert.Equal(t, c.field, errdefs.FieldOf(err), "%v", err)
		assert.NotContains(t, err.Error(), token, "the error echoes a secret: %v", err)
	}
	list, err := w.svc.ListMCPServers(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "nothing invalid was recorded")

	// Valid ones, normalized.
	p, _, err := w.svc.CreateMCPServer(ctx, httpP("https://x.example/mcp", model.HeaderReference{Name: "authorization", Prefix: "Bearer ",
		Value: envRef("DOCS_TOKEN")}))
	require.NoError(t, err)
	assert.Equal(t, model.TransportHTTP, p.Transport)
	assert.Equal(t, "Authorization", p.HTTP.Headers[0].Name)
	_, _, err = w.svc.CreateMCPServer(ctx, httpP("https://x.example/mcp"))
	assert.ErrorIs(t, err, errdefs.ErrAlreadyExists)
	_, _, err = w.svc.UpdateMCPServer(ctx, model.MCPServer{ID: "docs", Name: "other", HTTP: &model.HTTPTransport{URL: "https://y.example/mcp"}})
	assert.Equal(t, "server.name", errdefs.FieldOf(err))
	_, _, err = w.svc.UpdateMCPServer(ctx, model.MCPServer{HTTP: &model.HTTPTransport{URL: "https://y.example/mcp"}})
	assert.Equal(t, "server.id", errdefs.FieldOf(err))
	_, _, err = w.svc.UpdateMCPServer(ctx, model.MCPServer{ID: "nope", HTTP: &model.HTTPTransport{URL: "https://y.example/mcp"}})
	assert.ErrorIs(t, err, errdefs.ErrNotFound)
	for field, call := range map[string]func() error{
		"server": func() error { _, err := w.svc.GetMCPServer(ctx, " "); return err },
		"tool":   func() error { _, err := w.svc.SetCatalogToolEnabled(ctx, "", true); return err },
		"workspace_id": func() error {
			_, err := w.svc.AssignCatalogTool(ctx, "docs__x", "", true)
			return err
		},
	} {
		assert.Equal(t, field, errdefs.FieldOf(call()))
	}
}

func TestProviderSecretsNeverAppearInRecordsErrorsOrLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newCatalogWorld(t, true)
	httpSecret := "hs-" + strings.Repeat("h", 30)
	stdioSecret := "ss-" + strings.Repeat("s", 30)
	w.env["DOCS_TOKEN"], w.env["STDIO_SECRET"] = httpSecret, stdioSecret

	// Careless servers put their secrets in what they list.
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{Header: "Authorization", Value: "Bearer " + httpSecret})
	srv.SetTools(spec("search", "uses "+httpSecret, objQ))
	files := catalogtest.NewStdioFiles(t)
	files.SetTools(t, spec("lookup", "uses "+stdioSecret, `{"type":"object","properties":{"k":{"default":"`+stdioSecret+`"}}}`))
	w.env["T_TOOLS"], w.env["T_STARTS"] = files.ToolsFile, files.StartsFile

	var out bytes.Buffer
	record := func(v any, err error) {
		b, jerr := json.Marshal(v)
		require.NoError(t, jerr)
		out.Write(b)
		if err != nil {
			out.WriteString(err.Error())
		}
	}
	record3 := func(p model.MCPServer, c model.DiscoveryCounts, err error) {
		record(struct {
			P model.MCPServer
			C model.DiscoveryCounts
		}{p, c}, err)
	}
	hp, counts, err := w.svc.CreateMCPServer(ctx, model.MCPServer{Name: "docs", HTTP: &model.HTTPTransport{URL: srv.URL,
		Headers: []model.HeaderReference{{Name: "Authorization", Prefix: "Bearer ", Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "DOCS_TOKEN"}}}}})
	require.NoError(t, err)
	require.Equal(t, 1, counts.New, hp.DiscoveryError)
	record(hp, err)
	sp, counts, err := w.svc.CreateMCPServer(ctx, model.MCPServer{Name: "kb", Stdio: &model.StdioTransport{Command: catalogtest.StdioServer(t),
		Env: []model.EnvReference{{Name: "TOOLS_FILE", FromEnv: "T_TOOLS"}, {Name: "STARTS_FILE", FromEnv: "T_STARTS"},
			{Name: "SECRET", FromEnv: "STDIO_SECRET"}}}})
	require.NoError(t, err)
	require.Equal(t, 1, counts.New, sp.DiscoveryError)
	record(sp, err)
	record(w.svc.ListMCPServers(ctx))
	record(w.svc.ListCatalogTools(ctx, ""))
	record(w.svc.TestMCPServer(ctx, "docs"))
	record(w.svc.TestMCPServer(ctx, "kb"))

	// Failures: a wrong secret, and a server that is gone.
	w.env["DOCS_TOKEN"] = "wrong-" + httpSecret
	record3(w.svc.RefreshMCPServer(ctx, "docs"))
	record(w.svc.TestMCPServer(ctx, "docs"))
	w.env["DOCS_TOKEN"] = httpSecret
	srv.Close()
	record3(w.svc.RefreshMCPServer(ctx, "docs"))
	record(w.svc.GetMCPServer(ctx, "docs"))

	tools := w.tools(t)
	assert.Equal(t, "uses [redacted]", tools["search"].Description)
	assert.Equal(t, "uses [redacted]", tools["lookup"].Description)
	for _, s := range []string{httpSecret, stdioSecret} {
		assert.NotContains(t, out.String(), s)
		assert.NotContains(t, w.logs.String(), s)
		assert.NotContains(t, out.String(), s[:12])
	}
	// The store file holds references only.
	db, err := os.ReadFile(w.st.Path())
	require.NoError(t, err)
	wal, _ := os.ReadFile(w.st.Path() + "-wal")
	for _, s := range []string{httpSecret, stdioSecret} {
		assert.NotContains(t, string(db), s)
		assert.NotContains(t, string(wal), s)
	}
	assert.Contains(t, out.String(), "DOCS_TOKEN", "references are shown")
}
