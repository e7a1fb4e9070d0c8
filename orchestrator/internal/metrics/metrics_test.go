package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.LeaveNothing(m)) }

// Two orchestrators' metrics live in one process, each on its registry.
func TestRegistriesAreThePerProcessOnes(t *testing.T) {
	a, b := New(prometheus.NewRegistry()), New(prometheus.NewRegistry())
	a.ToolCall("task_info", true, OutcomeOK, time.Millisecond)
	assert.Equal(t, 1.0, promtest.ToFloat64(a.toolCalls.WithLabelValues("task_info", OutcomeOK)))
	assert.Equal(t, 0, promtest.CollectAndCount(b.toolCalls))

	var none *Metrics // no --metrics-addr: every observation is a no-op
	none.ToolCall("x", false, OutcomeOK, 0)
	none.Push(OutcomeOK, 0)
	none.Tx("write", 0, true)
	none.RateLimited("github", RateLimitProvider)
	none.QueueWait("github", 0)
	none.Discovery(nil)
	assert.Equal(t, http.DefaultTransport, none.ProviderTransport("github", nil))
}

// A tool that is not built-in is never a label of its own: an agent may
// send any name.
func TestOnlyBuiltInToolsAreNamed(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.ToolCall("docs__search", false, OutcomeOK, time.Millisecond)
	m.ToolCall("sess_abc123; DROP", false, "unknown_tool", time.Millisecond)
	assert.Equal(t, 1.0, promtest.ToFloat64(m.toolCalls.WithLabelValues(OtherTool, OutcomeOK)))
	assert.Equal(t, 1.0, promtest.ToFloat64(m.toolCalls.WithLabelValues(OtherTool, "unknown_tool")))
	assert.Equal(t, 2, promtest.CollectAndCount(m.toolCalls))
}

// Provider requests are counted by operation class and status class, a
// request with no answer as "error".
func TestProviderRequestsByClass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	m := New(prometheus.NewRegistry())
	hc := &http.Client{Transport: m.ProviderTransport("gitlab", nil)}
	do := func(method, url string) {
		req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
		require.NoError(t, err)
		res, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
		}
	}
	do(http.MethodGet, srv.URL+"/api/v4/projects/1")
	do(http.MethodPost, srv.URL+"/api/graphql")
	do(http.MethodPatch, srv.URL+"/api/v4/projects/1/merge_requests/2")
	do(http.MethodGet, "http://127.0.0.1:1/refused")
	for labels, want := range map[[2]string]float64{{"read", "2xx"}: 1, {"graphql", "2xx"}: 1, {"write", "4xx"}: 1, {"read", "error"}: 1} {
		assert.Equal(t, want, promtest.ToFloat64(m.providerCalls.WithLabelValues("gitlab", labels[0], labels[1])), labels)
	}
	srv.CloseClientConnections()
}

type counts struct {
	c   []SessionCount
	err error
}

func (c counts) SessionCounts(context.Context) ([]SessionCount, error) { return c.c, c.err }

// The sessions are read at each scrape; a failed read leaves their gauges
// out of that scrape and serves the rest.
func TestSessionsAreReadAtTheScrape(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.WatchSessions(counts{c: []SessionCount{{State: "running", Executor: "local", Sessions: 3, NeedsRepair: 1}}})
	assert.NoError(t, promtest.GatherAndCompare(m.reg, strings.NewReader(`
# HELP toolscope_sessions Sessions that are not stopped, by state (pending, running, failed) and executor.
# TYPE toolscope_sessions gauge
toolscope_sessions{executor="local",state="running"} 3
# HELP toolscope_sessions_needing_repair Sessions whose applied surface lags the desired one, or that were lost, by state and executor.
# TYPE toolscope_sessions_needing_repair gauge
toolscope_sessions_needing_repair{executor="local",state="running"} 1
`), "toolscope_sessions", "toolscope_sessions_needing_repair"))

	broken := New(prometheus.NewRegistry())
	broken.WatchSessions(counts{err: errors.New("database is locked")})
	broken.Discovery(nil)
	rec := httptest.NewRecorder()
	broken.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `toolscope_catalog_discovery_rounds_total{outcome="ok"} 1`)
	assert.NotContains(t, rec.Body.String(), "toolscope_sessions{")
}
