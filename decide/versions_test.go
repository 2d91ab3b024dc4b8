package decide

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// candidateOf is the candidate of model in plan, failing the test if none.
func candidateOf(tb testing.TB, pl events.PlanBuilt, model string) events.Candidate {
	tb.Helper()
	for _, c := range pl.Candidates {
		if c.Model == model {
			return c
		}
	}
	tb.Fatalf("plan %s has no candidate for %s", pl.Plan, model)
	return events.Candidate{}
}

// DESIGN.md, "Versions, tables and plans": a user's version name may not
// contain '+'; a version's start must be aligned to its unit; a plan sets
// at least one version.
func TestInvalidCommands(t *testing.T) {
	t.Run("start not aligned", func(t *testing.T) {
		w := newWorld(t)
		w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", Start: t0.Add(30 * time.Minute)}, t0, commands.CodeInvalid)
		w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@daily", Start: h(1)}, t0, commands.CodeInvalid)
	})
	t.Run("schedules", func(t *testing.T) {
		w := newWorld(t)
		// More often than every 5 minutes.
		w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "*/2 * * * *", Start: t0}, t0, commands.CodeInvalid)
		// A unit coarser than the cron needs allow_partials.
		w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", IntervalUnit: interval.Day, Start: t0}, t0, commands.CodeInvalid)
		w.must(&commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", IntervalUnit: interval.Day, AllowPartials: true, Start: t0}, t0)
		// A finer unit is fine.
		w.must(&commands.RegisterSnapshot{Model: "events", Version: "v2", Cron: "@daily", IntervalUnit: interval.Hour, Start: t0}, t0)
	})
	t.Run("empty plan", func(t *testing.T) {
		w := deployed(t, h(6), model{name: "events"})
		w.refused(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{}}, h(7), commands.CodeInvalid)
		w.refused(&commands.BuildPlan{Plan: "p1", Env: "prod"}, h(7), commands.CodeInvalid)
	})
	t.Run("completions only of ended, aligned intervals from the start", func(t *testing.T) {
		w := deployed(t, h(6), model{name: "events", start: h(2)})
		for _, r := range []interval.Range{hrs(6, 7), interval.R(h(5).Add(30*time.Minute), h(6)), hrs(1, 3)} {
			w.refused(&commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{r}}, h(6).Add(30*time.Minute), commands.CodeInvalid)
		}
		w.must(&commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(2, 6)}}, h(6))
	})
	t.Run("plus in a user's version", func(t *testing.T) {
		w := newWorld(t)
		w.refused(&commands.RegisterSnapshot{Model: "events", Version: "v1+p1", Cron: "@hourly", Start: t0}, t0, commands.CodeInvalid)
	})
}

// A plan whose versions all equal the incumbents is valid and passes with
// no code.
func TestPlanOfIncumbentsPassesWithNoCode(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "sessions", deps: []string{"events"}})
	w.run("prod", h(6), h(10))
	pl := w.plan("p1", "prod", map[string]string{"events": "v1", "sessions": "v1"}, h(10), 1)
	for _, c := range pl.Candidates {
		if c.Derived || len(c.Backfill) > 0 {
			t.Errorf("candidate %+v of a plan that changes nothing", c)
		}
	}
	w.tick("prod", h(11))
	pd := w.decided("p1", at1107)
	if pd.Outcome != events.Accepted || len(pd.Codes) != 0 || len(pd.Repairs) != 0 {
		t.Fatalf("decision %s %v repairs %v, want accepted with no code", pd.Outcome, pd.Codes, pd.Repairs)
	}
	for m, f := range pd.Models {
		if len(f.Codes) > 0 || len(f.Missing) > 0 {
			t.Errorf("model %s: %+v", m, f)
		}
	}
}

