package decide

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// The whole kinds (full, view, seed; docs/kinds.md): every work range of
// a whole-kind version spans from its start, in one batch; its coverage
// after a computation as of tick T is [start, RF(T)); the promotion
// check is unchanged.

const reportSQL = "SELECT count(*) AS n FROM events"

// report is an @hourly FULL model over events.
var report = model{name: "report", kind: events.Full, sql: reportSQL, deps: []string{"events"}}

// fullRace is the race of DESIGN.md on a FULL model: events and report
// are deployed at 06:00 and scheduled until 10:00; report v2 (another
// query) is planned at 10:00 with bounds and backfilled (computed as of
// 10:00); the 11:00 tick then recomputes the incumbent as of 11:00.
func fullRace(tb testing.TB, bounds ...int) *world {
	tb.Helper()
	w := deployed(tb, h(6), model{name: "events"}, report)
	w.run("prod", h(6), h(10))
	v2 := report
	v2.version, v2.sql = "v2", reportSQL+" WHERE true"
	w.register(v2.command())
	w.plan("p1", "prod", map[string]string{"report": "v2"}, h(10), bounds...)
	w.backfill("p1", h(10))
	w.tick("prod", h(11))
	return w
}

func wantSet(t *testing.T, what string, got []interval.Range, want ...interval.Range) {
	t.Helper()
	if g, w := interval.NewSet(got...), interval.NewSet(want...); !g.Equal(w) {
		t.Fatalf("%s: got %v, want %v", what, g, w)
	}
}

// A whole kind's work always starts at its start: the deploy's backfill,
// each tick's work (never only the newly ready interval), the plan's
// backfill; its coverage after each computation is [start, RF).
func TestWholeKindWorkSpansFromStart(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	wantSet(t, "deploy backfill", w.st.Plans["deploy"].Built.Candidates[1].Backfill, hrs(0, 6))
	for i := 7; i <= 10; i++ {
		for _, a := range w.tick("prod", h(i)) {
			want := hrs(i-1, i)
			if a.Model == "report" {
				want = hrs(0, i)
			}
			wantSet(t, a.Model+" work at "+h(i).Format("15:04"), a.Ranges, want)
		}
		wantSet(t, "report coverage", w.st.Table("report@v1"), hrs(0, i))
	}
	// A tick of no new readiness schedules nothing, whole or not.
	if advs := w.advance("prod", h(10).Add(30*time.Minute)); len(advs) != 0 {
		t.Fatalf("advance between ticks: %+v", advs)
	}
	v2 := report
	v2.version, v2.sql = "v2", reportSQL+" WHERE true"
	w.register(v2.command())
	pl := w.plan("p1", "prod", map[string]string{"report": "v2"}, h(10).Add(5*time.Minute))
	wantSet(t, "plan backfill", pl.Candidates[0].Backfill, hrs(0, 10))
}

// A whole-kind incumbent with a hole (an invalidation) is recomputed
// whole up to its frontier, never as of an earlier tick.
func TestWholeKindHoleRecomputedToFrontier(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	w.run("prod", h(6), h(10))
	w.invalidate("report@v1", h(10), hrs(3, 4))
	for _, a := range w.advance("prod", h(10).Add(10*time.Minute)) {
		if a.Model == "report" {
			wantSet(t, "report work", a.Ranges, hrs(0, 10))
			return
		}
	}
	t.Fatal("the hole was not scheduled")
}

// A derived version of a whole kind is a new object: its own table,
// backfilled whole, never the incumbent's.
func TestWholeKindDerivedVersionOwnsTable(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	w.run("prod", h(6), h(8))
	w.hourly("events", "v2")
	pl := w.plan("p1", "prod", map[string]string{"events": "v2"}, h(8))
	c := pl.Candidates[1]
	if c.Snapshot != "report@v1+p1" || c.Table != "report@v1+p1" || !c.Derived {
		t.Fatalf("derived candidate %+v", c)
	}
	wantSet(t, "derived backfill", c.Backfill, hrs(0, 8))
}

// A restated range of a whole kind's upstream recomputes it whole; what
// it invalidates is the affected part its table covered.
func TestRestateWholeKindRecomputesWhole(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	w.run("prod", h(6), h(10))
	dec := w.must(&commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{hrs(3, 4)}}, h(10).Add(5*time.Minute))
	req := dec.Reply.Restatement
	if req == nil || len(req.Work) != 2 || req.Work[1].Model != "report" {
		t.Fatalf("restatement %+v", req)
	}
	wantSet(t, "report restate work", req.Work[1].Ranges, hrs(0, 10))
	wantSet(t, "report invalidated", req.Work[1].Invalidated, hrs(3, 4))
	wantSet(t, "events restate work", req.Work[0].Ranges, hrs(3, 4))
	// Restating the whole kind itself: the same.
	dec = w.must(&commands.Restate{Env: "prod", Model: "report", Ranges: []interval.Range{hrs(5, 6)}}, h(10).Add(6*time.Minute))
	wantSet(t, "report restated itself", dec.Reply.Restatement.Work[0].Ranges, hrs(0, 10))
}

