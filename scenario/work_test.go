package scenario

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

func rng(t *testing.T, s string) interval.Range {
	t.Helper()
	r, err := interval.ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rec(seq uint64, causation string, p events.Payload) events.Record {
	ev := events.Event{Payload: p}
	ev.Causation, ev.OccurredAt, ev.Type = causation, time.Date(2026, 12, 1, 11, 7, 0, 0, time.UTC), p.EventType()
	return events.Record{Seq: seq, Subject: p.Subject(), Event: ev}
}

// The work a step lists and queues is what work.Of derives from its
// events, command by command: backfill is not listed, repair work is
// queued until a step whose worker runs.
func TestRepairQueueAndScheduled(t *testing.T) {
	gap := rng(t, "2026-12-01T10:00:00Z/2026-12-01T11:00:00Z")
	recs := []events.Record{
		rec(1, "build", events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{
			{Model: "events", Snapshot: "events@v2", Backfill: []interval.Range{rng(t, "2026-12-01T00:00:00Z/2026-12-01T10:00:00Z")}}}}),
		rec(2, "promote", events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted,
			Repairs: []events.RepairWork{{Model: "events", Snapshot: "events@v2", Ranges: []interval.Range{gap}}}}),
		rec(3, "tick", events.SchedulerAdvanced{Env: "prod", Model: "events", Snapshot: "events@v2",
			Ranges: []interval.Range{rng(t, "2026-12-01T11:00:00Z/2026-12-01T12:00:00Z")}}),
	}
	items := workOf(recs)
	var kinds []events.RunKind
	for _, it := range items {
		kinds = append(kinds, it.RunKind)
	}
	if want := []events.RunKind{events.RunBackfill, events.RunRepair, events.RunScheduled}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("work kinds %v, want %v", kinds, want)
	}
	got := rangeStrings(scheduled(items))
	if want := map[string][]string{"events": {"2026-12-01T10:00:00Z/2026-12-01T12:00:00Z"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("scheduled %v, want %v (backfill left out, ranges merged)", got, want)
	}
	if rangeStrings(scheduled(items[:1])) != nil {
		t.Fatal("a plan's backfill alone lists nothing")
	}

	var q repairQueue
	q.issued(items)
	if due := q.due(true); len(due) != 0 || len(q.items) != 1 {
		t.Fatalf("paused: ran %v, queue %v", due, q.items)
	}
	due := q.due(false)
	if len(due) != 1 || due[0].RunKind != events.RunRepair || len(due[0].Steps) != 1 ||
		due[0].Steps[0].Snapshot != "events@v2" || !interval.NewSet(due[0].Steps[0].Ranges...).Equal(interval.NewSet(gap)) {
		t.Fatalf("due: %+v", due)
	}
	if due := q.due(false); len(due) != 0 {
		t.Fatalf("ran twice: %v", due)
	}
}

// A queued repair runs at the start of the first run_scheduler step whose
// worker is not paused, at that step's clock, before its first tick.
func TestQueuedRepairRunsBeforeTicks(t *testing.T) {
	f, err := Parse("q.yaml", []byte(base+`  - invalidate: {model: events, version: v1, intervals: ["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}
  - run_scheduler: {env: prod, until: 2026-12-01T07:00:00Z, worker: paused}
  - run_scheduler: {env: prod, until: 2026-12-01T08:00:00Z}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r, err := start(ctx, f, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(context.WithoutCancel(ctx))
	var seqs []uint64
	for i, st := range f.Steps {
		if i == 2 {
			// As an acceptance that issued repair work would leave it.
			r.repairs.issued([]work.Item{{RunKind: events.RunRepair, Env: "prod", Plan: "p0", Steps: []work.Step{{
				Model: "events", Version: "v1", Snapshot: "events@v1", RunID: "repair:p0",
				Ranges: []interval.Range{rng(t, "2026-12-01T01:00:00Z/2026-12-01T02:00:00Z")}}}}})
		}
		sr, err := r.step(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, sr.Seq)
		if i == 2 && len(r.repairs.items) != 1 {
			t.Fatalf("a paused step ran the queued repair: queue %v", r.repairs.items)
		}
	}
	if len(r.repairs.items) != 0 {
		t.Fatalf("queue not run: %v", r.repairs.items)
	}
	recs, err := r.eng.Log().Reader().Read(ctx, eventlog.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step4 := recs[seqs[2]:] // records are numbered from 1
	c, ok := step4[0].Event.Payload.(events.IntervalsCompleted)
	if !ok || c.RunKind != events.RunRepair || c.RunID != "repair:p0" || !step4[0].Event.OccurredAt.Equal(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("step 4 starts with %T %+v at %s, want the queued repair at 07:00", step4[0].Event.Payload, step4[0].Event.Payload, step4[0].Event.OccurredAt)
	}
}
