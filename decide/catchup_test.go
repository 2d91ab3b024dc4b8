package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// requestCatchUp promotes p1 and returns the catch-up request it records.
func requestCatchUp(tb testing.TB, w *world, at time.Time) (Decision, events.CatchUpRequested) {
	tb.Helper()
	dec := w.promote("p1", at)
	if dec.Reply.CatchUp == nil || dec.Reply.Decision != nil {
		tb.Fatalf("promotion under catch-up: want a catch-up request, got decision %+v", dec.Reply.Decision)
	}
	for _, p := range dec.Events {
		if _, ok := p.(events.PromotionDecided); ok {
			tb.Fatalf("a catch-up request decided the promotion")
		}
	}
	return dec, *dec.Reply.CatchUp
}

// runCatchUp computes the outstanding work of req, as a worker would.
func runCatchUp(tb testing.TB, w *world, req events.CatchUpRequested, at time.Time) {
	tb.Helper()
	for _, wk := range Outstanding(w.st, req) {
		w.complete(wk.Snapshot, at, events.RunCatchUp, wk.Ranges...)
	}
	if left := Outstanding(w.st, req); len(left) > 0 {
		tb.Fatalf("outstanding after the work ran: %+v", left)
	}
}

func workOf(req events.CatchUpRequested, model string) *events.CatchUpWork {
	for i := range req.Work {
		if req.Work[i].Model == model {
			return &req.Work[i]
		}
	}
	return nil
}

// DESIGN.md, "Catch-up" and "Precise rules": catch-up does not reject on
// overlap; it invalidates the overlapping intervals of non-forward-only
// downstream candidates (in the same decision as the request), completes
// the parent's suffix, recomputes those child intervals, then retries
// strictly. caught_up goes only to the candidate whose own suffix was
// caught up; the recomputed child gets no_gaps.
func TestCatchUpRecomputesOverlappingChild(t *testing.T) {
	w := standard(t, nil, []int{0, 1}, sessions)
	w.tick("prod", h(11))
	w.complete("sessions@v1+p1", at1107, events.RunManual, hrs(10, 11))
	dec, req := requestCatchUp(t, w, at1107)
	var inv []events.IntervalsInvalidated
	for _, p := range dec.Events {
		if x, ok := p.(events.IntervalsInvalidated); ok {
			inv = append(inv, x)
		}
	}
	if len(inv) != 1 || inv[0].Snapshot != "sessions@v1+p1" || !interval.NewSet(inv[0].Ranges...).Equal(rs(hrs(10, 11))) {
		t.Fatalf("invalidations with the request: %+v", inv)
	}
	if w.st.Table("sessions@v1+p1").Overlaps(hrs(10, 11)) {
		t.Fatalf("the child's overlapping interval is still complete after the request")
	}
	ev, ses := workOf(req, "events"), workOf(req, "sessions")
	if ev == nil || !interval.NewSet(ev.Ranges...).Equal(rs(hrs(10, 11))) || ev.Advances != 1 {
		t.Fatalf("events work %+v", ev)
	}
	if ses == nil || !interval.NewSet(ses.Recompute...).Equal(rs(hrs(10, 11))) {
		t.Fatalf("sessions work %+v", ses)
	}
	// Work order: the parent before the child.
	if i, j := slices.IndexFunc(req.Work, func(x events.CatchUpWork) bool { return x.Model == "events" }),
		slices.IndexFunc(req.Work, func(x events.CatchUpWork) bool { return x.Model == "sessions" }); i > j {
		t.Errorf("work in order %v", req.Work)
	}
	left := Outstanding(w.st, req)
	if len(left) != 2 {
		t.Fatalf("outstanding %+v", left)
	}
	runCatchUp(t, w, req, h(11).Add(10*time.Minute))
	pd := w.decided("p1", h(11).Add(10*time.Minute))
	expectation{outcome: events.Accepted, codes: []string{"caught_up", "no_gaps"},
		missing: map[string]interval.Set{"events": nil, "sessions": nil}}.check(t, pd)
	if c := modelCodes(pd, "events"); !slices.Equal(c, []string{"caught_up"}) {
		t.Errorf("events codes %v", c)
	}
	if c := modelCodes(pd, "sessions"); !slices.Equal(c, []string{"no_gaps"}) {
		t.Errorf("sessions (recomputed) codes %v, want [no_gaps]", c)
	}
	if pd.CatchUpSeq != w.st.Plans["p1"].CatchUpSeq || pd.CatchUpSeq == 0 {
		t.Errorf("catch-up seq %d", pd.CatchUpSeq)
	}
	if len(pd.Repairs) != 0 || w.openRepairs() != 0 {
		t.Errorf("repairs after catch-up")
	}
}

