package egressagent

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the agent's own, on its health address's /metrics.
type Metrics struct {
	Registry *prometheus.Registry
	// connections counts the proxy's decisions: allowed or refused, by what matched and by port
	// class (a refusal with no policy for its source is match "unknown").
	connections *prometheus.CounterVec
	policed     prometheus.Gauge
	applies     *prometheus.CounterVec
	applyTime   prometheus.Histogram
}

// NewMetrics registers the agent's metrics, with Go's and the process's, in a registry of its own.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubepod_egress_connections_total",
			Help: "Connections the egress proxy decided, by verdict, what decided it, and port class.",
		}, []string{"verdict", "match", "port"}),
		policed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cubepod_egress_policed_sandboxes",
			Help: "Sandboxes of this node whose egress rules the node enforces.",
		}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cubepod_egress_table_writes_total",
			Help: "Writes of the node's nftables table, by result.",
		}, []string{"result"}),
		applyTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cubepod_egress_table_write_seconds",
			Help:    "How long a write of the node's nftables table took.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	m.Registry.MustRegister(m.connections, m.policed, m.applies, m.applyTime,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) decided(allowed bool, match Match, class PortClass) {
	if m == nil {
		return
	}
	verdict := "refused"
	if allowed {
		verdict = "allowed"
	}
	m.connections.WithLabelValues(verdict, string(match), class.String()).Inc()
}