// A plan's candidates are the versions it sets plus every downstream model
// of them; only a downstream model the plan does not set gets a derived
// version, and a model set to its incumbent derives nothing downstream.
func TestDerivedOnlyForModelsNotSet(t *testing.T) {
	setup := func(t *testing.T) *world {
		w := deployed(t, h(6), model{name: "events"}, model{name: "sessions", deps: []string{"events"}})
		w.hourly("events", "v2")
		return w
	}
	t.Run("unchanged parent", func(t *testing.T) {
		w := setup(t)
		pl := w.plan("p1", "prod", map[string]string{"events": "v1"}, h(6))
		if len(pl.Candidates) != 1 || pl.Candidates[0].Snapshot != "events@v1" {
			t.Fatalf("candidates %+v, want events@v1 alone", pl.Candidates)
		}
		if _, ok := w.st.Snapshots["sessions@v1+p1"]; ok {
			t.Fatalf("a plan that changes nothing derived sessions@v1+p1")
		}
	})
	t.Run("child set to its incumbent", func(t *testing.T) {
		w := setup(t)
		pl := w.plan("p1", "prod", map[string]string{"events": "v2", "sessions": "v1"}, h(6))
		if c := candidateOf(t, pl, "sessions"); c.Snapshot != "sessions@v1" || c.Derived {
			t.Fatalf("sessions candidate %s (derived %v), want the version the plan sets, sessions@v1", c.Snapshot, c.Derived)
		}
	})
	t.Run("child set to a new version", func(t *testing.T) {
		w := setup(t)
		w.hourly("sessions", "v2", "events")
		pl := w.plan("p1", "prod", map[string]string{"events": "v2", "sessions": "v2"}, h(6))
		if c := candidateOf(t, pl, "sessions"); c.Snapshot != "sessions@v2" || c.Derived {
			t.Fatalf("sessions candidate %s (derived %v)", c.Snapshot, c.Derived)
		}
	})
}

// Derived versions are <base>+<plan id>, base cut at the first '+', so
// names never grow along a chain of plans; a derived version of a
// forward-only model writes its incumbent's table.
func TestDerivedVersions(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "sessions", deps: []string{"events"}},
		model{name: "reports", deps: []string{"sessions"}, kind: events.ForwardOnly})
	for i, c := range []struct{ plan, events, sessions, reports string }{
		{"p1", "v2", "sessions@v1+p1", "reports@v1+p1"},
		{"p2", "v3", "sessions@v1+p2", "reports@v1+p2"},
		{"p3", "v4", "sessions@v1+p3", "reports@v1+p3"},
	} {
		at := h(6 + i)
		w.hourly("events", c.events)
		pl := w.plan(c.plan, "prod", map[string]string{"events": c.events}, at)
		ses, rep := candidateOf(t, pl, "sessions"), candidateOf(t, pl, "reports")
		if ses.Snapshot != c.sessions || !ses.Derived {
			t.Fatalf("%s: sessions candidate %s (derived %v), want %s", c.plan, ses.Snapshot, ses.Derived, c.sessions)
		}
		if rep.Snapshot != c.reports || !rep.Derived {
			t.Fatalf("%s: reports candidate %s, want %s", c.plan, rep.Snapshot, c.reports)
		}
		if ses.Table != ses.Snapshot {
			t.Errorf("%s: incremental derived %s writes %s, want its own table", c.plan, ses.Snapshot, ses.Table)
		}
		if rep.Table != "reports@v1" {
			t.Errorf("%s: forward-only derived %s writes %s, want its incumbent's table reports@v1", c.plan, rep.Snapshot, rep.Table)
		}
		if len(rep.Backfill) != 0 {
			t.Errorf("%s: %s on its incumbent's table has a backfill set %v", c.plan, rep.Snapshot, rep.Backfill)
		}
		if len(ses.Upstream) != 1 || ses.Upstream[0] != "events@"+c.events {
			t.Errorf("%s: sessions reads %v", c.plan, ses.Upstream)
		}
		w.backfill(c.plan, at)
		if pd := w.decided(c.plan, at); pd.Outcome != events.Accepted {
			t.Fatalf("%s: %s %v", c.plan, pd.Outcome, pd.Codes)
		}
		if got := w.incumbent("prod", "sessions"); got != c.sessions {
			t.Fatalf("%s: sessions incumbent %s", c.plan, got)
		}
	}
}

