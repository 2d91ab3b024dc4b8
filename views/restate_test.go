package views

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// A restatement is in flight until its work is recorded done or its
// tables cover it again, and no longer once its environment moved to
// another generation (its work is given up); status answers list it with
// its work's progress per model.
func TestRestating(t *testing.T) {
	reg := func(m string) events.SnapshotRegistered {
		return events.SnapshotRegistered{Snapshot: m + "@v1", Model: m, Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: m + "@v1"}
	}
	req := events.RestatementRequested{Env: "prod", Model: "events", Snapshot: "events@v1", Ranges: []interval.Range{hrs(1, 2)}, Generation: 1, Run: "restate:c1",
		Work: []events.RestateWork{
			{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(1, 2)}, Invalidated: []interval.Range{hrs(1, 2)}},
			{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{hrs(0, 4)}, Invalidated: []interval.Range{hrs(0, 4)}},
		}}
	st := fold(t,
		reg("events"), reg("rollup"),
		events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v1", Table: "events@v1"}, {Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1"}}},
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1},
		req, // seq 5
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(1, 2)}, RunKind: events.RunRestate, Work: "work-5-restate"},
	)
	rs := Restating(st, "")
	if len(rs) != 1 || rs[0].Seq != 5 || rs[0].Run != "restate:c1" || len(rs[0].Models) != 2 || rs[0].Models[0].Snapshot != "events@v1" ||
		rs[0].Models[0].BatchesDone != 1 || rs[0].Models[1].Snapshot != "rollup@v1" || rs[0].Models[1].IntervalsDone != 0 || rs[0].Models[1].RunKind != events.RunRestate {
		t.Fatalf("restating: %+v", rs)
	}
	if got := Restating(st, "dev"); len(got) != 0 {
		t.Fatalf("another env's: %+v", got)
	}
	r, err := Answer(st, &commands.Status{Env: "prod"}, h(6))
	if err != nil || len(r.Restatements) != 1 {
		t.Fatalf("status: %+v %v", r.Restatements, err)
	}
	// Covered again (by the scheduler, say): no longer in flight.
	ids := events.NewIDSource()
	if err := projections.Apply(st, 7, events.New(ids, t0, events.IntervalsCompleted{Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{hrs(0, 4)}, RunKind: events.RunScheduled})); err != nil {
		t.Fatal(err)
	}
	if got := Restating(st, ""); len(got) != 0 {
		t.Fatalf("covered again, still in flight: %+v", got)
	}
	// A second restatement, then a promotion: its work is given up.
	req.Run = "restate:c2"
	for i, p := range []events.Payload{req, events.IntervalsInvalidated{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(1, 2)}, Reason: req.Run}} {
		if err := projections.Apply(st, uint64(8+i), events.New(ids, t0, p)); err != nil {
			t.Fatal(err)
		}
	}
	if got := Restating(st, ""); len(got) != 1 || got[0].Run != "restate:c2" {
		t.Fatalf("the second restatement: %+v", got)
	}
	if err := projections.Apply(st, 10, events.New(ids, t0, events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 2})); err != nil {
		t.Fatal(err)
	}
	if got := Restating(st, ""); len(got) != 0 {
		t.Fatalf("stale, still in flight: %+v", got)
	}
}
