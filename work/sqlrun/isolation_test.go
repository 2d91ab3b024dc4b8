package sqlrun_test

// Work isolation (issue 28, item 5) on a real DuckDB warehouse: the
// serving process's work publisher with the built-in SQL worker (a pool
// of two), a poison model (its SQL fails at compute time) and an endless
// one (a cross join, cancelled at its timeout) in dev plans, next to
// production's scheduled work, which must follow its ticks meanwhile.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// Poison fails at compute time on every row (a cast of 'x' to an
// integer, which no parse or bind check sees: it depends on the rows).
const poisonSQL = `SELECT ts, CAST(CASE WHEN user_id >= 0 THEN 'x' ELSE '1' END AS INTEGER) AS bad
FROM pv WHERE ts >= @start_ts AND ts < @end_ts`

// Endless is valid SQL that never ends in time: a count over a cross
// join of two billion-row series (constant memory).
const endlessSQL = `SELECT @start_ts AS ts, count(*) AS n
FROM generate_series(0, 1000000000) AS a(i), generate_series(0, 1000000000) AS b(j)`

// publisher runs serve's work publisher with the built-in SQL worker
// until the test ends; done receives each finished item.
type publisher struct {
	p     *work.Publisher
	stats work.Stats
	mu    sync.Mutex
	done  map[string]error
}

// inFlight is how many attempts run now.
func (pb *publisher) inFlight() int64 { _, _, n := pb.stats.Counts(); return n }

// finished reports whether any of the items is finished.
func (pb *publisher) finished(ids ...string) bool {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	for _, id := range ids {
		if _, ok := pb.done[id]; ok {
			return true
		}
	}
	return false
}

func (w *world) publish(concurrency, attempts int, timeout, backoff time.Duration) *publisher {
	w.t.Helper()
	pb := &publisher{done: map[string]error{}}
	pb.p = &work.Publisher{Log: w.e.Log(), Clock: w.e.Now, Logger: jstest.Quiet(), Reporter: w.e, Concurrency: concurrency, Attempts: attempts,
		RetryBackoff: backoff, MaxBackoff: 2 * backoff, Tables: work.TablesFrom(w.e.Projection()),
		Runner: &sqlrun.Runner{WH: w.wh, Proj: w.e.Projection(), Done: &inproc.Worker{Handler: w.e, Actor: "worker:builtin"}, Timeout: timeout},
		Done: func(it work.Item, err error) {
			pb.mu.Lock()
			defer pb.mu.Unlock()
			pb.done[it.ID] = err
		}}
	pb.p.Stats = &pb.stats
	if err := pb.p.Prepare(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- pb.p.Run(ctx) }()
	w.t.Cleanup(func() {
		cancel()
		if err := <-ended; err != nil {
			w.t.Errorf("publisher: %v", err)
		}
	})
	return pb
}

// eventually waits until cond holds on the engine's state, at most 60s.
func (w *world) eventually(what string, cond func(st *projections.State) bool) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := false
		w.e.Projection().Read(func(st *projections.State) { ok = cond(st) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling the projection, bounded by the deadline
	}
}

// advance records prod's scheduler tick at t (its work is the
// publisher's).
func (w *world) advance(t time.Time) {
	w.t.Helper()
	w.at(t)
	var gen uint64
	w.e.Projection().Read(func(st *projections.State) { gen = st.Env("prod").Generation })
	w.do(&commands.AdvanceScheduler{Env: "prod", Generation: gen})
}

func finalFailure(st *projections.State, snapshot string) *events.RunFailed {
	if f := st.Failures[snapshot]; f != nil && f.LastFinalSeq > 0 {
		r := f.LastFinal
		return &r
	}
	return nil
}

