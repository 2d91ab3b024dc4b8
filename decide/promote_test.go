package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// expectDecision checks a recorded decision's outcome, codes (exactly),
// and, per model named, its missing ranges and advances (-1: not checked).
type expectation struct {
	outcome  events.Outcome
	codes    []string
	missing  map[string]interval.Set
	advances map[string]int
}

func (e expectation) check(tb testing.TB, pd events.PromotionDecided) {
	tb.Helper()
	if pd.Outcome != e.outcome {
		tb.Fatalf("outcome %s %v, want %s %v", pd.Outcome, pd.Codes, e.outcome, e.codes)
	}
	codes := e.codes
	if codes == nil {
		codes = []string{}
	}
	if !slices.Equal(pd.Codes, codes) && !(len(pd.Codes) == 0 && len(codes) == 0) {
		tb.Fatalf("codes %v, want %v", pd.Codes, codes)
	}
	for m, want := range e.missing {
		f, ok := pd.Models[m]
		if !ok {
			tb.Fatalf("no finding for model %s", m)
		}
		if got := interval.NewSet(f.Missing...); !got.Equal(want) {
			tb.Errorf("%s missing %v, want %v", m, got, want)
		}
	}
	for m, want := range e.advances {
		if got := pd.Models[m].Advances; got != want {
			tb.Errorf("%s advances %d, want %d", m, got, want)
		}
	}
}

func modelCodes(pd events.PromotionDecided, m string) []string { return pd.Models[m].Codes }

