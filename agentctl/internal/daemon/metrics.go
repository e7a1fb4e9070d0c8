package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are agentctl's Prometheus collectors (agentctl serve
// --metrics-addr; ADR 0028); a nil *metrics observes nothing. No label
// carries a session's id.
type metrics struct {
	listChanged    prometheus.Counter
	workspaceBytes prometheus.Gauge
}

// register registers the daemon's metrics, with the Go runtime's and the
// process's, on reg (Options.Metrics); nil reg: none.
func (d *Daemon) register(reg *prometheus.Registry) {
	if reg == nil {
		return
	}
	m := &metrics{
		listChanged: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "toolscope", Subsystem: "agentctl", Name: "list_changed_sent_total",
			Help: "notifications/tools/list_changed sent to MCP clients (at most one per client and change of a session's tools)."}),
		workspaceBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "toolscope", Subsystem: "agentctl", Name: "workspaces_bytes",
			Help: "Disk used by the host's workspaces and mirrors (--workspaces-dir, --mirrors-dir; a hard-linked file once), as measured before the latest checkout; bounded by --workspaces-max-bytes."}),
	}
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "toolscope", Subsystem: "agentctl", Name: "sessions",
		Help: "Sessions this agentctl hosts."}, func() float64 {
		d.mu.Lock()
		defer d.mu.Unlock()
		return float64(len(d.sessions))
	})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.listChanged, m.workspaceBytes, sessions)
	d.metrics = m
}

// onListChanged is the publishers' hook (mcpserver.Options.OnListChanged);
// nil without metrics.
func (m *metrics) onListChanged() func() {
	if m == nil {
		return nil
	}
	return m.listChanged.Inc
}

// workspacesMeasured records the workspaces' and mirrors' disk use.
func (m *metrics) workspacesMeasured(bytes int64) {
	if m != nil {
		m.workspaceBytes.Set(float64(bytes))
	}
}
