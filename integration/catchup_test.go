package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work/inproc"
)

// racePlan deploys v1, advances prod to 10:00, builds p1 (v2, catch-up
// bound 1) and backfills it, then advances to 11:00: v2 misses one hour.
func racePlan(t *testing.T, e *engine.Engine, plan string) {
	t.Helper()
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	for h := 7; h <= 10; h++ {
		tick(t, e, h)
	}
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(10)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	pr := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(10)), Plan: plan, Env: "prod", Versions: map[string]string{"events": "v2"}, Bounds: commands.Bounds{MaxCatchUpAdvances: 1}}))
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(10)), Model: "events", Version: "v2", Ranges: pr.Plan.Candidates[0].Backfill}))
	tick(t, e, 11)
}

func decided(plan string) func(st *projections.State) bool {
	return func(st *projections.State) bool { p, ok := st.Plans[plan]; return ok && p.Decision != nil }
}

// TestCatchUpDriver: a promote over NATS starts catch-up and answers with
// the work; the driver has the work computed (in-process worker, or an
// external one completing with run kind catch_up) and records the strict
// retry, once.
func TestCatchUpDriver(t *testing.T) {
	for _, builtin := range []bool{true, false} {
		name := map[bool]string{true: "builtin worker", false: "external worker"}[builtin]
		t.Run(name, func(t *testing.T) {
			e := open(t, engine.Config{})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			racePlan(t, e, "p1")
			drivers := []*scheduler.CatchUps{catchUps(e), catchUps(e)}
			if builtin {
				drivers[0].Runner = &inproc.Worker{Handler: e, Actor: "worker:builtin"}
			}
			var wg sync.WaitGroup
			runCtx, stop := context.WithCancel(ctx)
			for _, d := range drivers {
				wg.Add(1)
				go func() { defer wg.Done(); _ = d.Run(runCtx) }()
			}
			defer func() { stop(); wg.Wait() }()

			svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Stop()
			r, err := transport.NewClient(connect(t, e)).Do(ctx, &commands.Promote{Meta: meta(at(11).Add(7 * time.Minute)), Plan: "p1"})
			if err != nil {
				t.Fatal(err)
			}
			must(t, r)
			if r.Decision != nil || r.CatchUp == nil || len(r.CatchUp.Work) != 1 || len(r.CatchUp.Work[0].Ranges) != 1 {
				t.Fatalf("promote reply: %+v", r)
			}
			if !builtin {
				w := r.CatchUp.Work[0]
				must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(11).Add(8 * time.Minute)), Model: w.Model, Version: "v2", Ranges: w.Ranges, RunKind: events.RunCatchUp}))
			}
			if err := e.Projection().Await(ctx, decided("p1")); err != nil {
				t.Fatal(err)
			}
			var d *events.PromotionDecided
			count := 0
			e.Projection().Read(func(st *projections.State) {
				d = st.Plans["p1"].Decision
				for _, ref := range st.Decisions {
					if ref.Plan == "p1" {
						count++
					}
				}
			})
			if d.Outcome != events.Accepted || len(d.Codes) != 1 || d.Codes[0] != "caught_up" || d.CatchUpSeq == 0 || count != 1 {
				t.Fatalf("decision: %+v (%d decisions)", d, count)
			}
		})
	}
}

// TestCatchUpRetryWaitsForWork: while catch-up work is outstanding a
// promote is refused (conflict, nothing appended), unless the plan
// conflicts by now, which is decided at once.
func TestCatchUpRetryWaitsForWork(t *testing.T) {
	e := open(t, engine.Config{})
	ctx := t.Context()
	racePlan(t, e, "p1")
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(11)), Model: "events", Version: "v3", Cron: "@hourly", Start: t0}))
	p2 := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(11)), Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v3"}}))
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(11)), Model: "events", Version: "v3", Ranges: p2.Plan.Candidates[0].Backfill}))

	if r := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(11)), Plan: "p1"})); r.CatchUp == nil {
		t.Fatalf("want a catch-up request: %+v", r)
	}
	before := lastSeq(t, e)
	r := e.Handle(ctx, &commands.Promote{Meta: meta(at(11)), Plan: "p1"})
	if r.Accepted || r.Code != commands.CodeConflict || r.Field != "plan" || lastSeq(t, e) != before {
		t.Fatalf("retry with work outstanding: %+v", r)
	}
	if r := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(11)), Plan: "p2"})); r.Decision.Outcome != events.Accepted {
		t.Fatalf("p2: %+v", r.Decision)
	}
	r = must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(11)), Plan: "p1"}))
	if r.Decision == nil || r.Decision.Outcome != events.Rejected || r.Decision.Codes[0] != "conflicting_plan" || r.Decision.CatchUpSeq == 0 {
		t.Fatalf("p1 after p2 was promoted: %+v", r)
	}
}