// A FULL candidate computed before the incumbent's last tick accepted
// under a trailing-gap bound of 1: the debt is the suffix, the repair
// work the whole object; the repair work's completion closes it.
func TestFullRepairWorkClosesDebt(t *testing.T) {
	w := fullRace(t, 1)
	pd := w.decided("p1", at1107)
	if pd.Outcome != events.Accepted || pd.Models["report"].Advances != 1 {
		t.Fatalf("decision %s %v advances %d", pd.Outcome, pd.Codes, pd.Models["report"].Advances)
	}
	wantSet(t, "debt", pd.Models["report"].Missing, hrs(10, 11))
	if len(pd.Repairs) != 1 {
		t.Fatalf("repairs %+v", pd.Repairs)
	}
	wantSet(t, "repair work", pd.Repairs[0].Ranges, hrs(0, 11))
	dec := w.complete("report@v2", h(11).Add(20*time.Minute), events.RunRepair, pd.Repairs[0].Ranges...)
	if len(dec.Events) != 2 || w.openRepairs() != 0 {
		t.Fatalf("repair completion: %d events, %d open debts", len(dec.Events), w.openRepairs())
	}
}

// Catch-up of a whole-kind child whose candidate covers an upstream
// suffix: the child is invalidated and recomputed whole, and gets
// no_gaps (its own suffix was not caught up); the parent gets caught_up
// with its own suffix.
func TestCatchUpRecomputesWholeChildWhole(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	w.run("prod", h(6), h(10))
	w.hourly("events", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(10), 0, 1)
	w.backfill("p1", h(10))
	w.tick("prod", h(11))
	// The child candidate computed as of 11:00 (by hand): it overlaps the
	// parent's suffix.
	w.complete("report@v1+p1", at1107, events.RunManual, hrs(0, 11))
	_, req := requestCatchUp(t, w, at1107)
	ev, rep := workOf(req, "events"), workOf(req, "report")
	wantSet(t, "parent work", ev.Ranges, hrs(10, 11))
	wantSet(t, "child recompute", rep.Recompute, hrs(0, 11))
	if len(rep.Ranges) != 0 {
		t.Fatalf("child ranges %v", rep.Ranges)
	}
	runCatchUp(t, w, req, h(11).Add(10*time.Minute))
	pd := w.decided("p1", h(11).Add(10*time.Minute))
	if pd.Outcome != events.Accepted {
		t.Fatalf("retry %s %v", pd.Outcome, pd.Codes)
	}
	if c := pd.Models["events"].Codes; len(c) != 1 || c[0] != "caught_up" {
		t.Fatalf("events codes %v", c)
	}
	if c := pd.Models["report"].Codes; len(c) != 1 || c[0] != "no_gaps" {
		t.Fatalf("report codes %v", c)
	}
}

// Outstanding catch-up work of a whole kind is the whole object again,
// never the part its table misses.
func TestOutstandingWholeKind(t *testing.T) {
	w := fullRace(t, 0, 1)
	_, req := requestCatchUp(t, w, at1107)
	left := Outstanding(w.st, req)
	if len(left) != 1 {
		t.Fatalf("outstanding %+v", left)
	}
	wantSet(t, "outstanding", left[0].Ranges, hrs(0, 11))
}

func TestGoldenWholeKinds(t *testing.T) {
	t.Run("full_scheduler_work", func(t *testing.T) {
		w := deployed(t, h(6), model{name: "events"}, report)
		w.run("prod", h(6), h(10))
		golden(t, "full_scheduler_work", w.must(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, h(11)))
	})
	t.Run("full_rejected_strict", func(t *testing.T) {
		w := fullRace(t)
		golden(t, "full_rejected_strict", w.promote("p1", at1107))
	})
	t.Run("full_trailing_gap_accepted", func(t *testing.T) {
		w := fullRace(t, 1)
		golden(t, "full_trailing_gap_accepted", w.promote("p1", at1107))
	})
	t.Run("full_advance_closes_repair", func(t *testing.T) {
		// The repair work not run yet (a paused worker): the next tick's
		// work is the whole object, all of it repair work, and its
		// completion closes the debt.
		w := fullRace(t, 1)
		w.promote("p1", at1107)
		dec := w.must(&commands.AdvanceScheduler{Env: "prod", Generation: 2}, h(12))
		golden(t, "full_advance_closes_repair", dec)
		var a *events.SchedulerAdvanced
		for i := range dec.Reply.Advances {
			if dec.Reply.Advances[i].Model == "report" {
				a = &dec.Reply.Advances[i]
			}
		}
		if a == nil {
			t.Fatal("report not scheduled")
		}
		wantSet(t, "repairs", a.Repairs, hrs(0, 12))
		golden(t, "full_completion_closes_repair", w.complete("report@v2", h(12), events.RunScheduled, a.Ranges...))
		if w.openRepairs() != 0 {
			t.Fatalf("%d open debts", w.openRepairs())
		}
	})
	t.Run("full_catch_up_request", func(t *testing.T) {
		w := fullRace(t, 0, 1)
		golden(t, "full_catch_up_request", w.promote("p1", at1107))
	})
	t.Run("full_caught_up", func(t *testing.T) {
		w := fullRace(t, 0, 1)
		_, req := requestCatchUp(t, w, at1107)
		runCatchUp(t, w, req, h(11).Add(10*time.Minute))
		golden(t, "full_caught_up", w.promote("p1", h(11).Add(10*time.Minute)))
	})
	t.Run("view_and_seed_work", func(t *testing.T) {
		view := model{name: "recent", kind: events.View, sql: "SELECT * FROM events", deps: []string{"events"}}
		seed := model{name: "regions", kind: events.Seed, cron: "@daily", seed: "id,name\n1,north\n"}
		w := deployed(t, h(6), model{name: "events"}, view, seed)
		golden(t, "view_and_seed_work", w.must(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, day(1)))
	})
}

