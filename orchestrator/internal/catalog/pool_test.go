package catalog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, catalogtest.RemoveBuilds))
}

func TestCanonicalIgnoresKeyOrderAndFormatting(t *testing.T) {
	t.Parallel()
	a, err := catalog.Canonical([]byte(`{"type":"object","properties":{"q":{"type":"string","minLength":1}},"required":["q"]}`))
	require.NoError(t, err)
	b, err := catalog.Canonical([]byte("{\n  \"required\": [\"q\"],\n  \"properties\": {\"q\": {\"minLength\": 1.0, \"type\": \"string\"}},\n  \"type\": \"object\"\n}"))
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
	assert.Equal(t, `{"properties":{"q":{"minLength":1,"type":"string"}},"required":["q"],"type":"object"}`, string(a))
	assert.Equal(t, catalog.SchemaHash(a, nil), catalog.SchemaHash(b, nil))

	// Array order is meaning, not formatting.
	c, err := catalog.Canonical([]byte(`{"type":"object","required":["b","a"]}`))
	require.NoError(t, err)
	d, err := catalog.Canonical([]byte(`{"type":"object","required":["a","b"]}`))
	require.NoError(t, err)
	assert.NotEqual(t, catalog.SchemaHash(c, nil), catalog.SchemaHash(d, nil))
	// The output schema counts, and "none" differs from an empty one.
	assert.NotEqual(t, catalog.SchemaHash(a, nil), catalog.SchemaHash(a, json.RawMessage(`{}`)))
	// HTML characters stay as they are.
	e, err := catalog.Canonical([]byte(`{"description":"a <b> & c"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"description":"a <b> & c"}`, string(e))

	_, err = catalog.Canonical([]byte(`{"type":`))
	assert.Error(t, err)
}

// env is an orchestrator environment for a test: the pool reads
// references from it instead of the process environment.
type env map[string]string

func (e env) lookup(name string) (string, bool) { v, ok := e[name]; return v, ok }

// stdioProvider is a provider of the stdio test server whose references
// point at files and variables of e.
func stdioProvider(t *testing.T, files *catalogtest.StdioFiles, e env, extra ...model.EnvReference) model.MCPServer {
	t.Helper()
	e["T_TOOLS"], e["T_STARTS"], e["T_CALLS"], e["T_PAGE"] = files.ToolsFile, files.StartsFile, files.CallsFile, "2"
	return model.MCPServer{
		ID: "tp_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_")), Name: "docs", Transport: model.TransportStdio,
		Stdio: &model.StdioTransport{
			Command: catalogtest.StdioServer(t), WorkingDir: t.TempDir(),
			Env: append([]model.EnvReference{
				{Name: "TOOLS_FILE", FromEnv: "T_TOOLS"}, {Name: "STARTS_FILE", FromEnv: "T_STARTS"},
				{Name: "CALLS_FILE", FromEnv: "T_CALLS"}, {Name: "PAGE_SIZE", FromEnv: "T_PAGE"},
			}, extra...),
		},
	}
}

func newPool(t *testing.T, e env, opts catalog.Options) *catalog.Pool {
	t.Helper()
	opts.Credentials = credentials.Resolver{Env: e.lookup}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	opts.TerminateTimeout = 500 * time.Millisecond
	p := catalog.New(opts)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func specs(names ...string) []catalogtest.ToolSpec {
	out := make([]catalogtest.ToolSpec, len(names))
	for i, n := range names {
		out[i] = catalogtest.ToolSpec{Name: n, Description: "the " + n + " tool",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	}
	return out
}

func names(tools []model.DiscoveredTool) []string {
	var out []string
	for _, d := range tools {
		out = append(out, d.Name)
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestStdioProviderIsOneProcessReusedUntilClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	secret := "s3cret-" + strings.Repeat("x", 20)
	e := env{"T_SECRET": secret, "UNRELATED": "must-not-reach-the-server"}
	prov := stdioProvider(t, files, e, model.EnvReference{Name: "SECRET", FromEnv: "T_SECRET"})
	pool := newPool(t, e, catalog.Options{})
	files.SetTools(t, specs("search", "fetch", "index", "stats", "purge")...)

	// Five tools at two per page: every page is read.
	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"search", "fetch", "index", "stats", "purge"}, names(tools))
	for i := range 3 {
		res, err := pool.Call(ctx, prov, "search", json.RawMessage(`{"q":"x`+string(rune('0'+i))+`"}`))
		require.NoError(t, err)
		require.False(t, res.IsError)
		assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `search called with {"q":"x`)
	}
	_, err = pool.Discover(ctx, prov)
	require.NoError(t, err)

	starts := files.Starts(t)
	require.Len(t, starts, 1, "one process for every discovery and call")
	assert.Equal(t, []string{"search", "search", "search"}, files.CallNames(t))
	// Its environment is its references plus PATH and HOME, nothing else.
	assert.Equal(t, []string{"CALLS_FILE", "HOME", "PAGE_SIZE", "PATH", "SECRET", "STARTS_FILE", "TOOLS_FILE"}, starts[0].Env)
	sum := sha256.Sum256([]byte(secret))
	assert.Equal(t, hex.EncodeToString(sum[:]), starts[0].SecretSHA256, "the secret reached the server")
	pid := starts[0].PID
	require.True(t, alive(pid))

	require.NoError(t, pool.Close())
	assert.False(t, alive(pid), "Close ends the server process")
	_, err = pool.Discover(ctx, prov)
	assert.ErrorIs(t, err, catalog.ErrClosed)
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
}

