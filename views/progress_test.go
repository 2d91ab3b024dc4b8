package views

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

func fold(t *testing.T, ps ...events.Payload) *projections.State {
	t.Helper()
	ids := events.NewIDSource()
	st := projections.New()
	for i, p := range ps {
		if err := projections.Apply(st, uint64(i+1), events.New(ids, t0, p)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// Freshness is measured from the incumbent's frontier; plans in flight
// report the share of their backfill their tables cover.
func TestFreshAndInFlight(t *testing.T) {
	reg := func(v string) events.SnapshotRegistered {
		return events.SnapshotRegistered{Snapshot: "events@" + v, Model: "events", Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: "events@" + v}
	}
	cand := func(v string, backfill ...interval.Range) events.Candidate {
		return events.Candidate{Model: "events", Snapshot: "events@" + v, Table: "events@" + v, Backfill: backfill}
	}
	st := fold(t,
		reg("v1"), reg("v2"), reg("v3"),
		events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{cand("v1", hrs(0, 4))}},
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(0, 4)}, RunKind: events.RunBackfill},
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v1"}}},
		events.PlanBuilt{Plan: "p2", Env: "prod", Generation: 1, Candidates: []events.Candidate{cand("v2", hrs(0, 4))}},
		events.IntervalsCompleted{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{hrs(0, 1)}, RunKind: events.RunBackfill},
		events.PlanBuilt{Plan: "p3", Env: "dev", Candidates: []events.Candidate{cand("v3")}},
	)
	fresh := Fresh(st, h(6))
	if len(fresh) != 1 || fresh[0].Env != "prod" || fresh[0].Snapshot != "events@v1" || !fresh[0].Frontier.Equal(h(4)) || fresh[0].Age != 2*time.Hour ||
		!fresh[0].Ready.Equal(h(6)) || fresh[0].Late != 2*time.Hour {
		t.Fatalf("fresh: %+v", fresh)
	}
	// Ahead of its readiness frontier: not late.
	if fresh := Fresh(st, h(4).Add(30*time.Minute)); fresh[0].Late != 0 || fresh[0].Age != 30*time.Minute || !fresh[0].Ready.Equal(h(4)) {
		t.Fatalf("on time: %+v", fresh)
	}
	fl := InFlight(st)
	if len(fl) != 2 || fl[0].Plan != "p2" || fl[0].Total != 4*time.Hour || fl[0].Done != time.Hour || fl[0].Fraction() != 0.25 {
		t.Fatalf("in flight: %+v", fl)
	}
	if fl[1].Plan != "p3" || fl[1].Fraction() != 1 {
		t.Fatalf("a plan with nothing to backfill: %+v", fl[1])
	}
	// Status answers list them too, by env when one is asked for.
	r, err := Answer(st, &commands.Status{Env: "prod"}, h(6))
	// Its work's progress counts only completions naming the work item
	// (the one here names none).
	want := []commands.PlanProgress{{Plan: "p2", Env: "prod", BackfillMS: (4 * time.Hour).Milliseconds(), DoneMS: time.Hour.Milliseconds(),
		Models: []commands.ModelProgress{{Model: "events", Snapshot: "events@v2", RunKind: events.RunBackfill, Batches: 1, Intervals: 4, DueAt: t0}}}}
	if err != nil || !reflect.DeepEqual(r.Plans, want) || r.Plans[0].Complete() {
		t.Fatalf("status plans: %+v, %v", r.Plans, err)
	}
	if r, _ := Answer(st, &commands.Status{}, h(6)); len(r.Plans) != 2 || r.Plans[1].Plan != "p3" || !r.Plans[1].Complete() {
		t.Fatalf("status plans of every env: %+v", r.Plans)
	}
}