// Catch-up recomputes every transitive non-forward-only downstream
// candidate whose complete intervals overlap the parent's suffix.
func TestCatchUpRecomputesGrandchild(t *testing.T) {
	w := standard(t, nil, []int{0, 1}, sessions, reports)
	w.tick("prod", h(11))
	w.complete("reports@v1+p1", at1107, events.RunManual, hrs(10, 11))
	_, req := requestCatchUp(t, w, at1107)
	if rep := workOf(req, "reports"); rep == nil || !interval.NewSet(rep.Recompute...).Equal(rs(hrs(10, 11))) {
		t.Fatalf("reports work %+v", rep)
	}
	runCatchUp(t, w, req, at1107)
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Accepted, codes: []string{"caught_up", "no_gaps"}}.check(t, pd)
	if c := modelCodes(pd, "reports"); !slices.Equal(c, []string{"no_gaps"}) {
		t.Errorf("reports codes %v", c)
	}
	if c := modelCodes(pd, "sessions"); !slices.Equal(c, []string{"caught_up"}) {
		t.Errorf("sessions codes %v", c)
	}
}

// A child missing its own suffix is caught up too, and says so.
func TestCatchUpOwnSuffixes(t *testing.T) {
	w := standard(t, nil, []int{0, 1}, sessions)
	w.tick("prod", h(11))
	_, req := requestCatchUp(t, w, at1107)
	if ses := workOf(req, "sessions"); ses == nil || !interval.NewSet(ses.Ranges...).Equal(rs(hrs(10, 11))) || len(ses.Recompute) > 0 {
		t.Fatalf("sessions work %+v", ses)
	}
	runCatchUp(t, w, req, at1107)
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Accepted, codes: []string{"caught_up"}}.check(t, pd)
	for _, m := range []string{"events", "sessions"} {
		if c := modelCodes(pd, m); !slices.Equal(c, []string{"caught_up"}) {
			t.Errorf("%s codes %v", m, c)
		}
	}
}

// Catch-up keeps a forward-only child's production rows, and the
// overlapping forward-only candidate adds the warning under catch-up too.
func TestCatchUpForwardOnlyChild(t *testing.T) {
	w := standard(t, nil, []int{0, 1}, sessionsFO)
	w.tick("prod", h(11))
	dec, req := requestCatchUp(t, w, at1107)
	for _, p := range dec.Events {
		if _, ok := p.(events.IntervalsInvalidated); ok {
			t.Fatalf("catch-up invalidated a forward-only child's rows: %+v", p)
		}
	}
	if ses := workOf(req, "sessions"); ses != nil && (len(ses.Recompute) > 0 || len(ses.Ranges) > 0) {
		t.Fatalf("work for the forward-only child: %+v", ses)
	}
	runCatchUp(t, w, req, at1107)
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Accepted, codes: []string{"caught_up", "forward_only_overlap_retained", "no_gaps"}}.check(t, pd)
	if fs := findings(pd, "forward_only_overlap_retained"); len(fs) != 1 || fs[0].Related != "sessions@v1+p1" {
		t.Errorf("warnings %+v", fs)
	}
	if !w.st.Table("sessions@v1").Covers(hrs(0, 11)) {
		t.Errorf("the production table lost rows: %v", w.st.Table("sessions@v1"))
	}
}