func findings(pd events.PromotionDecided, code string) []events.Finding {
	var out []events.Finding
	for _, f := range pd.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

var (
	sessions   = model{name: "sessions", deps: []string{"events"}}
	users      = model{name: "users", deps: []string{"events"}}
	sessionsFO = model{name: "sessions", deps: []string{"events"}, kind: events.ForwardOnly}
	reports    = model{name: "reports", deps: []string{"sessions"}}
)

// The promotion check of DESIGN.md ("Domain rules" 1-4 and "Precise
// rules"), one row per rule, on the race: events v1 serves, v2 is built at
// 10:00 and backfilled, the scheduler then advances.
func TestPromotionCheck(t *testing.T) {
	ticks := func(hs ...int) func(w *world) {
		return func(w *world) {
			for _, x := range hs {
				w.tick("prod", h(x))
			}
		}
	}
	then := func(fs ...func(w *world)) func(w *world) {
		return func(w *world) {
			for _, f := range fs {
				f(w)
			}
		}
	}
	completeV2 := func(r ...interval.Range) func(w *world) {
		return func(w *world) { w.complete("events@v2", h(12), events.RunManual, r...) }
	}
	hole := func(snapshot string, r interval.Range) func(w *world) {
		return func(w *world) { w.invalidate(snapshot, h(10), r) }
	}
	computed := func(snapshot string, r interval.Range) func(w *world) {
		return func(w *world) { w.complete(snapshot, at1107, events.RunManual, r) }
	}
	for _, c := range []struct {
		name     string
		v2       *model
		bounds   []int
		children []model
		prep     func(w *world)
		at       time.Time
		want     expectation
		// also runs extra checks on the decision.
		also func(t *testing.T, w *world, pd events.PromotionDecided)
	}{
		{
			name: "strict, nothing missing", prep: nil,
			want: expectation{outcome: events.Accepted, codes: []string{"no_gaps"}, missing: map[string]interval.Set{"events": nil}},
		},
		{
			name: "strict rejects a trailing suffix with missing_intervals", prep: ticks(11),
			want: expectation{outcome: events.Rejected, codes: []string{"missing_intervals"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11))}, advances: map[string]int{"events": 1}},
		},
		{
			name: "strict rejects an internal gap with missing_intervals", prep: then(ticks(11, 12), completeV2(hrs(11, 12))), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			name: "strict rejects a historical gap with missing_intervals", prep: then(hole("events@v2", hrs(3, 4)), ticks(11)),
			want: expectation{outcome: events.Rejected, codes: []string{"missing_intervals"},
				missing: map[string]interval.Set{"events": rs(hrs(3, 4), hrs(10, 11))}},
		},
		{
			name: "trailing 1 accepts one advance", bounds: []int{1}, prep: ticks(11),
			want: expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11))}, advances: map[string]int{"events": 1}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				if w.openRepairs() != 1 || w.incumbent("prod", "events") != "events@v2" {
					t.Errorf("repairs %d incumbent %s", w.openRepairs(), w.incumbent("prod", "events"))
				}
			},
		},
		{
			name: "trailing 1, two advances", bounds: []int{1}, prep: ticks(11, 12), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"trailing_gap_exceeds_bound"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 12))}, advances: map[string]int{"events": 2}},
		},
		{
			name: "trailing 2, two advances", bounds: []int{2}, prep: ticks(11, 12), at: h(12),
			want: expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 12))}, advances: map[string]int{"events": 2}},
		},
		{
			name: "catch-up 1, two advances", bounds: []int{0, 1}, prep: ticks(11, 12), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"trailing_gap_exceeds_bound"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 12))}, advances: map[string]int{"events": 2}},
		},
		{
			name: "both bounds 1, two advances", bounds: []int{1, 1}, prep: ticks(11, 12), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"trailing_gap_exceeds_bound"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 12))}, advances: map[string]int{"events": 2}},
		},
		{
			// Lookback is never counted as an advance.
			name: "lookback is not an advance", v2: &model{name: "events", lookback: 3}, bounds: []int{1}, prep: ticks(11),
			want: expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11))}, advances: map[string]int{"events": 1}},
		},
		{
			name: "schedule changed", v2: &model{name: "events", cron: "30 * * * *"}, bounds: []int{1}, prep: ticks(11),
			want: expectation{outcome: events.Rejected, codes: []string{"schedule_changed"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			name: "schedule changed under catch-up", v2: &model{name: "events", cron: "30 * * * *"}, bounds: []int{0, 1}, prep: ticks(11),
			want: expectation{outcome: events.Rejected, codes: []string{"schedule_changed"}},
		},
		{
			// Schedules are compared after expanding descriptors.
			name: "@hourly equals 0 * * * *", v2: &model{name: "events", cron: "0 * * * *"}, bounds: []int{1}, prep: ticks(11),
			want: expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"}, advances: map[string]int{"events": 1}},
		},
		{
			name: "unit changed", v2: &model{name: "events", unit: interval.HalfHour}, bounds: []int{1}, prep: ticks(11),
			want: expectation{outcome: events.Rejected, codes: []string{"schedule_changed"}},
		},
		{
			// The first failing condition gives the code.
			name: "schedule changed before historical gap", v2: &model{name: "events", cron: "30 * * * *"}, bounds: []int{1},
			prep: then(hole("events@v2", hrs(3, 4)), ticks(11)),
			want: expectation{outcome: events.Rejected, codes: []string{"schedule_changed"}},
		},
		{
			name: "historical gap", bounds: []int{1}, prep: then(hole("events@v2", hrs(3, 4)), ticks(11)),
			want: expectation{outcome: events.Rejected, codes: []string{"historical_gap"},
				missing: map[string]interval.Set{"events": rs(hrs(3, 4), hrs(10, 11))}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				fs := findings(pd, "historical_gap")
				if len(fs) != 1 || !interval.NewSet(fs[0].Ranges...).Equal(rs(hrs(3, 4))) {
					t.Errorf("historical_gap findings %+v", fs)
				}
			},
		},
		{
			name: "historical gap under catch-up", bounds: []int{0, 1}, prep: then(hole("events@v2", hrs(3, 4)), ticks(11)),
			want: expectation{outcome: events.Rejected, codes: []string{"historical_gap"},
				missing: map[string]interval.Set{"events": rs(hrs(3, 4), hrs(10, 11))}},
		},
		{
			name: "internal gap", bounds: []int{2}, prep: then(ticks(11, 12), completeV2(hrs(11, 12))), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"internal_gap"}, missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			name: "internal gap under catch-up", bounds: []int{0, 2}, prep: then(ticks(11, 12), completeV2(hrs(11, 12))), at: h(12),
			want: expectation{outcome: events.Rejected, codes: []string{"internal_gap"}, missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			// The check window ends at the incumbent's frontier, the end of
			// its last range, holes or not.
			name: "incumbent hole does not move the frontier", prep: then(ticks(11), hole("events@v1", hrs(3, 4))),
			want: expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			name: "incumbent hole, candidate complete", prep: then(ticks(11), hole("events@v1", hrs(3, 4)), completeV2(hrs(10, 11))),
			at:   h(12),
			want: expectation{outcome: events.Accepted, codes: []string{"no_gaps"}},
		},
		{
			// The check window is not capped by the candidate's own
			// readiness: a daily candidate must match an hourly incumbent.
			name: "window not capped by the candidate's readiness", v2: &model{name: "events", cron: "@daily", unit: interval.Hour},
			prep: ticks(11),
			want: expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
		{
			name: "downstream overlap blocks the allowance", bounds: []int{1}, children: []model{sessions},
			prep: then(ticks(11), computed("sessions@v1+p1", hrs(10, 11))),
			want: expectation{outcome: events.Rejected, codes: []string{"downstream_overlap"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "sessions": nil}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				fs := findings(pd, "downstream_overlap")
				if len(fs) != 1 || fs[0].Related != "sessions@v1+p1" || !interval.NewSet(fs[0].Ranges...).Equal(rs(hrs(10, 11))) {
					t.Errorf("downstream_overlap findings %+v", fs)
				}
			},
		},
		{
			name: "every overlapping downstream candidate is reported", bounds: []int{1}, children: []model{sessions, users},
			prep: then(ticks(11), computed("sessions@v1+p1", hrs(10, 11)), computed("users@v1+p1", hrs(10, 11))),
			want: expectation{outcome: events.Rejected, codes: []string{"downstream_overlap"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "sessions": nil, "users": nil}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				var related []string
				for _, f := range findings(pd, "downstream_overlap") {
					related = append(related, f.Related)
				}
				slices.Sort(related)
				if !slices.Equal(related, []string{"sessions@v1+p1", "users@v1+p1"}) {
					t.Errorf("downstream_overlap findings name %v, want both children", related)
				}
			},
		},
		{
			name: "transitive downstream overlap", bounds: []int{1}, children: []model{sessions, reports},
			prep: then(ticks(11), computed("sessions@v1+p1", hrs(10, 11)), computed("reports@v1+p1", hrs(10, 11))),
			want: expectation{outcome: events.Rejected, codes: []string{"downstream_overlap"}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				var related []string
				for _, f := range findings(pd, "downstream_overlap") {
					if f.Model == "events" {
						related = append(related, f.Related)
					}
				}
				slices.Sort(related)
				if !slices.Equal(related, []string{"reports@v1+p1", "sessions@v1+p1"}) {
					t.Errorf("events' downstream_overlap findings name %v, want the child and the grandchild", related)
				}
			},
		},
		{
			name: "a clean downstream candidate does not block", bounds: []int{1}, children: []model{sessions},
			prep: ticks(11),
			want: expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "sessions": rs(hrs(10, 11))}},
		},
		{
			name: "a forward-only child keeps its rows with a warning", bounds: []int{1}, children: []model{sessionsFO},
			prep: ticks(11),
			// The child is on its incumbent's table: it passes with no_gaps.
			want: expectation{outcome: events.Accepted, codes: []string{"forward_only_overlap_retained", "no_gaps", "trailing_gap_accepted"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "sessions": nil}},
			also: func(t *testing.T, w *world, pd events.PromotionDecided) {
				fs := findings(pd, "forward_only_overlap_retained")
				if len(fs) != 1 || fs[0].Related != "sessions@v1+p1" {
					t.Errorf("warnings %+v", fs)
				}
			},
		},
		{
			name: "overlap and forward-only warning together", bounds: []int{1}, children: []model{users, sessionsFO},
			prep: then(ticks(11), computed("users@v1+p1", hrs(10, 11))),
			want: expectation{outcome: events.Rejected, codes: []string{"downstream_overlap", "forward_only_overlap_retained"},
				missing: map[string]interval.Set{"events": rs(hrs(10, 11))}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := standard(t, c.v2, c.bounds, c.children...)
			if c.prep != nil {
				c.prep(w)
			}
			at := c.at
			if at.IsZero() {
				at = at1107
			}
			dec := w.promote("p1", at)
			if dec.Reply.Decision == nil {
				t.Fatalf("no decision; catch-up requested: %+v", dec.Reply.CatchUp)
			}
			pd := *dec.Reply.Decision
			c.want.check(t, pd)
			if c.also != nil {
				c.also(t, w, pd)
			}
		})
	}
}

