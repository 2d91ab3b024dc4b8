package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tidemark/tidemark/commands"
)

// metrics are the engine's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	commands *prometheus.CounterVec
	appendS  prometheus.Histogram
	groups   prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_commands_total", Help: "Commands this engine handled, by kind and outcome (accepted, duplicate, or the rejection code; every kind and outcome listed, 0 until it occurs).",
		}, []string{"kind", "outcome"}),
		appendS: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tidemark_append_seconds", Help: "Latency of conditional appends to the event stream (one publish or one atomic batch).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m.groups = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tidemark_group_commit_commands", Help: "Commands appended together in one group-commit batch.",
		Buckets: []float64{2, 4, 8, 16, 32, 64, 100},
	})
	// Every kind with every outcome, from the start (0 until it occurs).
	for _, kind := range commands.Kinds {
		m.commands.WithLabelValues(kind, "accepted")
		m.commands.WithLabelValues(kind, "duplicate")
		for _, code := range commands.Codes {
			m.commands.WithLabelValues(kind, string(code))
		}
	}
	m.reg.MustRegister(m.commands, m.appendS, m.groups,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) command(kind string, r commands.Reply) {
	outcome := "accepted"
	switch {
	case r.Duplicate:
		outcome = "duplicate"
	case !r.Accepted:
		outcome = string(r.Code)
	}
	m.commands.WithLabelValues(kind, outcome).Inc()
}

// Registry is the engine's metrics registry (served on /metrics, where
// web adds the series it reads off the live projection).
func (e *Engine) Registry() *prometheus.Registry { return e.metrics.reg }