// DESIGN.md, "Decision codes" (amended 2026-12-04): under catch-up an
// overlapping forward-only candidate's warning is judged on the view the
// strict retry reads, after any advance during catch-up, against each
// caught-up suffix. The production table of sessions lacks [10:00, 11:00)
// when the catch-up is requested (no overlap then); the 12:00 tick during
// catch-up fills it, so the retry warns over the caught-up suffix [10:00,
// 11:00), and not over [11:00, 12:00), which no catch-up computed (catch-up
// alone). With a trailing-gap bound the allowance judges [11:00, 12:00) and
// warns over it too: one warning per suffix.
func TestForwardOnlyWarningOnTheRetryView(t *testing.T) {
	for _, c := range []struct {
		name   string
		bounds []int
		want   expectation
		ranges []interval.Set // of the warnings, in order
	}{
		{"catch-up only", []int{0, 1}, expectation{outcome: events.Rejected, codes: []string{"catch_up_exhausted", "forward_only_overlap_retained"},
			missing: map[string]interval.Set{"events": rs(hrs(11, 12))}}, []interval.Set{rs(hrs(10, 11))}},
		{"catch-up and trailing 1", []int{1, 1}, expectation{outcome: events.Accepted, codes: []string{"forward_only_overlap_retained", "no_gaps", "trailing_gap_accepted"},
			missing: map[string]interval.Set{"events": rs(hrs(11, 12))}}, []interval.Set{rs(hrs(11, 12)), rs(hrs(10, 11))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := standard(t, nil, c.bounds, sessionsFO)
			w.tick("prod", h(11))
			w.invalidate("sessions@v1", h(11), hrs(10, 11))
			_, req := requestCatchUp(t, w, at1107)
			for _, f := range req.Findings {
				if f.Code == "forward_only_overlap_retained" {
					t.Fatalf("a warning at the request, when sessions had no overlap: %+v", f)
				}
			}
			runCatchUp(t, w, req, at1107)
			w.tick("prod", h(12))
			if !w.st.Table("sessions@v1").Covers(hrs(10, 12)) {
				t.Fatalf("the 12:00 tick did not fill the production table: %v", w.st.Table("sessions@v1"))
			}
			pd := w.decided("p1", h(12).Add(3*time.Minute))
			c.want.check(t, pd)
			fs := findings(pd, "forward_only_overlap_retained")
			if len(fs) != len(c.ranges) {
				t.Fatalf("warnings %+v, want %d", fs, len(c.ranges))
			}
			for i, f := range fs {
				if f.Related != "sessions@v1+p1" || !interval.NewSet(f.Ranges...).Equal(c.ranges[i]) {
					t.Errorf("warning %d: %s over %v, want sessions@v1+p1 over %v", i, f.Related, interval.Set(f.Ranges), c.ranges[i])
				}
			}
		})
	}
}