// DESIGN.md: both frontiers must fall on cron-tick boundaries
// (ambiguous_boundary). A @daily model with unit hour has one boundary a
// day; an operator filling hours by hand leaves the frontier off it.
func TestAmbiguousBoundary(t *testing.T) {
	rollup := model{name: "rollup", cron: "@daily", unit: interval.Hour}
	at := day(1).Add(10 * time.Hour)
	t.Run("captured frontier", func(t *testing.T) {
		w := deployed(t, at, rollup)
		w.complete("rollup@v1", at, events.RunManual, interval.R(day(1), day(1).Add(5*time.Hour)))
		w.register(model{name: "rollup", version: "v2", cron: "@daily", unit: interval.Hour}.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 1)
		w.backfill("p1", at)
		w.tick("prod", day(2))
		expectation{outcome: events.Rejected, codes: []string{"ambiguous_boundary"},
			missing: map[string]interval.Set{"rollup": rs(interval.R(day(1).Add(5*time.Hour), day(2)))}}.
			check(t, w.decided("p1", day(2).Add(time.Hour)))
	})
	t.Run("current frontier", func(t *testing.T) {
		w := deployed(t, at, rollup)
		w.register(model{name: "rollup", version: "v2", cron: "@daily", unit: interval.Hour}.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 1)
		w.backfill("p1", at)
		w.complete("rollup@v1", at, events.RunManual, interval.R(day(1), day(1).Add(5*time.Hour)))
		expectation{outcome: events.Rejected, codes: []string{"ambiguous_boundary"},
			missing: map[string]interval.Set{"rollup": rs(interval.R(day(1), day(1).Add(5*time.Hour)))}}.
			check(t, w.decided("p1", at))
	})
	t.Run("both on boundaries: one advance of 24 intervals", func(t *testing.T) {
		w := deployed(t, at, rollup)
		w.register(model{name: "rollup", version: "v2", cron: "@daily", unit: interval.Hour}.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 1)
		w.backfill("p1", at)
		w.tick("prod", day(2))
		expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
			missing:  map[string]interval.Set{"rollup": rs(interval.R(day(1), day(2)))},
			advances: map[string]int{"rollup": 1}}.check(t, w.decided("p1", day(2).Add(time.Hour)))
	})
	t.Run("two days: two advances of 24 intervals", func(t *testing.T) {
		w := deployed(t, at, rollup)
		w.register(model{name: "rollup", version: "v2", cron: "@daily", unit: interval.Hour}.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 1)
		w.backfill("p1", at)
		w.tick("prod", day(2))
		w.tick("prod", day(3))
		expectation{outcome: events.Rejected, codes: []string{"trailing_gap_exceeds_bound"},
			missing:  map[string]interval.Set{"rollup": rs(interval.R(day(1), day(3)))},
			advances: map[string]int{"rollup": 2}}.check(t, w.decided("p1", day(3).Add(time.Hour)))
	})
	t.Run("captured frontier, under catch-up", func(t *testing.T) {
		w := deployed(t, at, rollup)
		w.complete("rollup@v1", at, events.RunManual, interval.R(day(1), day(1).Add(5*time.Hour)))
		w.register(model{name: "rollup", version: "v2", cron: "@daily", unit: interval.Hour}.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 0, 1)
		w.backfill("p1", at)
		w.tick("prod", day(2))
		expectation{outcome: events.Rejected, codes: []string{"ambiguous_boundary"}}.check(t, w.decided("p1", day(2).Add(time.Hour)))
	})
	t.Run("30 7 * * * unit hour: 07:00 is a boundary", func(t *testing.T) {
		m := model{name: "rollup", cron: "30 7 * * *", unit: interval.Hour}
		w := deployed(t, at, m)
		m.version = "v2"
		w.register(m.command())
		w.plan("p1", "prod", map[string]string{"rollup": "v2"}, at, 1)
		w.backfill("p1", at)
		w.tick("prod", day(2).Add(7*time.Hour+30*time.Minute))
		expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
			missing:  map[string]interval.Set{"rollup": rs(interval.R(day(1).Add(7*time.Hour), day(2).Add(7*time.Hour)))},
			advances: map[string]int{"rollup": 1}}.check(t, w.decided("p1", day(2).Add(8*time.Hour)))
	})
}

