// Package metrics is the orchestrator's Prometheus instrumentation: one
// Metrics per process, registered on a registry the caller owns (never the
// global default one), so that tests can run several orchestrators in one
// process. The packages it observes call its methods at one place each
// (toolcalls.Dispatcher.Handle, the reconciler's push, the connections'
// gate and HTTP client, the store's transactions, catalog discovery); a
// nil *Metrics observes nothing.
//
// No label carries an id: tools are named only when they are built-in
// (every other name is "(catalog)": a catalog tool's name is a workspace's
// choice and an agent may send any name), outcomes are the stable refusal
// codes, and provider calls are counted by provider, operation class and
// status class. docs/operations.md lists every metric.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the orchestrator.
const Namespace = "toolscope"

// OtherTool is the tool label of every call to a tool that is not
// built-in: catalog tools, and names no tool has.
const OtherTool = "(catalog)"

// Outcome labels besides the refusal codes.
const (
	OutcomeOK      = "ok"
	OutcomeFailed  = "failed"
	OutcomeTimeout = "timeout"
	OutcomeLost    = "lost"
)

// Rate-limit reasons (toolscope_provider_rate_limited_total's reason).
const (
	// RateLimitProvider: the provider answered with a rate limit; the
	// connection waits for its retry-after.
	RateLimitProvider = "provider"
	// RateLimitWaiting: a call refused without a request because the
	// connection waits for a provider's retry-after.
	RateLimitWaiting = "waiting"
	// RateLimitQueueFull: a call refused because the connection's calls in
	// flight and its queue are full.
	RateLimitQueueFull = "queue_full"
)

// Metrics holds the orchestrator's collectors.
type Metrics struct {
	reg *prometheus.Registry

	toolCalls       *prometheus.CounterVec
	toolCallSeconds *prometheus.HistogramVec
	pushSeconds     *prometheus.HistogramVec
	providerCalls   *prometheus.CounterVec
	rateLimited     *prometheus.CounterVec
	queueSeconds    *prometheus.HistogramVec
	txSeconds       *prometheus.HistogramVec
	busy            *prometheus.CounterVec
	discoveries     *prometheus.CounterVec
}

// dbBuckets are the store transactions' latency buckets: most take well
// under a millisecond, a busy writer waits up to its 5 s busy timeout.
var dbBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New registers the orchestrator's metrics, with the Go runtime's and the
// process's, on reg.
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		reg: reg,
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tool_calls_total",
			Help: "Tool calls answered, by tool (built-in tools by name, every other one as (catalog)) and outcome (ok or the refusal code)."},
			[]string{"tool", "outcome"}),
		toolCallSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "tool_call_duration_seconds",
			Help: "Time to authorize and answer a tool call, by tool.", Buckets: prometheus.DefBuckets},
			[]string{"tool"}),
		pushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "surface_push_duration_seconds",
			Help: "Pushes of a surface to a session's agentctl (ApplySurface), by outcome (ok, failed, timeout, lost).", Buckets: prometheus.DefBuckets},
			[]string{"outcome"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "provider_requests_total",
			Help: "HTTP requests to GitHub and GitLab APIs, by provider, operation class (read, write, graphql) and status class (2xx..5xx, error)."},
			[]string{"provider", "operation", "status"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "provider_rate_limited_total",
			Help: "Rate limits met on workspace connections, by provider and reason: provider (the provider asked to wait), waiting (a call refused while the connection waits), queue_full (calls in flight and queue full)."},
			[]string{"provider", "reason"}),
		queueSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "provider_queue_wait_seconds",
			Help: "Time a use of a workspace connection (a tool call, a poll, a validation) waited for a place among the connection's calls in flight, by provider.", Buckets: prometheus.DefBuckets},
			[]string{"provider"}),
		txSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "db_transaction_duration_seconds",
			Help: "Database transactions, by kind (read, write); a write's time includes waiting for the writer.", Buckets: dbBuckets},
			[]string{"kind"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "db_busy_errors_total",
			Help: "Transactions that failed because the database was busy or locked, by kind (read, write)."},
			[]string{"kind"}),
		discoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "catalog_discovery_rounds_total",
			Help: "Discovery rounds of the catalog's MCP servers, by outcome (ok, failed)."},
			[]string{"outcome"}),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.toolCalls, m.toolCallSeconds, m.pushSeconds, m.providerCalls, m.rateLimited, m.queueSeconds, m.txSeconds, m.busy, m.discoveries)
	return m
}