// TestPoisonAndEndlessModelsLeaveProdOnTime: a dev plan of a model whose
// SQL fails at compute time and one of an endless model do not delay
// production: its frontier follows each tick while they fail. Each of
// their failures is recorded (RunFailed with the warehouse's error text,
// the endless one "timed out", final at once), the poison one's last
// final after the bounded attempts. On the code before the pool (one item at a time, a failing
// item retried for ever) prod's frontier never moves.
func TestPoisonAndEndlessModelsLeaveProdOnTime(t *testing.T) {
	w := newWorld(t)
	w.register("pv", "v1", "@hourly", pv(60), "ts")
	w.deploy("p1", map[string]string{"pv": "v1"})
	const timeout = 4 * time.Second
	w.publish(2, 2, timeout, 10*time.Millisecond)

	w.registerAt(&commands.RegisterSnapshot{Model: "poison", Version: "v1", Cron: "@hourly", Start: hour(46), DependsOn: []string{"pv"}, SQL: poisonSQL, TimeColumn: "ts"})
	w.registerAt(&commands.RegisterSnapshot{Model: "endless", Version: "v1", Cron: "@hourly", Start: hour(46), SQL: endlessSQL, TimeColumn: "ts"})
	w.do(&commands.BuildPlan{Plan: "dev-endless", Env: "dev", Versions: map[string]string{"endless": "v1"}})
	w.do(&commands.BuildPlan{Plan: "dev-poison", Env: "dev", Versions: map[string]string{"pv": "v1", "poison": "v1"}})
	w.eventually("the endless model's first attempt running", func(st *projections.State) bool { return true })

	started := time.Now()
	for _, h := range []int{49, 50, 51} {
		w.advance(hour(h))
		w.eventually("prod's frontier at its tick", func(st *projections.State) bool { return !st.Frontier("pv@v1").Before(hour(h)) })
	}
	took := time.Since(started)
	var endlessFinal *events.RunFailed
	w.e.Projection().Read(func(st *projections.State) { endlessFinal = finalFailure(st, "endless@v1") })
	if endlessFinal != nil {
		t.Errorf("prod's three ticks took %s: the endless model was given up first (%+v)", took, endlessFinal)
	}

	w.eventually("both dev models given up", func(st *projections.State) bool {
		return finalFailure(st, "poison@v1") != nil && finalFailure(st, "endless@v1") != nil
	})
	w.e.Projection().Read(func(st *projections.State) {
		p := st.Failures["poison@v1"]
		if f := p.LastFinal; p.Count != 2 || p.Final != 1 || f.Attempt != 2 || !strings.Contains(f.Error, "Could not convert string 'x' to INT32") ||
			f.RunKind != events.RunBackfill || f.RunID != "backfill:dev-poison" {
			t.Errorf("poison's failures: %d (final %d), last final %+v", p.Count, p.Final, f)
		}
		// A timeout is final at once: not retried.
		e := st.Failures["endless@v1"]
		if f := e.LastFinal; e.Count != 1 || e.Final != 1 || f.Attempt != 1 || !strings.Contains(f.Error, "timed out after "+timeout.String()) {
			t.Errorf("endless's failures: %d, last final %+v", e.Count, f)
		}
		if n := st.SnapshotCoverage("poison@v1"); !n.Empty() {
			t.Errorf("poison covers %v", n)
		}
	})
	// Prod's rows are all there.
	w.clean()
}

