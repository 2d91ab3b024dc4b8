package integration

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/work/inproc"
)

// replicas opens n engines on one stream: the first embeds the server.
func replicas(t *testing.T, n int) []*engine.Engine {
	t.Helper()
	node := jstest.Node(t)
	first := open(t, engine.Config{}, node)
	out := []*engine.Engine{first}
	for i := 1; i < n; i++ {
		out = append(out, open(t, engine.Config{}, dial(t, node.ClientURL())))
	}
	return out
}

// TestSchedulerReplicas: three replicas each fire every hourly tick of a
// simulated day; every advance is recorded exactly once.
func TestSchedulerReplicas(t *testing.T) {
	rs := replicas(t, 3)
	ctx := t.Context()
	deploy(t, rs[0], "prod", "d1", "v1", at(0).Add(5*60e9))
	for _, r := range rs {
		if err := r.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for h := 1; h <= 24; h++ {
		var wg sync.WaitGroup
		errs := make([]error, len(rs))
		for i, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				advs, _, err := ticker(r).Tick(ctx, "prod", at(h), 0)
				if err == nil {
					err = (&inproc.Worker{Handler: r, Actor: fmt.Sprintf("worker:%d", i)}).RunAdvances(ctx, advs, at(h))
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d at hour %d: %v", i, h, err)
			}
		}
	}
	recs, err := jstest.ReadLog(ctx, rs[0].Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[string]int{}
	for _, r := range recs {
		if a, ok := r.Event.Payload.(events.SchedulerAdvanced); ok {
			ticks[a.Snapshot+"@"+a.Tick.String()]++
		}
	}
	if len(ticks) != 24 {
		t.Fatalf("%d distinct advances over 24 hourly ticks", len(ticks))
	}
	for k, n := range ticks {
		if n != 1 {
			t.Fatalf("advance %s recorded %d times", k, n)
		}
	}
	if f := replay.Fold(recs).Frontier("events@v1"); !f.Equal(at(24)) {
		t.Fatalf("frontier %v after the day", f)
	}
}

// TestConflictingWritersAcrossReplicas: 200 trials of 2–8 concurrent
// promotions of plans built at the same generation, spread over three
// replicas: exactly one is accepted, every other is conflicting_plan, and
// re-evaluating the whole history finds no divergence.
func TestConflictingWritersAcrossReplicas(t *testing.T) {
	trials := 200
	if testing.Short() {
		trials = 20
	}
	rs := replicas(t, 3)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < trials; trial++ {
		env := fmt.Sprintf("env%03d", trial)
		deploy(t, rs[0], env, env+"-d", "v1", at(6))
		n := 2 + rng.IntN(7)
		plans := make([]string, n)
		for i := range plans {
			v := fmt.Sprintf("v%d", i+2)
			plans[i] = fmt.Sprintf("%s-p%d", env, i)
			must(t, rs[0].Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: v, Cron: "@hourly", Start: t0}))
			pr := must(t, rs[0].Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: plans[i], Env: env, Versions: map[string]string{"events": v}}))
			if b := pr.Plan.Candidates[0].Backfill; len(b) > 0 {
				must(t, rs[0].Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(6)), Model: "events", Version: v, Ranges: b}))
			}
		}
		for _, r := range rs {
			if err := r.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
		}
		replies := make([]commands.Reply, n)
		var wg sync.WaitGroup
		for i := range plans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = rs[i%len(rs)].Handle(ctx, &commands.Promote{Meta: meta(at(7)), Plan: plans[i]})
			}()
		}
		wg.Wait()
		accepted := 0
		for i, r := range replies {
			must(t, r)
			switch {
			case r.Decision.Outcome == events.Accepted:
				accepted++
			case len(r.Decision.Codes) != 1 || r.Decision.Codes[0] != "conflicting_plan":
				t.Fatalf("trial %d: loser %s got %v", trial, plans[i], r.Decision.Codes)
			}
		}
		if accepted != 1 {
			t.Fatalf("trial %d: %d of %d promotions accepted", trial, accepted, n)
		}
	}
	recs, err := jstest.ReadLog(ctx, rs[0].Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("re-evaluation diverges: %v", divs[:min(len(divs), 5)])
	}
}