// Handler serves the registry's metrics in the exposition format. A
// collector that fails (the sessions' read) is left out of that scrape,
// the others are served, and promhttp_metric_handler_errors_total counts
// it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// ToolCall records one answered call. builtin says the tool is one of
// toolscope's own (its name is then the label).
func (m *Metrics) ToolCall(tool string, builtin bool, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	if !builtin {
		tool = OtherTool
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolCallSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

// Push records one push of a surface to a session.
func (m *Metrics) Push(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.pushSeconds.WithLabelValues(outcome).Observe(took.Seconds())
}

// RateLimited records a rate limit met on a connection to provider.
func (m *Metrics) RateLimited(provider, reason string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(provider, reason).Inc()
}

// QueueWait records how long a provider call waited for a place.
func (m *Metrics) QueueWait(provider string, took time.Duration) {
	if m == nil {
		return
	}
	m.queueSeconds.WithLabelValues(provider).Observe(took.Seconds())
}

// Tx records one store transaction of kind "read" or "write", and whether
// it failed because the database was busy.
func (m *Metrics) Tx(kind string, took time.Duration, busy bool) {
	if m == nil {
		return
	}
	m.txSeconds.WithLabelValues(kind).Observe(took.Seconds())
	if busy {
		m.busy.WithLabelValues(kind).Inc()
	}
}

// Discovery records one discovery round of an MCP server.
func (m *Metrics) Discovery(err error) {
	if m == nil {
		return
	}
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeFailed
	}
	m.discoveries.WithLabelValues(outcome).Inc()
}

// ProviderTransport counts the HTTP requests base makes to provider's
// API; base is http.DefaultTransport if nil. With a nil Metrics it
// returns base.
func (m *Metrics) ProviderTransport(provider string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if m == nil {
		return base
	}
	return &providerTransport{base: base, provider: provider, m: m}
}

type providerTransport struct {
	base     http.RoundTripper
	provider string
	m        *Metrics
}

func (t *providerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	status := "error"
	if err == nil {
		status = strconv.Itoa(res.StatusCode/100) + "xx"
	}
	t.m.providerCalls.WithLabelValues(t.provider, operationClass(req), status).Inc()
	return res, err
}

// operationClass is a request's class: graphql (GitHub's GraphQL
// endpoint), read (GET, HEAD) or write.
func operationClass(req *http.Request) string {
	switch {
	case strings.HasSuffix(req.URL.Path, "/graphql"):
		return "graphql"
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return "read"
	}
	return "write"
}

// SessionCount is how many sessions are in one state on one executor.
type SessionCount struct {
	State, Executor string
	Sessions        int
	// NeedsRepair counts those whose applied surface lags the desired one
	// (or that were lost).
	NeedsRepair int
}

// SessionCounter reads the sessions' counts, excluding stopped sessions
// (*store.Store).
type SessionCounter interface {
	SessionCounts(ctx context.Context) ([]SessionCount, error)
}

// sessionsScrapeTimeout bounds the read a scrape makes.
const sessionsScrapeTimeout = 5 * time.Second

// WatchSessions registers the gauges of the sessions that are not
// stopped, read from the records at each scrape: there is no bookkeeping
// to drift from them.
func (m *Metrics) WatchSessions(c SessionCounter) {
	m.reg.MustRegister(&sessionsCollector{c: c,
		sessions: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "sessions"),
			"Sessions that are not stopped, by state (pending, running, failed) and executor.", []string{"state", "executor"}, nil),
		repair: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "sessions_needing_repair"),
			"Sessions whose applied surface lags the desired one, or that were lost, by state and executor.", []string{"state", "executor"}, nil),
	})
}

type sessionsCollector struct {
	c                SessionCounter
	sessions, repair *prometheus.Desc
}

func (s *sessionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.sessions
	ch <- s.repair
}

func (s *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionsScrapeTimeout)
	defer cancel()
	counts, err := s.c.SessionCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(s.sessions, err)
		return
	}
	for _, c := range counts {
		ch <- prometheus.MustNewConstMetric(s.sessions, prometheus.GaugeValue, float64(c.Sessions), c.State, c.Executor)
		ch <- prometheus.MustNewConstMetric(s.repair, prometheus.GaugeValue, float64(c.NeedsRepair), c.State, c.Executor)
	}
}
