package projections

import (
	"math"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func hr(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

type folder struct {
	t   *testing.T
	st  *State
	seq uint64
	ids *events.IDSource
}

func (f *folder) apply(at time.Time, p events.Payload) uint64 {
	f.t.Helper()
	f.seq++
	if err := Apply(f.st, f.seq, events.New(f.ids, at, p)); err != nil {
		f.t.Fatal(err)
	}
	return f.seq
}

// The lifecycle of a plan under catch-up and of the repair debt an
// accepted gap opens, folded from events alone.
func TestPlanAndRepairLifecycle(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	for _, v := range []string{"v1", "v2"} {
		f.apply(hr(0), events.SnapshotRegistered{Snapshot: "events@" + v, Model: "events", Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: "events@" + v})
	}
	plan := events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v2", Table: "events@v2"}}}
	f.apply(hr(10), plan)
	req := f.apply(hr(11), events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{{Model: "events", Snapshot: "events@v2", Table: "events@v2"}}})
	pl := f.st.Plans["p1"]
	if !pl.CatchUpOpen() || pl.CatchUpSeq != req {
		t.Fatalf("after the request: open %v seq %d", pl.CatchUpOpen(), pl.CatchUpSeq)
	}
	gap := []interval.Range{interval.R(hr(10), hr(11))}
	dec := f.apply(hr(11), events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, CatchUpSeq: req,
		Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v2", Missing: gap}}})
	if pl.CatchUpOpen() || !pl.Accepted() || f.st.Env("prod").Incumbents["events"] != "events@v2" || f.st.Env("prod").Generation != 1 {
		t.Fatalf("after the decision: %+v", pl)
	}
	open := f.st.OpenRepairs()
	if len(open) != 1 || open[0].OpenSeq != dec || !open[0].OpenedAt.Equal(hr(11)) {
		t.Fatalf("open repairs: %+v", open)
	}
	// Coverage alone does not close a debt: the engine's RepairCompleted does.
	f.apply(hr(12), events.IntervalsCompleted{Snapshot: "events@v2", Table: "events@v2", Ranges: gap})
	if closable := f.st.RepairsClosedBy("events@v2", f.st.Table("events@v2")); len(f.st.OpenRepairs()) != 1 || len(closable) != 1 {
		t.Fatalf("after the completion: open %d, closable %d", len(f.st.OpenRepairs()), len(closable))
	}
	rc := open[0].Completed(hr(12))
	if rc.LatencyMS != time.Hour.Milliseconds() {
		t.Fatalf("latency %d", rc.LatencyMS)
	}
	closed := f.apply(hr(12), rc)
	f.apply(hr(12), rc) // a second one changes nothing
	if len(f.st.OpenRepairs()) != 0 || f.st.Repairs[0].ClosedSeq != closed || f.st.Repairs[0].LatencyMS != rc.LatencyMS {
		t.Fatalf("after RepairCompleted: %+v", f.st.Repairs[0])
	}
}

// Events at or below the applied sequence are ignored; an event that
// contradicts the state is counted as skipped and the fold goes on.
func TestApplyIsIdempotentAndTolerant(t *testing.T) {
	st := New()
	ids := events.NewIDSource()
	ev := events.New(ids, hr(1), events.PromotionDecided{Plan: "nope", Env: "prod", Outcome: events.Accepted})
	if err := Apply(st, 1, ev); err == nil || st.Skipped != 1 || st.Seq != 1 {
		t.Fatalf("decision for an unknown plan: err %v, %+v", err, st)
	}
	if err := Apply(st, 1, ev); err != nil || st.Skipped != 1 || st.Events != 1 {
		t.Fatalf("re-applied seq 1: err %v, %+v", err, st)
	}
	Skip(st, 2, "tidemark.evt.env.prod")
	if st.Seq != 2 || st.SubjectSeq["tidemark.evt.env.prod"] != 2 || st.Skipped != 2 {
		t.Fatalf("skip: %+v", st)
	}
}

// A snapshot reads the upstream snapshots it was planned against: fixed at
// registration first (a derived version), then the newest plan that has
// it as a candidate; a dependency neither names is reported missing.
func TestUpstreamOf(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	reg := func(model, version string, deps []string, upstream ...string) {
		id := model + "@" + version
		f.apply(hr(0), events.SnapshotRegistered{Snapshot: id, Model: model, Version: version, Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: id, DependsOn: deps, Upstream: upstream})
	}
	reg("raw", "v1", nil)
	reg("raw", "v2", nil)
	reg("events", "v1", []string{"raw"})
	reg("rollup", "v1", []string{"events", "raw"})
	reg("rollup", "v1+p9", []string{"events", "raw"}, "events@v1")
	if up, missing := f.st.UpstreamOf("events@v1"); len(up) != 0 || len(missing) != 1 || missing[0] != "raw" {
		t.Fatalf("never planned: %v missing %v", up, missing)
	}
	cand := func(snap string, up ...string) events.Candidate {
		m, _, _ := events.ParseSnapshotID(snap)
		return events.Candidate{Model: m, Snapshot: snap, Table: snap, Upstream: up}
	}
	f.apply(hr(1), events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{cand("events@v1", "raw@v1"), cand("rollup@v1", "events@v1", "raw@v1")}})
	f.apply(hr(2), events.PlanBuilt{Plan: "p2", Env: "dev", Candidates: []events.Candidate{cand("events@v1", "raw@v2")}})
	for _, c := range []struct {
		snap string
		want map[string]string
	}{
		{"events@v1", map[string]string{"raw": "raw@v2"}},                        // the newest plan
		{"rollup@v1", map[string]string{"events": "events@v1", "raw": "raw@v1"}}, // its only plan
		{"rollup@v1+p9", map[string]string{"events": "events@v1"}},               // fixed at registration; raw never planned
	} {
		up, _ := f.st.UpstreamOf(c.snap)
		if len(up) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.snap, up, c.want)
		}
		for m, s := range c.want {
			if up[m] != s {
				t.Fatalf("%s: %v, want %v", c.snap, up, c.want)
			}
		}
	}
	if _, missing := f.st.UpstreamOf("rollup@v1+p9"); len(missing) != 1 || missing[0] != "raw" {
		t.Fatalf("rollup@v1+p9 missing %v", missing)
	}
}

