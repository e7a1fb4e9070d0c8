package main

import (
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// scrape reads the orchestrator's /metrics over HTTP: the exposition text,
// and every sample by `name{label="value",...}` (labels sorted; a
// histogram as its _count).
func scrape(t *testing.T, url string) (string, map[string]float64) {
	t.Helper()
	body := testutil.GetOK(t, url)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	samples := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				samples[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				samples[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				samples[strings.Replace(key, name, name+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return string(body), samples
}

// moved returns how much each sample of after moved since before (new
// samples count from zero), leaving out those that did not move.
func moved(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// pick keeps the samples whose name starts with one of prefixes.
func pick(samples map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range samples {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
			}
		}
	}
	return out
}

// call calls a tool through MCP and returns the result, refused or not.
func call(t *testing.T, c *mcptest.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}

// TestMetricsCountAScriptedScenario is the metrics scenario: a
// session on the local executor with a real agentctl, tool calls that
// succeed and that are refused, a provider's 429, a source batch pushed to
// the session and a failed discovery; the counters scraped over HTTP move
// by exactly what happened, and no label holds an id.
func TestMetricsCountAScriptedScenario(t *testing.T) {
	t.Parallel()
	gh := forgetest.NewGitHub(t, e2eGitHubToken, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")

	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServerEnv(t, dataDir, []string{"E2E_GH_TOKEN=" + e2eGitHubToken},
		"--agentctl", executortest.Agentctl(t), "--metrics-addr", "127.0.0.1:0", "--poll-interval", "0")
	require.True(t, strings.HasPrefix(srv.metrics, "http://127.0.0.1:"), srv.metrics)
	require.True(t, strings.HasSuffix(srv.metrics, "/metrics"), srv.metrics)

	step := func(do func()) map[string]float64 {
		t.Helper()
		_, before := scrape(t, srv.metrics)
		do()
		_, after := scrape(t, srv.metrics)
		return moved(before, after)
	}
	providerMetrics := []string{"toolscope_provider_", "toolscope_tool_call"}
	_, first := scrape(t, srv.metrics)

	// Connecting validates the token: one read, counted as the provider
	// received it.
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	d := step(func() {
		srv.ok(t, "workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "E2E_GH_TOKEN")
	})
	require.Equal(t, []string{"GET /user"}, gh.Requests())
	assert.Equal(t, map[string]float64{
		`toolscope_provider_requests_total{operation="read",provider="github",status="2xx"}`: 1,
		`toolscope_provider_queue_wait_seconds_count{provider="github"}`:                     1,
	}, pick(d, providerMetrics...))

	repo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", repo)
	sid := srv.launchLocal(t, task)
	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")

	// Calls that succeed and one refused before any provider request.
	sent := len(gh.Requests())
	d = step(func() {
		require.False(t, call(t, c, toolapi.TaskInfoTool, nil).IsError)
		refused := call(t, c, toolapi.GitHubPRStatus, nil)
		require.True(t, refused.IsError)
		assert.Contains(t, refused.Content[0].(*mcp.TextContent).Text, "no pull request")
		require.False(t, call(t, c, toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "Fix login"}).IsError)
	})
	created := gh.Requests()[sent:]
	want := requestsCounted(created, "2xx")
	require.Contains(t, want, `toolscope_provider_requests_total{operation="write",provider="github",status="2xx"}`, created)
	for k, v := range map[string]float64{
		`toolscope_tool_calls_total{outcome="ok",tool="task_info"}`:                       1,
		`toolscope_tool_calls_total{outcome="no_change_request",tool="github_pr_status"}`: 1,
		`toolscope_tool_calls_total{outcome="ok",tool="github_pr_create"}`:                1,
		`toolscope_tool_call_duration_seconds_count{tool="task_info"}`:                    1,
		`toolscope_tool_call_duration_seconds_count{tool="github_pr_status"}`:             1,
		`toolscope_tool_call_duration_seconds_count{tool="github_pr_create"}`:             1,
		`toolscope_provider_queue_wait_seconds_count{provider="github"}`:                  2, // the status call takes a place before it finds no pull request
	} {
		want[k] = v
	}
	assert.Equal(t, want, pick(d, providerMetrics...), "requests: %v", created)

	// A 429: the call meets it and is refused; the next one is refused
	// without a request while the connection waits.
	gh.FailNext(http.MethodGet, "/pulls/", http.StatusTooManyRequests, 60)
	sent = len(gh.Requests())
	d = step(func() {
		for range 2 {
			res := call(t, c, toolapi.GitHubPRStatus, nil)
			require.True(t, res.IsError)
			assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "retry after")
		}
	})
	require.Len(t, gh.Requests()[sent:], 1, "the second call made no request")
	assert.Equal(t, map[string]float64{
		`toolscope_tool_calls_total{outcome="rate_limited",tool="github_pr_status"}`:         2,
		`toolscope_tool_call_duration_seconds_count{tool="github_pr_status"}`:                2,
		`toolscope_provider_requests_total{operation="read",provider="github",status="4xx"}`: 1,
		`toolscope_provider_rate_limited_total{provider="github",reason="provider"}`:         1,
		`toolscope_provider_rate_limited_total{provider="github",reason="waiting"}`:          1,
		`toolscope_provider_queue_wait_seconds_count{provider="github"}`:                     1, // the second call is refused before it takes a place
	}, pick(d, providerMetrics...))

	// A source batch is pushed to the running session: one push.
	glRepo := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/web")
	d = step(func() { srv.ok(t, "source", "add", task, "--repo", glRepo) })
	assert.Equal(t, map[string]float64{`toolscope_surface_push_duration_seconds_count{outcome="ok"}`: 1},
		pick(d, "toolscope_surface_push"))

	// A discovery round that fails (nothing listens there) is counted.
	d = step(func() { srv.ok(t, "mcp-server", "add", "gone", "--url", "http://127.0.0.1:1/mcp") })
	assert.Equal(t, map[string]float64{`toolscope_catalog_discovery_rounds_total{outcome="failed"}`: 1},
		pick(d, "toolscope_catalog_"))

	// The sessions, read from the records at the scrape.
	text, samples := scrape(t, srv.metrics)
	assert.Equal(t, map[string]float64{
		`toolscope_sessions{executor="local",state="running"}`:                1,
		`toolscope_sessions_needing_repair{executor="local",state="running"}`: 0,
	}, pick(samples, "toolscope_sessions"))
	assert.Contains(t, samples, "go_goroutines", "the Go runtime's metrics are there")
	whole := moved(first, samples)
	assert.Positive(t, whole[`toolscope_db_transaction_duration_seconds_count{kind="write"}`])
	assert.Positive(t, whole[`toolscope_db_transaction_duration_seconds_count{kind="read"}`])
	assert.Zero(t, samples[`toolscope_db_busy_errors_total{kind="write"}`])

	// No label value is an id of the scenario, nor a secret.
	for _, id := range []string{ws, repo, glRepo, task, sid, e2eGitHubToken} {
		assert.NotContains(t, text, id)
	}
	srv.ok(t, "session", "stop", sid)
	_, samples = scrape(t, srv.metrics)
	assert.Empty(t, pick(samples, "toolscope_sessions"), "stopped sessions are not shown")
}

// requestsCounted is what toolscope_provider_requests_total should have
// counted of requests ("METHOD path", as the fake received them), all
// answered with status.
func requestsCounted(requests []string, status string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range requests {
		method, path, _ := strings.Cut(r, " ")
		op := "write"
		switch {
		case strings.HasSuffix(path, "/graphql"):
			op = "graphql"
		case method == http.MethodGet:
			op = "read"
		}
		out[`toolscope_provider_requests_total{operation="`+op+`",provider="github",status="`+status+`"}`]++
	}
	return out
}

// TestMetricsAddressIsLoopbackOnly: the metrics carry no credential, so
// serve refuses a non-loopback address, naming the flag, before it
// touches the data directory.
func TestMetricsAddressIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := command(ctx, "serve", "--data-dir", dataDir, "--metrics-addr", "0.0.0.0:0").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "--metrics-addr")
	assert.Contains(t, string(out), "loopback")
	assert.NoFileExists(t, filepath.Join(dataDir, "toolscope.db"))
}
