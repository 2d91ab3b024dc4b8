package integration

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work/inproc"
)

// tick runs the scheduler at hour h and completes what it scheduled.
func tick(t *testing.T, e *engine.Engine, h int) {
	t.Helper()
	advs, _, err := ticker(e).Tick(t.Context(), "prod", at(h), 0)
	if err != nil {
		t.Fatal(err)
	}
	w := &inproc.Worker{Handler: e, Actor: "test"}
	if err := w.RunAdvances(t.Context(), advs, at(h)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRepairsSurviveRestart: a trailing-gap promotion opens a debt
// that the open_repairs query lists over NATS, that survives a restart,
// and that the scheduler's next tick closes with a RepairCompleted.
func TestOpenRepairsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	node := nodeOn(t, dir)
	e := open(t, engine.Config{}, node)
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	for h := 7; h <= 10; h++ {
		tick(t, e, h)
	}
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(10)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	pr := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(10)), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v2"}, Bounds: commands.Bounds{MaxTrailingGapAdvances: 1}}))
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(10)), Model: "events", Version: "v2", Ranges: pr.Plan.Candidates[0].Backfill}))
	tick(t, e, 11)
	promoted := at(11).Add(7 * time.Minute)
	dec := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(promoted), Plan: "p1"}))
	if dec.Decision.Outcome != events.Accepted {
		t.Fatalf("promotion: %+v", dec.Decision)
	}

	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	client := transport.NewClient(connect(t, e))
	client.JSON = true
	before := lastSeq(t, e)
	r, err := client.Do(ctx, &commands.OpenRepairs{Meta: commands.Meta{At: at(12)}, Env: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	must(t, r)
	if len(r.Repairs) != 1 {
		t.Fatalf("open repairs: %+v", r)
	}
	debt := r.Repairs[0]
	gap := interval.NewSet(rng(10, 11))
	if debt.Plan != "p1" || debt.Snapshot != "events@v2" || !interval.NewSet(debt.Missing...).Equal(gap) ||
		!debt.OpenedAt.Equal(promoted) || time.Duration(debt.OpenForMS)*time.Millisecond != 53*time.Minute {
		t.Fatalf("debt: %+v", debt)
	}
	if lastSeq(t, e) != before {
		t.Fatal("a query appended events")
	}
	if r, _ := client.Do(ctx, &commands.OpenRepairs{Env: "qa"}); r.Accepted || r.Code != commands.CodeNotFound || r.Field != "env" {
		t.Fatalf("unknown env: %+v", r)
	}
	svc.Stop()
	e.Close(ctx)
	node.Close()

	e2 := open(t, engine.Config{}, nodeOn(t, dir))
	if r := must(t, e2.Handle(ctx, &commands.OpenRepairs{})); len(r.Repairs) != 1 || r.Repairs[0].OpenSeq != debt.OpenSeq {
		t.Fatalf("after restart: %+v", r.Repairs)
	}
	tick(t, e2, 12)
	if r := must(t, e2.Handle(ctx, &commands.OpenRepairs{})); len(r.Repairs) != 0 {
		t.Fatalf("after the repairing tick: %+v", r.Repairs)
	}
}
