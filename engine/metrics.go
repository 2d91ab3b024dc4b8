package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

// metrics are the engine's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	commands *prometheus.CounterVec
	appendS  prometheus.Histogram
	groups   prometheus.Histogram
}

func newMetrics(e *Engine) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_commands_total", Help: "Commands handled, by kind and outcome (accepted, duplicate, or the rejection code).",
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
	m.reg.MustRegister(m.commands, m.appendS, m.groups, &stateCollector{e: e},
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

// Registry is the engine's metrics registry (served on /metrics).
func (e *Engine) Registry() *prometheus.Registry { return e.metrics.reg }

var (
	lagDesc       = prometheus.NewDesc("tidemark_projection_lag_events", "Events stored in the stream but not yet applied to the live projection.", nil, nil)
	appliedDesc   = prometheus.NewDesc("tidemark_projection_applied_seq", "Stream sequence of the last event applied to the live projection.", nil, nil)
	decisionsDesc = prometheus.NewDesc("tidemark_decisions", "Recorded promotion decisions by code (a decision counts once per code it carries).", []string{"code"}, nil)
	outcomesDesc  = prometheus.NewDesc("tidemark_decision_outcomes", "Recorded promotion decisions by outcome.", []string{"outcome"}, nil)
	debtsDesc     = prometheus.NewDesc("tidemark_repair_debts_open", "Open repair debts.", nil, nil)
	debtIvDesc    = prometheus.NewDesc("tidemark_repair_debt_intervals_open", "Intervals (in each model's unit) still missing in open repair debt.", nil, nil)
	debtAgeDesc   = prometheus.NewDesc("tidemark_repair_debt_oldest_age_seconds", "Age of the oldest open repair debt on the engine's clock (0 when none).", nil, nil)
	runsDesc      = prometheus.NewDesc("tidemark_worker_runs", "Completions recorded, by run kind.", []string{"run_kind"}, nil)
	failsDesc     = prometheus.NewDesc("tidemark_worker_failures", "Failed runs recorded (final: the worker gave up).", []string{"final"}, nil)
)

// stateCollector reads gauges off the live projection at scrape time.
type stateCollector struct{ e *Engine }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, appliedDesc, decisionsDesc, outcomesDesc, debtsDesc, debtIvDesc, debtAgeDesc, runsDesc, failsDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	now := c.e.Now()
	g(lagDesc, float64(c.e.proj.Stats().Lag))
	c.e.View(func(st *projections.State) {
		g(appliedDesc, float64(st.Seq))
		for code, n := range st.DecisionCodes {
			g(decisionsDesc, float64(n), code)
		}
		for o, n := range st.DecisionOutcomes {
			g(outcomesDesc, float64(n), string(o))
		}
		open, intervals, oldest := views.DebtTotals(views.Debts(st, ""))
		g(debtsDesc, float64(open))
		g(debtIvDesc, float64(intervals))
		age := 0.0
		if !oldest.IsZero() {
			age = now.Sub(oldest).Seconds()
		}
		g(debtAgeDesc, age)
		for kind, n := range st.Runs {
			g(runsDesc, float64(n), string(kind))
		}
		final, retried := 0, 0
		for _, f := range st.Failures {
			final += f.Final
			retried += f.Count - f.Final
		}
		g(failsDesc, float64(final), "true")
		g(failsDesc, float64(retried), "false")
	})
}