func TestStdioConnectionIsReplacedWhenItBreaksOrItsTransportChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	e := env{}
	prov := stdioProvider(t, files, e)
	pool := newPool(t, e, catalog.Options{})
	files.SetTools(t, specs("search")...)

	_, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	first := files.Starts(t)[0].PID
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))

	// The dead process is noticed (or the listing fails and is retried
	// once): a new one answers.
	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	assert.Equal(t, []string{"search"}, names(tools))
	starts := files.Starts(t)
	require.Len(t, starts, 2)
	second := starts[1].PID
	res, err := pool.Call(ctx, prov, "search", nil)
	require.NoError(t, err)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "search called with {} by pid")

	// A new transport (one more argument) gets a new process; the old one
	// is ended.
	prov.Stdio.Args = []string{"--unused"}
	_, err = pool.Discover(ctx, prov)
	require.NoError(t, err)
	starts = files.Starts(t)
	require.Len(t, starts, 3)
	require.Eventually(t, func() bool { return !alive(second) }, time.Minute, 10*time.Millisecond,
		"the replaced connection's process is ended")
	assert.True(t, alive(starts[2].PID))
}

func TestStdioFailuresAreClassifiedAndNameTheReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	e := env{}
	// Generous, so that a loaded machine's slow start never passes for a
	// server that does not answer; the never-answering one gets its own.
	pool := newPool(t, e, catalog.Options{Timeout: time.Minute})

	// A reference to a variable the orchestrator does not have.
	prov := stdioProvider(t, files, e, model.EnvReference{Name: "API_KEY", FromEnv: "DOCS_API_KEY"})
	_, err := pool.Discover(ctx, prov)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "environment variable DOCS_API_KEY (the server's API_KEY) is not set")

	// A program that is not there.
	prov = stdioProvider(t, files, e)
	prov.Stdio.Command = filepath.Join(t.TempDir(), "gone")
	_, err = pool.Discover(ctx, prov)
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), `MCP server "docs": connect`)

	// A server that exits at once says why on stderr: the error carries it.
	prov = stdioProvider(t, files, e)
	prov.Stdio.Env = prov.Stdio.Env[1:] // no TOOLS_FILE
	_, err = pool.Discover(ctx, prov)
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), "TOOLS_FILE is not set")

	// A program that never answers is bounded by the timeout.
	start := time.Now()
	_, err = newPool(t, e, catalog.Options{Timeout: 500 * time.Millisecond}).Discover(ctx, model.MCPServer{ID: "tp_sleep", Name: "sleepy", Transport: model.TransportStdio,
		Stdio: &model.StdioTransport{Command: "/bin/sleep", Args: []string{"30"}}})
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), "no answer within 500ms")
	t.Logf("a server that never answers was given up after %s (timeout 500ms)", time.Since(start).Round(time.Millisecond))
}

