package integration

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
)

// builtinServe is what `serve --builtin-worker` runs besides the engine:
// the command service, the catch-up driver (no worker of its own) and the
// work publisher with the in-process sink. The scheduler is driven by the
// test (scheduler.Scheduler.Tick) instead of the wall clock.
type builtinServe struct {
	e      *engine.Engine
	client *transport.Client
	sinks  []func() // stops each sink started, in order
}

func newBuiltinServe(t *testing.T, e *engine.Engine) *builtinServe {
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = catchUps(e).Run(ctx) }()
	b := &builtinServe{e: e, client: transport.NewClient(connect(t, e))}
	b.sink(t, nil)
	t.Cleanup(func() {
		for _, stop := range b.sinks {
			stop()
		}
		cancel()
		wg.Wait()
		svc.Stop()
	})
	return b
}

// sink prepares (before any further command) and starts an in-process
// sink, calling done (when set) after each item it ran or gave up; it
// returns its stop function.
func (b *builtinServe) sink(t *testing.T, done func(work.Item, error)) (stop func()) {
	pub := &work.Publisher{Log: b.e.Log(), Clock: b.e.Now, Logger: quiet(), Runner: &inproc.Worker{Handler: b.e, Actor: "worker:builtin"}, Done: done}
	if err := pub.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { defer close(finished); _ = pub.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-finished
		}
	}
	b.sinks = append(b.sinks, stop)
	return stop
}

func (b *builtinServe) do(t *testing.T, ctx context.Context, c commands.Command) commands.Reply {
	t.Helper()
	r, err := b.client.Do(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return must(t, r)
}

// TestBuiltinWorker: with the in-process sink, every kind of work is
// derived from the stream and run at once: a plan's backfill (no
// incumbent), a tick's advances, a catch-up request (whose retry the
// driver records); a sink restarted after a stop does the work made due
// while it was down; a second sink running the same items (a replica)
// records nothing twice.
func TestBuiltinWorker(t *testing.T) {
	e := open(t, engine.Config{})
	b := newBuiltinServe(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"events"}})
	pr := b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "d1", Env: "prod", Versions: map[string]string{"events": "v1", "sessions": "v1"}})
	for _, c := range pr.Plan.Candidates {
		if c.Incumbent != "" || len(c.Backfill) != 1 || c.Backfill[0].String() != rng(0, 3).String() {
			t.Fatalf("candidate: %+v", c)
		}
	}
	// The plan's backfill set is covered without anybody asking.
	if err := e.Projection().Await(ctx, func(st *projections.State) bool {
		return covered("events@v1", rng(0, 3))(st) && covered("sessions@v1", rng(0, 3))(st)
	}); err != nil {
		t.Fatalf("backfill: %v", err)
	}
	if r := b.do(t, ctx, &commands.Promote{Meta: meta(at(3)), Plan: "d1"}); r.Decision.Outcome != events.Accepted {
		t.Fatalf("d1: %+v", r.Decision)
	}

	// A tick's advances.
	if _, _, err := ticker(e).Tick(ctx, "prod", at(4), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Projection().Await(ctx, covered("sessions@v1", rng(3, 4))); err != nil {
		t.Fatalf("scheduled: %v", err)
	}

	// Bounded catch-up: v2 (and sessions derived from it) are backfilled to
	// the frontier the plan captured (4:00), the scheduler advances the
	// incumbents to 5:00, the promote asks for [4:00, 5:00) of both.
	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(4)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(4)), Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v2"}, Bounds: commands.Bounds{MaxCatchUpAdvances: 1}})
	if err := e.Projection().Await(ctx, covered("events@v2", rng(0, 4))); err != nil {
		t.Fatalf("backfill p2: %v", err)
	}
	if _, _, err := ticker(e).Tick(ctx, "prod", at(5), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Projection().Await(ctx, covered("sessions@v1", rng(4, 5))); err != nil {
		t.Fatalf("scheduled: %v", err)
	}
	r := b.do(t, ctx, &commands.Promote{Meta: meta(at(5)), Plan: "p2"})
	if r.CatchUp == nil || len(r.CatchUp.Work) != 2 || r.CatchUp.Work[0].Ranges[0].String() != rng(4, 5).String() {
		t.Fatalf("promote p2: %+v %+v", r, r.CatchUp)
	}
	if err := e.Projection().Await(ctx, decided("p2")); err != nil {
		t.Fatal(err)
	}
	e.Projection().Read(func(st *projections.State) {
		d, n := st.Plans["p2"].Decision, 0
		for _, ref := range st.Decisions {
			if ref.Plan == "p2" {
				n++
			}
		}
		if d.Outcome != events.Accepted || len(d.Codes) != 1 || d.Codes[0] != "caught_up" || n != 1 {
			t.Fatalf("p2: %+v (%d decisions)", d, n)
		}
		if st.Runs[events.RunBackfill] != 4 || st.Runs[events.RunScheduled] != 4 || st.Runs[events.RunCatchUp] != 2 {
			t.Fatalf("completions by run kind: %v", st.Runs)
		}
	})

	// Work made due while the sink is down is done after its restart.
	b.sinks[0]()
	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(5)), Model: "clicks", Version: "v1", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(5)), Plan: "p3", Env: "qa", Versions: map[string]string{"clicks": "v1"}})
	ran := make(chan work.Item, 16)
	b.sink(t, func(it work.Item, _ error) { ran <- it })
	if err := e.Projection().Await(ctx, covered("clicks@v1", rng(0, 5))); err != nil {
		t.Fatalf("work made due while the sink was down: %v", err)
	}

	// Two sinks (two replicas' built-in workers) run the same item; the
	// completion is recorded once.
	ran2 := make(chan work.Item, 16)
	b.sink(t, func(it work.Item, _ error) { ran2 <- it })
	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(5)), Model: "views", Version: "v1", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(5)), Plan: "p4", Env: "qa2", Versions: map[string]string{"views": "v1"}})
	for _, ch := range []chan work.Item{ran, ran2} {
		for done := false; !done; {
			select {
			case it := <-ch:
				done = it.Plan == "p4"
			case <-ctx.Done():
				t.Fatal("a sink did not run p4's backfill")
			}
		}
	}
	e.Projection().Read(func(st *projections.State) {
		if st.Runs[events.RunBackfill] != 6 {
			t.Fatalf("backfill completions: %d, want 6 (one per candidate)", st.Runs[events.RunBackfill])
		}
	})
}