// TestPlanCancelEndsItsWork: a plan whose backfill waits to retry a
// failed step is cancelled (cancel_plan, a PlanCancelled event): its
// item is given up at once, nothing more of it is computed or recorded,
// the engine refuses its completions, and promoting it reports what it
// misses (missing_intervals) rather than promoting its gap.
func TestPlanCancelEndsItsWork(t *testing.T) {
	w := newWorld(t)
	w.register("pv", "v1", "@hourly", pv(60), "ts")
	w.register("agg", "v1", "@hourly", aggOf("pv"), "hour", "pv")
	w.deploy("p1", map[string]string{"pv": "v1", "agg": "v1"})
	// A retry an hour away: only the cancellation can end the item.
	pb := w.publish(2, 5, time.Minute, time.Hour)
	w.register("agg", "v2", "@hourly", `SELECT date_trunc('hour', ts) AS hour, CAST(CASE WHEN user_id >= 0 THEN 'x' ELSE '1' END AS INTEGER) AS bad
FROM pv WHERE ts >= @start_ts AND ts < @end_ts`, "hour", "pv")
	built := w.do(&commands.BuildPlan{Plan: "p2", Env: "prod", Versions: map[string]string{"agg": "v2"}})
	w.eventually("the first failure recorded", func(st *projections.State) bool { return st.Failures["agg@v2"] != nil })
	item := events.WorkID(built.Seq, events.RunBackfill)

	if r := w.do(&commands.CancelPlan{Plan: "p2", Reason: "poison model"}); r.Events != 1 {
		t.Fatalf("cancel_plan: %+v", r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pb.mu.Lock()
		err, done := pb.done[item]
		pb.mu.Unlock()
		if done {
			if !errors.Is(err, work.ErrPlanCancelled) {
				t.Errorf("item %s given up with %v, want ErrPlanCancelled", item, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("item %s not given up after the plan's cancellation", item)
		}
		time.Sleep(10 * time.Millisecond) // polling the publisher, bounded by the deadline
	}
	// Cancelled again: refused, typed.
	again := w.e.Handle(t.Context(), &commands.CancelPlan{Meta: commands.Meta{ID: commands.NewID(), At: w.now}, Plan: "p2"})
	if ce := new(commands.Error); !errors.As(again.Err(), &ce) || ce.Code != commands.CodeConflict || ce.Field != "plan" {
		t.Errorf("second cancel_plan: %v, want a conflict on plan", again.Err())
	}
	// The engine refuses a completion of the cancelled plan's work.
	refused := w.e.Handle(t.Context(), &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: commands.Meta{ID: commands.NewID(), At: w.now},
		Model: "agg", Version: "v2", Ranges: built.Plan.Candidates[0].Backfill, RunKind: events.RunBackfill, RunID: "backfill:p2", Work: item}})
	if ce := new(commands.Error); !errors.As(refused.Err(), &ce) || ce.Code != commands.CodeInvalid || !strings.Contains(ce.Message, "cancelled") {
		t.Errorf("completion of cancelled work: %v, want invalid: cancelled", refused.Err())
	}
	d := w.do(&commands.Promote{Plan: "p2"}).Decision
	if d == nil || d.Outcome != events.Rejected || !strings.Contains(strings.Join(d.Codes, ","), "missing_intervals") {
		t.Fatalf("promote of the cancelled plan: %+v", d)
	}
	w.e.Projection().Read(func(st *projections.State) {
		if f := st.Failures["agg@v2"]; f.Count != 1 || f.Final != 0 {
			t.Errorf("agg@v2 failed %d times (final %d) after the cancellation, want once", f.Count, f.Final)
		}
		if pl := st.Plans["p2"]; pl.Cancelled == nil || pl.Cancelled.Reason != "poison model" || pl.Cancelled.Env != "prod" {
			t.Errorf("plan p2: cancelled %+v", pl.Cancelled)
		}
	})
}

// endlessPlans registers an endless model per name and builds the plans
// (plan → its models, each in its own dev env); it returns the plans'
// backfill items.
func (w *world) endlessPlans(plans map[string][]string) []string {
	w.t.Helper()
	var items []string
	for plan, models := range plans {
		versions := map[string]string{}
		for _, n := range models {
			w.registerAt(&commands.RegisterSnapshot{Model: n, Version: "v1", Cron: "@hourly", Start: hour(46), SQL: endlessSQL, TimeColumn: "ts"})
			versions[n] = "v1"
		}
		r := w.do(&commands.BuildPlan{Plan: plan, Env: "env-" + plan, Versions: versions})
		items = append(items, events.WorkID(r.Seq, events.RunBackfill))
	}
	return items
}

// prodTickWhileEndless: with the dev plans' endless models computing
// (their timeout a minute away), prod's tick is done, and no endless item
// has ended or failed by then: an order, not a time.
func prodTickWhileEndless(t *testing.T, w *world, pb *publisher, items []string, models []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for pb.inFlight() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no endless item started")
		}
		time.Sleep(10 * time.Millisecond) // polling the publisher, bounded by the deadline
	}
	w.advance(hour(49))
	w.eventually("prod's frontier at its tick", func(st *projections.State) bool { return !st.Frontier("pv@v1").Before(hour(49)) })
	if pb.finished(items...) {
		t.Errorf("an endless plan item ended before prod's tick was done")
	}
	w.e.Projection().Read(func(st *projections.State) {
		for _, m := range models {
			if f := st.Failures[m+"@v1"]; f != nil {
				t.Errorf("%s failed before prod's tick was done: %+v", m, f.LastFinal)
			}
		}
	})
}