func TestHTTPHeadersAreResolvedFromReferencesAtRequestTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	token := "tok-" + strings.Repeat("q", 24)
	srv := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{Header: "Authorization", Value: "Bearer " + token, PageSize: 2})
	srv.SetTools(specs("alpha", "beta", "gamma")...)
	e := env{"DOCS_TOKEN": token}
	pool := newPool(t, e, catalog.Options{Timeout: 5 * time.Second})
	prov := model.MCPServer{ID: "tp_http", Name: "docs", Transport: model.TransportHTTP, HTTP: &model.HTTPTransport{
		URL: srv.URL, Headers: []model.HeaderReference{{Name: "Authorization", Prefix: "Bearer ",
			Value: model.CredentialRef{Kind: model.CredentialEnv, Ref: "DOCS_TOKEN"}}},
	}}

	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "beta", "gamma"}, names(tools))
	res, err := pool.Call(ctx, prov, "beta", json.RawMessage(`{"q":"x"}`))
	require.NoError(t, err)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `beta called with {"q":"x"}`)
	assert.Equal(t, []string{"beta"}, srv.CallNames())
	assert.Zero(t, srv.Refused())

	// Test reports the server and changes nothing.
	got, err := pool.Test(ctx, prov)
	require.NoError(t, err)
	assert.Equal(t, catalog.TestResult{ServerName: "httpserver", ServerVersion: "4.5.6", ToolNames: []string{"alpha", "beta", "gamma"}}, got)

	// A file reference works the same way.
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	prov.HTTP.Headers[0].Value = model.CredentialRef{Kind: model.CredentialFile, Ref: tokenFile}
	_, err = pool.Discover(ctx, prov)
	require.NoError(t, err)

	// A missing variable is a precise error, before any request.
	prov.HTTP.Headers[0].Value = model.CredentialRef{Kind: model.CredentialEnv, Ref: "NOPE_TOKEN"}
	_, err = pool.Discover(ctx, prov)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "header Authorization: environment variable NOPE_TOKEN is not set")

	// A wrong secret is refused by the server (the credential must be
	// fixed); the error does not echo it.
	e["WRONG_TOKEN"] = "wrong-" + strings.Repeat("w", 20)
	prov.HTTP.Headers[0].Value = model.CredentialRef{Kind: model.CredentialEnv, Ref: "WRONG_TOKEN"}
	_, err = pool.Discover(ctx, prov)
	require.Error(t, err)
	assert.True(t, errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrUnavailable), "%v", err)
	assert.NotContains(t, err.Error(), e["WRONG_TOKEN"])
	assert.Positive(t, srv.Refused())

	// A server that is gone fails the discovery.
	prov.HTTP.Headers[0].Value = model.CredentialRef{Kind: model.CredentialEnv, Ref: "DOCS_TOKEN"}
	srv.Close()
	_, err = pool.Discover(ctx, prov)
	require.ErrorIs(t, err, errdefs.ErrUnavailable)
}

func TestSecretsAreScrubbedFromWhatProvidersSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	secret := "leak-" + strings.Repeat("z", 24)
	e := env{"T_SECRET": secret}
	prov := stdioProvider(t, files, e, model.EnvReference{Name: "SECRET", FromEnv: "T_SECRET"})
	pool := newPool(t, e, catalog.Options{})
	// A careless server puts its secret in a description, a schema and a
	// result.
	files.SetTools(t, catalogtest.ToolSpec{Name: "echo", Title: "Echo " + secret, Description: "uses " + secret,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","default":"` + secret + `"}}}`)})

	tools, err := pool.Discover(ctx, prov)
	require.NoError(t, err)
	b, err := json.Marshal(tools)
	require.NoError(t, err)
	assert.NotContains(t, string(b), secret)
	assert.Equal(t, "uses [redacted]", tools[0].Description)
	assert.Contains(t, string(tools[0].InputSchema), `"default":"[redacted]"`)

	res, err := pool.Call(ctx, prov, "echo", json.RawMessage(`{"q":"`+secret+`"}`))
	require.NoError(t, err)
	b, err = json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(b), secret)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `echo called with {"q":"[redacted]"}`)
}

// TestAKilledServerIsReplacedOnTheNextCall: a stdio server killed between
// calls is found dead and replaced by a new process; a call is never sent
// twice to make up for it (a call that got an error answer after it ran is
// TestACallAnsweredWithAnHTTPErrorIsNotRepeated).
func TestAKilledServerIsReplacedOnTheNextCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := catalogtest.NewStdioFiles(t)
	e := env{}
	prov := stdioProvider(t, files, e)
	pool := newPool(t, e, catalog.Options{})
	files.SetTools(t, specs("search")...)
	_, err := pool.Call(ctx, prov, "search", nil)
	require.NoError(t, err)

	// An unknown tool is the server's answer, not a broken connection.
	_, err = pool.Call(ctx, prov, "nope", nil)
	if err != nil {
		assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	}
	assert.Len(t, files.Starts(t), 1)

	require.NoError(t, syscall.Kill(files.Starts(t)[0].PID, syscall.SIGKILL))
	// Whether the call finds the connection dead before sending (and
	// reconnects) or after, it reaches the server at most once more.
	for range 2 {
		_, err = pool.Call(ctx, prov, "search", nil)
		if err != nil {
			assert.ErrorIs(t, err, errdefs.ErrUnavailable)
			assert.False(t, errors.Is(err, errdefs.ErrFailedPrecondition))
		}
	}
	assert.LessOrEqual(t, len(files.CallNames(t)), 3)
	require.Eventually(t, func() bool {
		_, err := pool.Call(ctx, prov, "search", nil)
		return err == nil
	}, 2*time.Minute, 10*time.Millisecond)
	assert.Len(t, files.Starts(t), 2)
}