// DESIGN.md, "Versions, tables and plans": an incumbent with no coverage at
// build has no captured frontier: historical_gap and the captured half of
// ambiguous_boundary do not apply; the current frontier must still be a
// cron-tick boundary.
func TestNoCapturedFrontier(t *testing.T) {
	// events v1 is deployed before anything is ready: it serves with no
	// coverage. Plan p1 is built at 05:30 before the scheduler ran.
	setup := func(t *testing.T, m model, deployAt, buildAt time.Time, trailing int) *world {
		w := deployed(t, deployAt, m)
		if !w.st.Table(w.incumbent("prod", m.name)).Empty() {
			t.Fatalf("the incumbent has coverage")
		}
		m.version = "v2"
		w.register(m.command())
		pl := w.plan("p1", "prod", map[string]string{m.name: "v2"}, buildAt, trailing)
		if c := candidateOf(t, pl, m.name); !c.IncumbentFrontier.IsZero() {
			t.Fatalf("captured frontier %v", c.IncumbentFrontier)
		}
		return w
	}
	events_ := model{name: "events"}
	t.Run("backfilled to RF at build", func(t *testing.T) {
		w := setup(t, events_, h(0).Add(30*time.Minute), h(5).Add(30*time.Minute), 1)
		w.backfill("p1", h(5).Add(30*time.Minute))
		w.tick("prod", h(6))
		expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
			missing: map[string]interval.Set{"events": rs(hrs(5, 6))}, advances: map[string]int{"events": 1}}.
			check(t, w.decided("p1", h(6)))
	})
	t.Run("no historical gap: the suffix is judged by its advances", func(t *testing.T) {
		w := setup(t, events_, h(0).Add(30*time.Minute), h(5).Add(30*time.Minute), 1)
		w.complete("events@v2", h(6), events.RunBackfill, hrs(0, 3))
		w.tick("prod", h(6))
		expectation{outcome: events.Rejected, codes: []string{"trailing_gap_exceeds_bound"},
			missing: map[string]interval.Set{"events": rs(hrs(3, 6))}, advances: map[string]int{"events": 3}}.
			check(t, w.decided("p1", h(6)))
	})
	rollup := model{name: "rollup", cron: "@daily", unit: interval.Hour}
	t.Run("current frontier off a boundary", func(t *testing.T) {
		w := setup(t, rollup, day(0).Add(30*time.Minute), day(1).Add(5*time.Hour), 1)
		w.backfill("p1", day(1).Add(5*time.Hour))
		w.complete("rollup@v1", day(1).Add(5*time.Hour), events.RunManual, interval.R(day(0), day(1).Add(5*time.Hour)))
		expectation{outcome: events.Rejected, codes: []string{"ambiguous_boundary"},
			missing: map[string]interval.Set{"rollup": rs(interval.R(day(1), day(1).Add(5*time.Hour)))}}.
			check(t, w.decided("p1", day(1).Add(6*time.Hour)))
	})
	t.Run("current frontier on a boundary", func(t *testing.T) {
		w := setup(t, rollup, day(0).Add(30*time.Minute), day(1).Add(5*time.Hour), 1)
		w.backfill("p1", day(1).Add(5*time.Hour))
		w.tick("prod", day(2))
		expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
			missing: map[string]interval.Set{"rollup": rs(interval.R(day(1), day(2)))}, advances: map[string]int{"rollup": 1}}.
			check(t, w.decided("p1", day(2).Add(time.Hour)))
	})
	t.Run("strict, nothing to match", func(t *testing.T) {
		w := setup(t, events_, h(0).Add(30*time.Minute), h(0).Add(40*time.Minute), 0)
		expectation{outcome: events.Accepted, codes: []string{"no_gaps"}}.check(t, w.decided("p1", h(0).Add(45*time.Minute)))
	})
}

