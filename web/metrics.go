package web

import (
	"errors"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

var (
	lagDesc       = prometheus.NewDesc("tidemark_projection_lag_events", "Events stored in the stream but not yet applied to the live projection.", nil, nil)
	appliedDesc   = prometheus.NewDesc("tidemark_projection_applied_seq", "Stream sequence of the last event applied to the live projection.", nil, nil)
	decisionsDesc = prometheus.NewDesc("tidemark_decisions_total", "Promotion decisions the stream records, by code (a decision counts once per code it carries; every code of the policy is listed, 0 until it occurs).", []string{"code"}, nil)
	outcomesDesc  = prometheus.NewDesc("tidemark_decision_outcomes_total", "Promotion decisions the stream records, by outcome (accepted, rejected).", []string{"outcome"}, nil)
	debtsDesc     = prometheus.NewDesc("tidemark_repair_debts_open", "Open repair debts.", nil, nil)
	debtIvDesc    = prometheus.NewDesc("tidemark_repair_debt_intervals_open", "Intervals (in each model's unit) still missing in open repair debt.", nil, nil)
	debtAgeDesc   = prometheus.NewDesc("tidemark_repair_debt_oldest_age_seconds", "Age of the oldest open repair debt on the engine's clock (0 when none).", nil, nil)
	runsDesc      = prometheus.NewDesc("tidemark_worker_runs_total", "Completions the stream records (IntervalsCompleted, by any worker), by run kind.", []string{"run_kind"}, nil)
	failsDesc     = prometheus.NewDesc("tidemark_work_failures_total", "Failed runs the stream records (RunFailed: one per failed step of an attempt, by any worker, the built-in one included); final: the work was given up.", []string{"final"}, nil)
	freshDesc     = prometheus.NewDesc("tidemark_model_freshness_seconds", "Seconds from the end of an env's incumbent's newest computed interval (its frontier; its start, floored to its unit, while it covers nothing) to the engine's clock.", []string{"env", "model"}, nil)
	lateDesc      = prometheus.NewDesc("tidemark_model_lateness_seconds", "Seconds an env's incumbent's frontier (its start, floored to its unit, while it covers nothing) is behind its readiness frontier on the engine's clock (the end of what its schedule has made ready); 0 when not behind.", []string{"env", "model"}, nil)
	liveDesc      = prometheus.NewDesc("tidemark_workers_live", "Workers whose heartbeat is current (every kind: exec, sql, builtin).", nil, nil)
	seenDesc      = prometheus.NewDesc("tidemark_worker_last_seen_seconds", "Seconds since a live worker's last heartbeat.", []string{"worker", "user", "kind"}, nil)
	itemsDesc     = prometheus.NewDesc("tidemark_worker_items_total", "Attempts at work items a live worker finished since it started, by outcome (done; failed: an attempt that failed, whose failed steps the stream records, counted by tidemark_work_failures_total), as its heartbeat reports (reset when the worker restarts).", []string{"worker", "user", "kind", "outcome"}, nil)
	flightDesc    = prometheus.NewDesc("tidemark_worker_in_flight", "Work items a live worker is computing, as its heartbeat reports.", []string{"worker", "user", "kind"}, nil)
	backfillDesc  = prometheus.NewDesc("tidemark_plan_backfill_progress_ratio", "Share of a plan in flight's backfill its candidates' tables cover (0..1).", []string{"plan", "env"}, nil)
	buildDesc     = prometheus.NewDesc("tidemark_build_info", "Always 1: the version, VCS revision and Go version of the running tidemark (tidemark version).", []string{"version", "revision", "goversion"}, nil)
	writerDesc    = prometheus.NewDesc("tidemark_writer", "1 while this member is the writer (holds the writer lease and carries out the commands that write), 0 while another member is; member is this member's name in the lease.", []string{"member"}, nil)
)

// decisionCodes are the codes tidemark_decisions_total lists from the
// start: every code a decision can carry.
var decisionCodes = func() []string {
	var out []string
	for _, c := range slices.Concat(policy.AcceptedCodes, policy.RejectedCodes) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}()

// Build describes the running build (tidemark_build_info).
type Build struct {
	Version, Revision, GoVersion string
}

// stateCollector reads the projection's series off it at scrape time.
type stateCollector struct{ s *Server }

// registerState adds the projection's series to the Registry when it can
// take them (a *prometheus.Registry); once per registry.
func (s *Server) registerState() error {
	r, ok := s.Registry.(prometheus.Registerer)
	if !ok {
		return nil
	}
	err := r.Register(&stateCollector{s: s})
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		return nil
	}
	return err
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, appliedDesc, decisionsDesc, outcomesDesc, debtsDesc, debtIvDesc, debtAgeDesc, runsDesc, failsDesc,
		freshDesc, lateDesc, backfillDesc, liveDesc, seenDesc, itemsDesc, flightDesc, buildDesc, writerDesc} {
		ch <- d
	}
}