// TestEndlessDevPlansLeaveProdTickOnTime: two dev plans of two endless
// models each, on a pool of two: plan work takes one worker at most, so
// prod's tick is done at once, while both plans still compute. On the
// pool in queue order the plans held both workers, each for steps ×
// timeout, and the tick waited for them.
func TestEndlessDevPlansLeaveProdTickOnTime(t *testing.T) {
	w := newWorld(t)
	w.register("pv", "v1", "@hourly", pv(60), "ts")
	w.deploy("p1", map[string]string{"pv": "v1"})
	pb := w.publish(2, 2, time.Minute, 10*time.Millisecond)
	items := w.endlessPlans(map[string][]string{"dev-a": {"e1", "e2"}, "dev-b": {"e3", "e4"}})
	prodTickWhileEndless(t, w, pb, items, []string{"e1", "e2", "e3", "e4"})
}

// TestManyEndlessPlansLeaveProdTickOnTime: six one-model endless plans
// queued ahead of prod's tick do not delay it: it is taken before them,
// on the worker plan work leaves free.
func TestManyEndlessPlansLeaveProdTickOnTime(t *testing.T) {
	w := newWorld(t)
	w.register("pv", "v1", "@hourly", pv(60), "ts")
	w.deploy("p1", map[string]string{"pv": "v1"})
	pb := w.publish(2, 2, time.Minute, 10*time.Millisecond)
	plans := map[string][]string{}
	var models []string
	for i := range 6 {
		m := fmt.Sprintf("e%d", i)
		plans["dev-"+m] = []string{m}
		models = append(models, m)
	}
	items := w.endlessPlans(plans)
	prodTickWhileEndless(t, w, pb, items, models)
}

// TestTimedOutBatchIsFinalAtOnce: each batch has its attempt's time: a
// plan of two endless models times out in each one's batch, and both
// failures are recorded final at the first of five attempts: a timeout is
// not retried.
func TestTimedOutBatchIsFinalAtOnce(t *testing.T) {
	w := newWorld(t)
	w.register("pv", "v1", "@hourly", pv(60), "ts")
	w.deploy("p1", map[string]string{"pv": "v1"})
	const timeout = 2 * time.Second
	pb := w.publish(2, 5, timeout, 10*time.Millisecond)
	items := w.endlessPlans(map[string][]string{"dev": {"e1", "e2"}})
	w.eventually("both endless models given up", func(st *projections.State) bool {
		return finalFailure(st, "e1@v1") != nil && finalFailure(st, "e2@v1") != nil
	})
	var texts []string
	w.e.Projection().Read(func(st *projections.State) {
		for _, m := range []string{"e1@v1", "e2@v1"} {
			f := st.Failures[m]
			if f.Count != 1 || f.Final != 1 || f.LastFinal.Attempt != 1 {
				t.Errorf("%s: %d failures (final %d), last final %+v; want one, final at attempt 1", m, f.Count, f.Final, f.LastFinal)
			}
			texts = append(texts, f.LastFinal.Error)
		}
	})
	joined := strings.Join(texts, "\n")
	if strings.Count(joined, "timed out after "+timeout.String()) != 2 {
		t.Errorf("failures %q: want each step's batch timed out", texts)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !pb.finished(items...) {
		if time.Now().After(deadline) {
			t.Fatal("the item is not given up")
		}
		time.Sleep(10 * time.Millisecond) // polling the publisher, bounded by the deadline
	}
}