// DESIGN.md, "Precise rules", the check window (amended 2026-12-04):
// nothing is promoted empty. A candidate with no incumbent, or whose
// incumbent has no coverage now, is checked against its own backfill set
// (fixed at build): no_gaps when it covers it (an empty set passes), else
// missing_intervals (strict) or historical_gap (a bound > 0), with what it
// lacks as missing and no advances.
func TestNothingPromotedEmpty(t *testing.T) {
	noIncumbent := func(t *testing.T, bounds ...int) *world {
		w := newWorld(t)
		w.hourly("events", "v1")
		w.plan("p1", "prod", map[string]string{"events": "v1"}, h(6), bounds...)
		return w
	}
	// events v1 deployed at 00:00 (nothing ready: an empty backfill set),
	// its ticks recorded until 05:00 but never computed (a paused worker):
	// the incumbent has no coverage when v2's plan is built at 05:00, so
	// v2's backfill set runs to its readiness frontier, [00:00, 05:00).
	noCoverage := func(t *testing.T, bounds ...int) *world {
		w := deployed(t, h(0), model{name: "events"})
		for i := 1; i <= 5; i++ {
			w.advance("prod", h(i))
		}
		w.hourly("events", "v2")
		w.plan("p1", "prod", map[string]string{"events": "v2"}, h(5), bounds...)
		return w
	}
	strictMiss := expectation{outcome: events.Rejected, codes: []string{"missing_intervals"},
		missing: map[string]interval.Set{"events": rs(hrs(0, 6))}, advances: map[string]int{"events": 0}}
	for _, c := range []struct {
		name string
		run  func(t *testing.T) events.PromotionDecided
		want expectation
	}{
		{"no incumbent, not backfilled, strict", func(t *testing.T) events.PromotionDecided {
			return noIncumbent(t).decided("p1", h(6))
		}, strictMiss},
		{"no incumbent, not backfilled, trailing bound", func(t *testing.T) events.PromotionDecided {
			return noIncumbent(t, 1).decided("p1", h(6))
		}, expectation{outcome: events.Rejected, codes: []string{"historical_gap"}, missing: strictMiss.missing, advances: strictMiss.advances}},
		{"no incumbent, not backfilled, catch-up bound", func(t *testing.T) events.PromotionDecided {
			return noIncumbent(t, 0, 2).decided("p1", h(6))
		}, expectation{outcome: events.Rejected, codes: []string{"historical_gap"}, missing: strictMiss.missing}},
		{"no incumbent, half backfilled", func(t *testing.T) events.PromotionDecided {
			w := noIncumbent(t)
			w.complete("events@v1", h(6), events.RunBackfill, hrs(0, 2), hrs(4, 6))
			return w.decided("p1", h(6))
		}, expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(2, 4))}}},
		{"no incumbent, rejected, then backfilled", func(t *testing.T) events.PromotionDecided {
			w := noIncumbent(t)
			strictMiss.check(t, w.decided("p1", h(6)))
			w.backfill("p1", h(6))
			return w.decided("p1", h(6))
		}, expectation{outcome: events.Accepted, codes: []string{"no_gaps"}, missing: map[string]interval.Set{"events": nil}}},
		{"no incumbent, empty backfill set", func(t *testing.T) events.PromotionDecided {
			w := newWorld(t)
			w.register(model{name: "events", start: h(6)}.command())
			pl := w.plan("p1", "prod", map[string]string{"events": "v1"}, h(6))
			if len(pl.Candidates[0].Backfill) != 0 {
				t.Fatalf("backfill set %v, want empty", pl.Candidates[0].Backfill)
			}
			return w.decided("p1", h(6))
		}, expectation{outcome: events.Accepted, codes: []string{"no_gaps"}}},
		{"incumbent without coverage, not backfilled", func(t *testing.T) events.PromotionDecided {
			return noCoverage(t).decided("p1", h(5).Add(10*time.Minute))
		}, expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(0, 5))}}},
		{"incumbent without coverage, trailing bound", func(t *testing.T) events.PromotionDecided {
			return noCoverage(t, 1).decided("p1", h(5).Add(10*time.Minute))
		}, expectation{outcome: events.Rejected, codes: []string{"historical_gap"}, missing: map[string]interval.Set{"events": rs(hrs(0, 5))}}},
		{"incumbent without coverage, backfilled", func(t *testing.T) events.PromotionDecided {
			w := noCoverage(t)
			w.backfill("p1", h(5))
			return w.decided("p1", h(5).Add(10*time.Minute))
		}, expectation{outcome: events.Accepted, codes: []string{"no_gaps"}}},
		{"incumbent whose coverage was invalidated since build", func(t *testing.T) events.PromotionDecided {
			// Built while v1 covered [00:00, 06:00): v2's set is that; v1
			// then loses everything, and v2 is checked against its set.
			w := deployed(t, h(6), model{name: "events"})
			w.hourly("events", "v2")
			w.plan("p1", "prod", map[string]string{"events": "v2"}, h(6))
			w.complete("events@v2", h(6), events.RunBackfill, hrs(0, 3))
			w.invalidate("events@v1", h(6), hrs(0, 6))
			return w.decided("p1", h(6))
		}, expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}, missing: map[string]interval.Set{"events": rs(hrs(3, 6))}}},
	} {
		t.Run(c.name, func(t *testing.T) { c.want.check(t, c.run(t)) })
	}
}