// Collect sends every series: the running totals as counters, every
// label value known up front (codes, outcomes, run kinds) at 0 until it
// occurs, and each env's incumbents from when they are promoted.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	n := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	now := c.s.Clock().UTC()
	if b := c.s.Build; b.Version != "" {
		g(buildDesc, 1, b.Version, b.Revision, b.GoVersion)
	}
	if c.s.Writer != nil {
		member, writing := c.s.Writer()
		v := 0.0
		if writing {
			v = 1
		}
		g(writerDesc, v, labelValue(member))
	}
	g(lagDesc, float64(c.s.Proj.Stats().Lag))
	if c.s.Workers != nil {
		ws := c.s.Workers()
		g(liveDesc, float64(len(ws)))
		shown := make(map[[2]string]bool, len(ws))
		for _, w := range ws {
			// A worker is a (name, user): two users' workers of one name
			// are two series. A series collected twice fails the whole
			// scrape: names that are one once replaced show once.
			name, user, kind := labelValue(w.Name), labelValue(w.User), labelValue(w.Kind)
			if shown[[2]string{name, user}] {
				continue
			}
			shown[[2]string{name, user}] = true
			g(seenDesc, w.Age.Seconds(), name, user, kind)
			n(itemsDesc, float64(w.Done), name, user, kind, "done")
			n(itemsDesc, float64(w.Failed), name, user, kind, "failed")
			g(flightDesc, float64(w.InFlight), name, user, kind)
		}
	}
	c.s.Proj.Read(func(st *projections.State) {
		g(appliedDesc, float64(st.Seq))
		for _, code := range decisionCodes {
			n(decisionsDesc, float64(st.DecisionCodes[code]), code)
		}
		for code, v := range st.DecisionCodes {
			if !slices.Contains(decisionCodes, code) {
				n(decisionsDesc, float64(v), code)
			}
		}
		for _, o := range []events.Outcome{events.Accepted, events.Rejected} {
			n(outcomesDesc, float64(st.DecisionOutcomes[o]), string(o))
		}
		open, intervals, oldest := views.DebtTotals(views.Debts(st, ""))
		g(debtsDesc, float64(open))
		g(debtIvDesc, float64(intervals))
		age := 0.0
		if !oldest.IsZero() {
			age = now.Sub(oldest).Seconds()
		}
		g(debtAgeDesc, age)
		for _, kind := range events.RunKinds {
			n(runsDesc, float64(st.Runs[kind]), string(kind))
		}
		final, retried := 0, 0
		for _, f := range st.Failures {
			final += f.Final
			retried += f.Count - f.Final
		}
		n(failsDesc, float64(final), "true")
		n(failsDesc, float64(retried), "false")
		for _, f := range views.Fresh(st, now) {
			g(freshDesc, f.Age.Seconds(), f.Env, f.Model)
			g(lateDesc, f.Late.Seconds(), f.Env, f.Model)
		}
		for _, p := range views.InFlight(st) {
			g(backfillDesc, p.Fraction(), p.Plan, p.Env)
		}
	})
}

// labelValue is a label value a user chose (a worker's name, its kind),
// as /metrics shows it: every rune that is not printable (the text
// format escapes LF but writes CR and other control characters as they
// are) replaced by U+FFFD, and at most 200 bytes. The roster refuses such
// names already (work.CheckName); this holds whatever Workers reports.
func labelValue(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}