// A forward-only version writes the table of its incumbent in the plan's
// env at build, never the latest registered version's; it has no backfill
// set, is not gap-checked, passes with no_gaps, and after promotion the
// scheduler keeps writing that table.
func TestForwardOnlyWritesIncumbentTable(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"})
	w.run("prod", h(6), h(10))
	w.hourly("events", "v2") // incremental, never deployed
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v3", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	pl := w.plan("p1", "prod", map[string]string{"events": "v3"}, h(10))
	c := candidateOf(t, pl, "events")
	if c.Table != "events@v1" {
		t.Fatalf("forward-only v3 writes %s, want its incumbent's table events@v1", c.Table)
	}
	if len(c.Backfill) != 0 {
		t.Fatalf("backfill set %v on the incumbent's table", c.Backfill)
	}
	// The incumbent moves on; the candidate shares its coverage.
	w.tick("prod", h(11))
	pd := w.decided("p1", at1107)
	if pd.Outcome != events.Accepted || len(pd.Codes) != 1 || pd.Codes[0] != "no_gaps" {
		t.Fatalf("decision %s %v, want accepted [no_gaps]", pd.Outcome, pd.Codes)
	}
	if f := pd.Models["events"]; len(f.Missing) != 0 || f.Advances != 0 {
		t.Fatalf("model finding %+v", f)
	}
	if w.openRepairs() != 0 {
		t.Fatalf("%d repair debts", w.openRepairs())
	}
	advs := w.advance("prod", h(12))
	if len(advs) != 1 || advs[0].Snapshot != "events@v3" {
		t.Fatalf("advances %+v", advs)
	}
	dec := w.complete("events@v3", h(12), events.RunScheduled, advs[0].Ranges...)
	ic := dec.Events[0].(events.IntervalsCompleted)
	if ic.Table != "events@v1" {
		t.Fatalf("the scheduled run of v3 writes %s, want events@v1", ic.Table)
	}
	if !w.st.Table("events@v1").Covers(hrs(0, 12)) || !w.st.Table("events@v2").Empty() || !w.st.Table("events@v3").Empty() {
		t.Fatalf("coverage %v", w.st.Coverage)
	}
}

// A chain of forward-only versions keeps writing the first table: each
// writes its incumbent's, which is the one its incumbent writes.
func TestForwardOnlyChain(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"})
	for i, v := range []string{"v2", "v3", "v4"} {
		at := h(7 + i)
		w.register(commands.RegisterSnapshot{Model: "events", Version: v, Cron: "@hourly", SnapshotKind: events.ForwardOnly})
		w.tick("prod", at)
		plan := "p" + v
		if c := candidateOf(t, w.plan(plan, "prod", map[string]string{"events": v}, at), "events"); c.Table != "events@v1" || len(c.Backfill) > 0 {
			t.Fatalf("%s writes %s, backfill %v", v, c.Table, c.Backfill)
		}
		expectation{outcome: events.Accepted, codes: []string{"no_gaps"}}.check(t, w.decided(plan, at))
	}
}

// A plan's candidates, and so its repair work, come in dependency order.
func TestCandidatesInDependencyOrder(t *testing.T) {
	w := deployed(t, h(6), model{name: "z_raw"}, model{name: "m_mid", deps: []string{"z_raw"}}, model{name: "a_agg", deps: []string{"m_mid"}})
	w.hourly("z_raw", "v2")
	pl := w.plan("p1", "prod", map[string]string{"z_raw": "v2"}, h(6))
	var got []string
	for _, c := range pl.Candidates {
		got = append(got, c.Model)
	}
	if len(got) != 3 || got[0] != "z_raw" || got[1] != "m_mid" || got[2] != "a_agg" {
		t.Fatalf("candidates %v, want [z_raw m_mid a_agg]", got)
	}
}

// A forward-only version with no incumbent owns a new table, with a
// backfill set like any new table.
func TestForwardOnlyWithoutIncumbentOwnsTable(t *testing.T) {
	w := newWorld(t)
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	pl := w.plan("p1", "prod", map[string]string{"events": "v1"}, h(5).Add(30*time.Minute))
	c := candidateOf(t, pl, "events")
	if c.Table != "events@v1" || !interval.NewSet(c.Backfill...).Equal(rs(hrs(0, 5))) {
		t.Fatalf("candidate table %s backfill %v", c.Table, c.Backfill)
	}
}

// A forward-only version is bound to one table by the first plan that names
// it; a plan that would move it to another table is refused.
func TestForwardOnlyBoundToOneTable(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	w.hourly("events", "v2")
	w.deploy("prod", "d1", map[string]string{"events": "v1"}, h(6))
	w.deploy("dev", "d2", map[string]string{"events": "v2"}, h(6))
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v3", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	if c := candidateOf(t, w.plan("p1", "prod", map[string]string{"events": "v3"}, h(7)), "events"); c.Table != "events@v1" {
		t.Fatalf("p1 table %s", c.Table)
	}
	w.refused(&commands.BuildPlan{Plan: "p2", Env: "dev", Versions: map[string]string{"events": "v3"}}, h(7), commands.CodeConflict)
	if c := candidateOf(t, w.plan("p3", "prod", map[string]string{"events": "v3"}, h(7)), "events"); c.Table != "events@v1" {
		t.Fatalf("p3 (same table) table %s", c.Table)
	}
}