// DESIGN.md, "Decision codes": in a rejected decision, a candidate the
// allowance would have admitted adds no code; its missing is still
// reported.
func TestRejectionDropsPassingCodes(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "clicks"})
	w.run("prod", h(6), h(10))
	w.hourly("events", "v2")
	w.hourly("clicks", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2", "clicks": "v2"}, h(10), 1)
	w.backfill("p1", h(10))
	w.invalidate("clicks@v2", h(10), hrs(3, 4))
	w.tick("prod", h(11))
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Rejected, codes: []string{"historical_gap"},
		missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "clicks": rs(hrs(3, 4), hrs(10, 11))}}.check(t, pd)
	if c := modelCodes(pd, "events"); len(c) != 0 {
		t.Errorf("events, admissible, carries %v in a rejection", c)
	}
	if len(findings(pd, "trailing_gap_accepted")) > 0 {
		t.Errorf("a rejection has a trailing_gap_accepted finding")
	}
	if len(pd.Repairs) > 0 || w.openRepairs() > 0 {
		t.Errorf("a rejection opened repairs")
	}
}

// conflicting_plan is plan-wide: once another plan's acceptance moved the
// generation, the decision carries that code alone and no missing ranges.
func TestConflictingPlan(t *testing.T) {
	w := standard(t, nil, []int{1}, sessions)
	w.hourly("events", "v3")
	w.plan("p2", "prod", map[string]string{"events": "v3"}, h(10), 1)
	w.tick("prod", h(11))
	expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"}}.check(t, w.decided("p1", at1107))
	pd := w.decided("p2", at1107)
	expectation{outcome: events.Rejected, codes: []string{"conflicting_plan"}}.check(t, pd)
	if w.incumbent("prod", "events") != "events@v2" || w.st.Env("prod").Generation != 2 {
		t.Errorf("a conflicting plan changed the env")
	}
	for m, f := range pd.Models {
		if len(f.Missing) > 0 || f.Advances != 0 {
			t.Errorf("%s: %+v", m, f)
		}
	}
}