// TestBuiltinWorkerGivesUp: an item the engine rejects for good (here a
// completion of intervals that have not ended by the engine's clock) is
// logged and given up; it does not hold up the work after it.
func TestBuiltinWorkerGivesUp(t *testing.T) {
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(at(1))
	e := open(t, engine.Config{Clock: func() time.Time { return *now.Load() }})
	b := newBuiltinServe(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type result struct {
		item work.Item
		err  error
	}
	ran := make(chan result, 4)
	next := func() result {
		t.Helper()
		select {
		case r := <-ran:
			return r
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		return result{}
	}
	b.sinks[0]() // only the sink reporting what it did
	b.sink(t, func(it work.Item, err error) { ran <- result{it, err} })

	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "early", Version: "v1", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p1", Env: "prod", Versions: map[string]string{"early": "v1"}})
	if r := next(); r.item.Plan != "p1" || r.err == nil || !strings.Contains(r.err.Error(), "has not ended") {
		t.Fatalf("p1's backfill at 01:00: %+v", r)
	}
	set(at(10))
	b.do(t, ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "later", Version: "v1", Cron: "@hourly", Start: t0})
	b.do(t, ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p2", Env: "qa", Versions: map[string]string{"later": "v1"}})
	if r := next(); r.item.Plan != "p2" || r.err != nil {
		t.Fatalf("the work after a rejected item: %+v", r)
	}
	e.Projection().Read(func(st *projections.State) {
		if !st.SnapshotCoverage("early@v1").Empty() || !st.SnapshotCoverage("later@v1").Covers(rng(0, 3)) {
			t.Fatalf("coverage: early %v, later %v", st.SnapshotCoverage("early@v1"), st.SnapshotCoverage("later@v1"))
		}
	})
}