// A second advance during catch-up: catch_up_exhausted under catch-up
// alone; with a trailing-gap bound the rest is judged by the allowance
// (one advance passes, two exceed it).
func TestAdvanceDuringCatchUp(t *testing.T) {
	for _, c := range []struct {
		name   string
		bounds []int
		ticks  []int
		want   expectation
	}{
		{"catch-up only", []int{0, 1}, []int{12}, expectation{outcome: events.Rejected, codes: []string{"catch_up_exhausted"},
			missing: map[string]interval.Set{"events": rs(hrs(11, 12))}, advances: map[string]int{"events": 1}}},
		{"catch-up and trailing 1, one advance", []int{1, 1}, []int{12}, expectation{outcome: events.Accepted,
			missing: map[string]interval.Set{"events": rs(hrs(11, 12))}, advances: map[string]int{"events": 1}}},
		{"catch-up and trailing 1, two advances", []int{1, 1}, []int{12, 13}, expectation{outcome: events.Rejected,
			codes:   []string{"trailing_gap_exceeds_bound"},
			missing: map[string]interval.Set{"events": rs(hrs(11, 13))}, advances: map[string]int{"events": 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := standard(t, nil, c.bounds)
			w.tick("prod", h(11))
			_, req := requestCatchUp(t, w, at1107)
			runCatchUp(t, w, req, at1107)
			last := 0
			for _, x := range c.ticks {
				w.tick("prod", h(x))
				last = x
			}
			pd := w.decided("p1", h(last).Add(3*time.Minute))
			if c.want.outcome == events.Accepted {
				// The allowance accepted what catch-up still misses.
				if !slices.Contains(pd.Codes, "trailing_gap_accepted") {
					t.Fatalf("codes %v, want trailing_gap_accepted", pd.Codes)
				}
				c.want.codes = pd.Codes
				if w.openRepairs() != 1 {
					t.Errorf("open repairs %d", w.openRepairs())
				}
			}
			c.want.check(t, pd)
		})
	}
}

// A catch-up retry re-checks every candidate: one that lost coverage
// meanwhile fails the strict retry.
func TestCatchUpRetryRechecksEveryCandidate(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "clicks"})
	w.run("prod", h(6), h(10))
	w.hourly("events", "v2")
	w.hourly("clicks", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2", "clicks": "v2"}, h(10), 0, 1)
	w.backfill("p1", h(10))
	w.complete("clicks@v2", h(11), events.RunBackfill, hrs(10, 11))
	w.tick("prod", h(11))
	_, req := requestCatchUp(t, w, at1107)
	runCatchUp(t, w, req, at1107)
	w.invalidate("clicks@v2", at1107, hrs(3, 4))
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Rejected, codes: []string{"missing_intervals"},
		missing: map[string]interval.Set{"clicks": rs(hrs(3, 4)), "events": nil}}.check(t, pd)
}

// With both bounds, catch-up runs first when its bound admits the suffix.
func TestBothBoundsCatchUpFirst(t *testing.T) {
	w := standard(t, nil, []int{1, 1})
	w.tick("prod", h(11))
	_, req := requestCatchUp(t, w, at1107)
	runCatchUp(t, w, req, at1107)
	expectation{outcome: events.Accepted, codes: []string{"caught_up"}}.check(t, w.decided("p1", at1107))
	if w.openRepairs() != 0 {
		t.Errorf("repairs after a complete catch-up")
	}
}

// A plan whose catch-up is outstanding is still plan-wide conflicting once
// another plan moved the generation.
func TestCatchUpThenConflict(t *testing.T) {
	w := standard(t, nil, []int{0, 1})
	w.hourly("events", "v3")
	w.plan("p2", "prod", map[string]string{"events": "v3"}, h(10), 1)
	w.backfill("p2", h(10))
	w.tick("prod", h(11))
	requestCatchUp(t, w, at1107)
	expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"}}.check(t, w.decided("p2", at1107))
	expectation{outcome: events.Rejected, codes: []string{"conflicting_plan"}}.check(t, w.decided("p1", at1107))
}

// The strict retry waits for the catch-up work: a promotion while it is
// outstanding records no decision.
func TestNoRetryWhileCatchUpOutstanding(t *testing.T) {
	w := standard(t, nil, []int{0, 1})
	w.tick("prod", h(11))
	requestCatchUp(t, w, at1107)
	seq := w.st.Seq
	dec, err := w.do(&commands.Promote{Plan: "p1"}, at1107)
	if err == nil && len(dec.Events) > 0 {
		t.Fatalf("a promotion with the catch-up outstanding appended %d events: %+v", len(dec.Events), dec.Reply)
	}
	if w.st.Seq != seq || w.st.Plans["p1"].Decision != nil {
		t.Fatalf("a decision was recorded before the catch-up work ran")
	}
}