// A plan may be promoted again with a new command id: it is evaluated and
// recorded (conflicting_plan once its own acceptance moved the
// generation); the same id returns the recorded decision, appending
// nothing.
func TestPromoteAgain(t *testing.T) {
	t.Run("after acceptance", func(t *testing.T) {
		w := standard(t, nil, []int{1})
		w.tick("prod", h(11))
		first := &commands.Promote{Plan: "p1"}
		d1, err := w.do(first, at1107)
		if err != nil || d1.Reply.Decision == nil || d1.Reply.Decision.Outcome != events.Accepted {
			t.Fatalf("first promotion: %v %+v", err, d1.Reply)
		}
		second := &commands.Promote{Plan: "p1"}
		d2, err := w.do(second, h(12))
		if err != nil || len(d2.Events) != 1 {
			t.Fatalf("second promotion: %v, %d events", err, len(d2.Events))
		}
		expectation{outcome: events.Rejected, codes: []string{"conflicting_plan"}}.check(t, *d2.Reply.Decision)
		pl := w.st.Plans["p1"]
		if len(pl.Earlier) != 1 || pl.Decision.Outcome != events.Rejected || w.st.Env("prod").Generation != 2 || w.openRepairs() != 1 {
			t.Fatalf("after the second promotion: earlier %d, latest %s, generation %d, repairs %d",
				len(pl.Earlier), pl.Decision.Outcome, w.st.Env("prod").Generation, w.openRepairs())
		}
		for _, c := range []struct {
			cmd  *commands.Promote
			want events.Outcome
		}{{first, events.Accepted}, {second, events.Rejected}} {
			seq := w.st.Seq
			dup, err := w.again(c.cmd)
			if err != nil || len(dup.Events) != 0 || !dup.Reply.Duplicate || w.st.Seq != seq {
				t.Fatalf("repeat of %s: %v, %d events, duplicate %v", c.cmd.ID, err, len(dup.Events), dup.Reply.Duplicate)
			}
			if dup.Reply.Decision == nil || dup.Reply.Decision.Outcome != c.want {
				t.Fatalf("repeat of %s: decision %+v, want the recorded %s one", c.cmd.ID, dup.Reply.Decision, c.want)
			}
		}
	})
	t.Run("after rejection", func(t *testing.T) {
		w := standard(t, nil, nil)
		w.tick("prod", h(11))
		first := &commands.Promote{Plan: "p1"}
		w.must(first, at1107)
		expectation{outcome: events.Rejected, codes: []string{"missing_intervals"}}.check(t, *w.st.Plans["p1"].Decision)
		w.complete("events@v2", h(12), events.RunBackfill, hrs(10, 11))
		expectation{outcome: events.Accepted, codes: []string{"no_gaps"}}.check(t, w.decided("p1", h(12)))
		dup, err := w.again(first)
		if err != nil || len(dup.Events) != 0 || dup.Reply.Decision == nil || dup.Reply.Decision.Outcome != events.Rejected {
			t.Fatalf("repeat of the first promotion: %v %+v", err, dup.Reply)
		}
	})
}