// foldAt folds payloads, each at its own time.
func foldAt(t *testing.T, evs ...timed) *projections.State {
	t.Helper()
	ids := events.NewIDSource()
	st := projections.New()
	for i, e := range evs {
		if err := projections.Apply(st, uint64(i+1), events.New(ids, e.at, e.p)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

type timed struct {
	at time.Time
	p  events.Payload
}

// A plan in flight shows, per model, its work's batches and intervals
// asked and done, the rows written, and the pace from when the work was
// due to its latest completion: rate and ETA from event times alone.
func TestPlanWorkProgress(t *testing.T) {
	built := h(9)
	sec := func(s int) time.Time { return built.Add(time.Duration(s) * time.Second) }
	item := events.WorkID(3, events.RunBackfill) // the PlanBuilt is the third event
	done := func(at time.Time, sn string, rows int64, r interval.Range) timed {
		return timed{at, events.IntervalsCompleted{Snapshot: sn, Table: sn, Ranges: []interval.Range{r}, RunKind: events.RunBackfill, Work: item, Rows: rows}}
	}
	evs := []timed{
		// events has SQL and batch_size 2: five hours are three batches;
		// rollup has no SQL: its range is one batch.
		timed{t0, events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: "events@v1", SQL: "SELECT 1 AS ts", TimeColumn: "ts", BatchSize: 2}},
		timed{t0, events.SnapshotRegistered{Snapshot: "rollup@v1", Model: "rollup", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: "rollup@v1", DependsOn: []string{"events"}, BatchSize: 2}},
		timed{built, events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{
			{Model: "events", Snapshot: "events@v1", Table: "events@v1", Backfill: []interval.Range{hrs(0, 5)}},
			{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Upstream: []string{"events@v1"}, Backfill: []interval.Range{hrs(0, 5)}}}}},
		done(sec(10), "events@v1", 100, hrs(0, 2)),
		// A completion of another item, or without one, is not this
		// work's progress (it still covers the table).
		timed{sec(20), events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(4, 5)}, RunKind: events.RunManual, Rows: 7}},
		done(sec(30), "events@v1", 50, hrs(2, 3)),
		// A catch-up of the plan is its work too, listed after the
		// backfill.
		timed{sec(40), events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(5, 7)}}}}},
	}
	st := foldAt(t, evs...)
	eta := func(ms int64) *int64 { return &ms }
	want := []commands.ModelProgress{
		// [0,3) done of [0,5) cut [0,2) [2,4) [4,5): one batch, three
		// intervals and 150 rows in 30s; two intervals left at 0.1/s.
		{Model: "events", Snapshot: "events@v1", RunKind: events.RunBackfill, Batches: 3, BatchesDone: 1, Intervals: 5, IntervalsDone: 3, Rows: 150,
			DueAt: built, LastDoneAt: sec(30), RowsPerSecond: 5, IntervalsPerSecond: 0.1, ETAMS: eta(20_000)},
		// Nothing done: no pace, no ETA.
		{Model: "rollup", Snapshot: "rollup@v1", RunKind: events.RunBackfill, Batches: 1, Intervals: 5, DueAt: built},
		{Model: "events", Snapshot: "events@v1", RunKind: events.RunCatchUp, Batches: 1, Intervals: 2, DueAt: sec(40)},
	}
	r, err := Answer(st, &commands.Status{}, sec(60))
	if err != nil || len(r.Plans) != 1 || !reflect.DeepEqual(r.Plans[0].Models, want) {
		t.Fatalf("status plans: %v\n got %+v\nwant %+v", err, r.Plans, want)
	}
	if d, ok := r.Plans[0].Models[0].ETA(); !ok || d != 20*time.Second {
		t.Fatalf("ETA: %v %v", d, ok)
	}
	if _, ok := r.Plans[0].Models[1].ETA(); ok {
		t.Fatal("an ETA before anything is done")
	}

	// Every batch done: the ETA is 0, the pace over the whole minute.
	st2 := foldAt(t, append(evs, done(sec(60), "events@v1", 30, hrs(3, 5)), done(sec(60), "rollup@v1", 12, hrs(0, 5)))...)
	ms := PlanWork(st2, st2.Plans["p1"])
	if len(ms) != 3 || ms[0].BatchesDone != 3 || ms[0].IntervalsDone != 5 || ms[0].Rows != 180 || ms[0].RowsPerSecond != 3 || ms[0].ETAMS == nil || *ms[0].ETAMS != 0 ||
		ms[1].BatchesDone != 1 || ms[1].RowsPerSecond != 0.2 || ms[1].ETAMS == nil || *ms[1].ETAMS != 0 {
		t.Fatalf("all done: %+v", ms)
	}
	// Done the moment it was due: no pace to measure, nothing left.
	st3 := foldAt(t, append(slices.Clone(evs[:3]), done(built, "rollup@v1", 5, hrs(0, 5)))...)
	if ms := PlanWork(st3, st3.Plans["p1"]); len(ms) != 2 || ms[1].BatchesDone != 1 || ms[1].RowsPerSecond != 0 || ms[1].ETAMS == nil || *ms[1].ETAMS != 0 {
		t.Fatalf("done at once: %+v", ms)
	}
}

// An incumbent that covers nothing is measured from its start, floored to
// its unit: everything its schedule made ready since is late.
func TestFreshCoveringNothing(t *testing.T) {
	st := fold(t,
		events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0.Add(20 * time.Minute),
			Kind: events.Incremental, Table: "events@v1"},
		events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v1", Table: "events@v1"}}},
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v1"}}},
	)
	fresh := Fresh(st, h(3).Add(10*time.Minute))
	if len(fresh) != 1 || !fresh[0].Frontier.IsZero() || !fresh[0].Ready.Equal(h(3)) || fresh[0].Late != 3*time.Hour ||
		fresh[0].Age != 3*time.Hour+10*time.Minute {
		t.Fatalf("fresh: %+v", fresh)
	}
	// Before its first interval is ready, it is not late.
	if fresh := Fresh(st, t0.Add(30*time.Minute)); fresh[0].Late != 0 || !fresh[0].Ready.Equal(t0) {
		t.Fatalf("before its first interval: %+v", fresh)
	}
}
