package integration

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// TestFencingAfterPromotion: once v2 is promoted, a scheduler advance that
// read the old generation is rejected with stale_generation and appends
// nothing; a completion a worker reports for the demoted v1 is recorded as
// v1's coverage but does not move the env's frontier; a scheduler that
// re-reads schedules v2 only.
func TestFencingAfterPromotion(t *testing.T) {
	e := open(t, engine.Config{})
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	pr := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"}}))
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(6)), Model: "events", Version: "v2", Ranges: pr.Plan.Candidates[0].Backfill}))
	var oldGen uint64
	e.Projection().Read(func(st *projections.State) { oldGen = st.Env("prod").Generation })
	dec := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(6)), Plan: "p1"}))
	if dec.Decision.Outcome != events.Accepted || dec.Decision.Generation != oldGen+1 {
		t.Fatalf("promotion: %+v", dec.Decision)
	}

	before := lastSeq(t, e)
	stale := e.Handle(ctx, &commands.AdvanceScheduler{Meta: meta(at(7)), Env: "prod", Generation: oldGen})
	if stale.Accepted || stale.Code != commands.CodeStaleGeneration || stale.Field != "generation" {
		t.Fatalf("stale advance: %+v", stale)
	}
	if got := lastSeq(t, e); got != before {
		t.Fatalf("stale advance appended %d events", got-before)
	}

	// The demoted snapshot's worker reports 06:00-07:00: a fact for v1 only.
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(7)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(6, 7)}, RunKind: events.RunScheduled}))
	e.Projection().Read(func(st *projections.State) {
		if f := st.Frontier("events@v1"); !f.Equal(at(7)) {
			t.Errorf("v1 frontier %v, want 07:00", f)
		}
		inc := st.Env("prod").Incumbents["events"]
		if f := st.Frontier(inc); inc != "events@v2" || !f.Equal(at(6)) {
			t.Errorf("env frontier moved: incumbent %s at %v", inc, f)
		}
	})

	// A scheduler that starts from the stale view is fenced once, re-reads,
	// and schedules v2.
	advs, fenced, err := ticker(e).Tick(ctx, "prod", at(7), oldGen)
	if err != nil {
		t.Fatal(err)
	}
	if fenced != 1 || len(advs) != 1 || advs[0].Snapshot != "events@v2" || advs[0].Generation != oldGen+1 ||
		!interval.Set(advs[0].Ranges).Equal(interval.NewSet(rng(6, 7))) {
		t.Fatalf("tick after fencing: fenced %d, %+v", fenced, advs)
	}
}

// TestFencingAfterRollback: v2 replaced v1 at 06:00; at 09:00 a rollback
// puts v1 back (one EnvironmentRolledBack, nothing recomputed). A
// scheduler advance that read v2's generation is then rejected with
// stale_generation and appends nothing; a scheduler that starts from that
// stale view is fenced once, re-reads, and fills v1's missing ready
// intervals (06:00-09:00, while v2 served), never v2's.
func TestFencingAfterRollback(t *testing.T) {
	e := open(t, engine.Config{})
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	pr := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"}}))
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(6)), Model: "events", Version: "v2", Ranges: pr.Plan.Candidates[0].Backfill}))
	if dec := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(6)), Plan: "p1"})); dec.Decision.Outcome != events.Accepted {
		t.Fatalf("promotion: %+v", dec.Decision)
	}
	var v2Gen uint64
	var v1Cov string
	e.Projection().Read(func(st *projections.State) {
		v2Gen, v1Cov = st.Env("prod").Generation, st.SnapshotCoverage("events@v1").String()
	})

	rb := must(t, e.Handle(ctx, &commands.Rollback{Meta: meta(at(9)), Env: "prod"}))
	if rb.Events != 1 || rb.Rollback == nil || rb.Rollback.Generation != v2Gen+1 || rb.Rollback.Models[0].Restored != "events@v1" {
		t.Fatalf("rollback: %+v", rb)
	}
	e.Projection().Read(func(st *projections.State) {
		if inc := st.Env("prod").Incumbents["events"]; inc != "events@v1" || st.SnapshotCoverage("events@v1").String() != v1Cov {
			t.Errorf("after the rollback: incumbent %s, v1 covers %s (was %s)", inc, st.SnapshotCoverage("events@v1"), v1Cov)
		}
	})

	before := lastSeq(t, e)
	stale := e.Handle(ctx, &commands.AdvanceScheduler{Meta: meta(at(9)), Env: "prod", Generation: v2Gen})
	if stale.Accepted || stale.Code != commands.CodeStaleGeneration || stale.Field != "generation" {
		t.Fatalf("stale advance: %+v", stale)
	}
	if got := lastSeq(t, e); got != before {
		t.Fatalf("stale advance appended %d events", got-before)
	}
	advs, fenced, err := ticker(e).Tick(ctx, "prod", at(9), v2Gen)
	if err != nil {
		t.Fatal(err)
	}
	if fenced != 1 || len(advs) != 1 || advs[0].Snapshot != "events@v1" || advs[0].Generation != v2Gen+1 ||
		!interval.Set(advs[0].Ranges).Equal(interval.NewSet(rng(6, 9))) {
		t.Fatalf("tick after the rollback: fenced %d, %+v", fenced, advs)
	}
}