// Two writers build plans binding the same forward-only version to
// different tables from the same view: the second append must fail its
// condition, or the version ends up writing a table that is not its
// incumbent's in the second plan's env.
func TestForwardOnlyBindingUnderConcurrency(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	w.hourly("events", "v2")
	w.deploy("prod", "d1", map[string]string{"events": "v1"}, h(6))
	w.deploy("dev", "d2", map[string]string{"events": "v2"}, h(6))
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v3", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	p1 := &commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v3"}}
	p2 := &commands.BuildPlan{Plan: "p2", Env: "dev", Versions: map[string]string{"events": "v3"}}
	d1, d2 := w.decideOnly(p1, h(7)), w.decideOnly(p2, h(7))
	w.fold(p1, h(7), d1.Events)
	if !holds(w.st, d2.Expect) {
		return // the second writer re-reads and is refused: fine
	}
	w.fold(p2, h(7), d2.Events)
	// p2 is in the log: in dev, v3 must write its incumbent's table.
	if pd := w.decided("p2", h(7)); pd.Outcome != events.Accepted {
		t.Fatalf("p2: %s %v", pd.Outcome, pd.Codes)
	}
	advs := w.advance("dev", h(8))
	if len(advs) != 1 || advs[0].Snapshot != "events@v3" {
		t.Fatalf("dev advances %+v", advs)
	}
	ic := w.complete("events@v3", h(8), events.RunScheduled, advs[0].Ranges...).Events[0].(events.IntervalsCompleted)
	if ic.Table != "events@v2" {
		t.Fatalf("in dev, v3 (incumbent events@v2 at build) writes %s", ic.Table)
	}
}