// The allowance counts the ticks since the candidate was computed: two
// ticks behind exceed a bound of 1 (trailing_gap_exceeds_bound, advances
// 2); a tick of the incumbent during catch-up exhausts it.
func TestFullAdvancesAreTicks(t *testing.T) {
	w := fullRace(t, 1)
	w.tick("prod", h(12))
	pd := w.decided("p1", h(12).Add(7*time.Minute))
	if pd.Outcome != events.Rejected || pd.Codes[0] != "trailing_gap_exceeds_bound" || pd.Models["report"].Advances != 2 {
		t.Fatalf("two ticks behind: %s %v advances %d", pd.Outcome, pd.Codes, pd.Models["report"].Advances)
	}
	wantSet(t, "missing", pd.Models["report"].Missing, hrs(10, 12))

	w = fullRace(t, 0, 1)
	_, req := requestCatchUp(t, w, at1107)
	w.tick("prod", h(12))
	runCatchUp(t, w, req, h(12).Add(5*time.Minute))
	pd = w.decided("p1", h(12).Add(5*time.Minute))
	if pd.Outcome != events.Rejected || len(pd.Codes) != 1 || pd.Codes[0] != "catch_up_exhausted" {
		t.Fatalf("a tick during catch-up: %s %v", pd.Outcome, pd.Codes)
	}
	wantSet(t, "missing after catch-up", pd.Models["report"].Missing, hrs(11, 12))
}

// A whole kind is computed whole: a completion that is not one range from
// its start is refused (invalid on ranges) and appends nothing.
func TestWholeKindCompletionFromStart(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	for _, r := range [][]interval.Range{{hrs(6, 7)}, {hrs(0, 2), hrs(3, 7)}} {
		e := w.refused(&commands.CompleteIntervals{Model: "report", Version: "v1", Ranges: r, RunKind: events.RunManual}, h(7), commands.CodeInvalid)
		if e.Field != "ranges" {
			t.Fatalf("field %q", e.Field)
		}
	}
	w.complete("report@v1", h(7), events.RunManual, hrs(0, 7))
	wantSet(t, "coverage", w.st.Table("report@v1"), hrs(0, 7))
}

// A forward-only version would write its incumbent's object; a whole
// kind's is replaced whole (or is a view): refused, invalid on the
// version, nothing appended.
func TestForwardOnlyOverWholeKindRefused(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, report)
	fo := model{name: "report", version: "v2", kind: events.ForwardOnly, deps: []string{"events"}}
	w.register(fo.command())
	e := w.refused(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"report": "v2"}}, h(7), commands.CodeInvalid)
	if e.Field != "versions.report" {
		t.Fatalf("field %q", e.Field)
	}
}

// A restated range of a whole kind's upstream before the whole kind's own
// start still recomputes it whole (docs/kinds.md: a restated range of one
// of its upstream models recomputes it whole): its query reads its
// upstream's table whole, those rows included. It invalidates nothing (it
// covered nothing of the range).
func TestRestateUpstreamBeforeWholeKindStart(t *testing.T) {
	late := report
	late.start = h(5)
	w := deployed(t, h(6), model{name: "events"}, late)
	w.run("prod", h(6), h(10))
	dec := w.must(&commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{hrs(3, 4)}}, h(10).Add(5*time.Minute))
	req := dec.Reply.Restatement
	if req == nil || len(req.Work) != 2 || req.Work[1].Model != "report" {
		t.Fatalf("restatement %+v", req)
	}
	wantSet(t, "report restate work", req.Work[1].Ranges, hrs(5, 10))
	if len(req.Work[1].Invalidated) != 0 {
		t.Fatalf("report invalidated %v, want nothing", req.Work[1].Invalidated)
	}
	// The work completes like any restatement's.
	w.complete("report@v1", h(10).Add(10*time.Minute), events.RunRestate, hrs(5, 10))
	wantSet(t, "report coverage", w.st.Table("report@v1"), hrs(5, 10))
}