// TestWorkProgress: completions naming a work item fold into its
// progress: ranges clipped to the item's step, rows summed (saturating at
// the largest int64, whatever a worker reports), the latest completion's
// time whatever order they arrive in; a completion naming no item, or an
// item without a step for the snapshot, changes no progress.
func TestWorkProgress(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	f.apply(hr(0), events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: "events@v1"})
	seq := f.apply(hr(10), events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v1", Table: "events@v1",
		Backfill: []interval.Range{interval.R(hr(0), hr(10))}}}})
	id := events.WorkID(seq, events.RunBackfill)
	done := func(at time.Time, a, b int, rows int64, work string) {
		f.apply(at, events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{interval.R(hr(a), hr(b))}, RunKind: events.RunBackfill, Work: work, Rows: rows})
	}
	done(hr(12), 0, 2, 5, id)
	done(hr(11), 8, 12, math.MaxInt64, id) // beyond the step, earlier, huge
	done(hr(13), 2, 4, 7, "")              // names no item
	w := f.st.Work[id]
	if !w.At.Equal(hr(10)) {
		t.Errorf("at %s, want the plan's time", w.At)
	}
	d := w.Done["events@v1"]
	want := interval.NewSet(interval.R(hr(0), hr(2)), interval.R(hr(8), hr(10)))
	if d == nil || !d.Ranges.Equal(want) || d.Rows != math.MaxInt64 || d.Reports != 2 || !d.Last.Equal(hr(12)) {
		t.Fatalf("progress %+v, want ranges %v, rows saturated, 2 reports, last %s", d, want, hr(12))
	}
	done(hr(14), 2, 3, 1, id)
	if d.Rows != math.MaxInt64 || !d.Last.Equal(hr(14)) {
		t.Errorf("after another: rows %d last %s", d.Rows, d.Last)
	}
}