// DESIGN.md, "Backfill set": whole intervals of the candidate's unit, from
// its start to the captured incumbent frontier floored to the candidate's
// unit (not floored with allow_partials; with no incumbent, or an
// incumbent with no coverage at build, the candidate's RF at build).
func TestBackfillSet(t *testing.T) {
	for _, c := range []struct {
		name string
		// inc is deployed at deployAt (nil: no incumbent).
		inc      *model
		deployAt time.Time
		cand     model
		// prep runs before the build.
		prep    func(w *world)
		buildAt time.Time
		want    interval.Set
	}{
		{
			name: "same schedule", inc: &model{name: "events"}, deployAt: h(10),
			cand: model{name: "events", version: "v2"}, buildAt: h(10).Add(20 * time.Minute),
			want: rs(hrs(0, 10)),
		},
		{
			name: "coarser unit floors the captured frontier", inc: &model{name: "events"}, deployAt: day(2).Add(10 * time.Hour),
			cand: model{name: "events", version: "v2", cron: "@daily"}, buildAt: day(2).Add(10 * time.Hour),
			want: rs(interval.R(day(0), day(2))),
		},
		{
			name: "allow_partials does not floor", inc: &model{name: "events"}, deployAt: day(2).Add(10 * time.Hour),
			cand:    model{name: "events", version: "v2", unit: interval.Day, partials: true},
			buildAt: day(2).Add(10 * time.Hour),
			want:    rs(interval.R(day(0), day(2).Add(10*time.Hour))),
		},
		{
			name: "finer unit, coarser incumbent", inc: &model{name: "events", cron: "@daily"}, deployAt: day(2).Add(10 * time.Hour),
			cand: model{name: "events", version: "v2", cron: "@daily", unit: interval.Hour}, buildAt: day(2).Add(10 * time.Hour),
			want: rs(interval.R(day(0), day(2))),
		},
		{
			name:    "no incumbent: RF at build",
			cand:    model{name: "events", version: "v2"},
			buildAt: h(5).Add(30 * time.Minute),
			want:    rs(hrs(0, 5)),
		},
		{
			name:    "no incumbent, daily unit hour: RF at build floored",
			cand:    model{name: "events", version: "v2", cron: "30 7 * * *", unit: interval.Hour},
			buildAt: day(1).Add(9 * time.Hour),
			want:    rs(interval.R(day(0), day(1).Add(7*time.Hour))),
		},
		{
			name:    "no incumbent, allow_partials: RF not floored",
			cand:    model{name: "events", version: "v2", unit: interval.Day, partials: true},
			buildAt: day(1).Add(10*time.Hour + 30*time.Minute),
			want:    rs(interval.R(day(0), day(1).Add(10*time.Hour))),
		},
		{
			name: "incumbent without coverage: RF at build", inc: &model{name: "events"}, deployAt: h(0).Add(30 * time.Minute),
			cand: model{name: "events", version: "v2"}, buildAt: h(5).Add(30 * time.Minute),
			want: rs(hrs(0, 5)),
		},
		{
			name: "what the candidate's table already has is left out", inc: &model{name: "events"}, deployAt: h(10),
			cand:    model{name: "events", version: "v2"},
			prep:    func(w *world) { w.complete("events@v2", h(10), events.RunManual, hrs(0, 3), hrs(5, 6)) },
			buildAt: h(10),
			want:    rs(hrs(3, 5), hrs(6, 10)),
		},
		{
			name: "from the candidate's start", inc: &model{name: "events"}, deployAt: h(10),
			cand: model{name: "events", version: "v2", start: h(4)}, buildAt: h(10),
			want: rs(hrs(4, 10)),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if c.inc != nil {
				w.register(c.inc.command())
				w.deploy("prod", "deploy", map[string]string{"events": "v1"}, c.deployAt)
			}
			w.register(c.cand.command())
			if c.prep != nil {
				c.prep(w)
			}
			cand := candidateOf(t, w.plan("p1", "prod", map[string]string{"events": "v2"}, c.buildAt), "events")
			got := interval.NewSet(cand.Backfill...)
			if !got.Equal(c.want) {
				t.Fatalf("backfill %v, want %v", got, c.want)
			}
			sn := w.st.Snapshots["events@v2"]
			for _, r := range cand.Backfill {
				u := sn.Schedule.Unit()
				if !u.Aligned(r.Start) || (!u.Aligned(r.End) && !sn.AllowPartials) {
					t.Errorf("backfill range %v is not whole %s intervals", r, u)
				}
			}
		})
	}
}

// A forward-only version bound to prod's table cannot also be the version
// of an env where the model has no incumbent: there it would own a new
// table. Found by the invariant suite (qa served prod's table).
func TestForwardOnlyBoundRefusedWhereNoIncumbent(t *testing.T) {
	w := newWorld(t)
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v2", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	w.deploy("prod", "d1", map[string]string{"events": "v1"}, h(6))
	if c := candidateOf(t, w.plan("p1", "prod", map[string]string{"events": "v2"}, h(6)), "events"); c.Table != "events@v1" {
		t.Fatalf("p1 table %s", c.Table)
	}
	w.refused(&commands.BuildPlan{Plan: "p2", Env: "qa", Versions: map[string]string{"events": "v2"}}, h(6), commands.CodeConflict)
}

// A backfill set resuming a partial interval (allow_partials) starts at
// the interval's start: whole intervals. Found by the invariant suite.
func TestBackfillResumesPartialIntervalWhole(t *testing.T) {
	w := newWorld(t)
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "*/15 * * * *", IntervalUnit: interval.Hour, AllowPartials: true})
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v2", Cron: "*/15 * * * *", IntervalUnit: interval.Hour, AllowPartials: true})
	w.deploy("prod", "d1", map[string]string{"events": "v1"}, h(6).Add(15*time.Minute))
	w.complete("events@v2", h(6).Add(15*time.Minute), events.RunManual, interval.R(h(0), h(6).Add(15*time.Minute)))
	w.complete("events@v1", h(6).Add(30*time.Minute), events.RunScheduled, interval.R(h(6), h(6).Add(30*time.Minute)))
	c := candidateOf(t, w.plan("p2", "prod", map[string]string{"events": "v2"}, h(6).Add(30*time.Minute)), "events")
	if want := rs(interval.R(h(6), h(6).Add(30*time.Minute))); !interval.NewSet(c.Backfill...).Equal(want) {
		t.Fatalf("backfill %v, want %v", c.Backfill, want)
	}
}
