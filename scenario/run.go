package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/sqlcheck"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// Options configures Run.
type Options struct {
	// DataDir keeps the engine's stream there (for audit and replay later);
	// empty uses a temporary directory removed afterwards.
	DataDir string
	// OnStep, when set, is called after each step with its result.
	OnStep func(StepResult)
	// Warehouse, when set, is where the run computes its SQL models: the
	// built-in worker is a sqlrun.Runner that writes every SQL step of the
	// work it runs, interval by interval, into the snapshot tables before
	// recording it, and after each step every env's views are swapped onto
	// its incumbents' tables (sqlrun.SyncOnce), so they follow promotions
	// step by step. Each step that concerns an env then verifies it
	// (StepResult.Verify). Nil (the default): work is recorded without
	// computing anything.
	Warehouse *warehouse.Warehouse
	// DiffBeforePromote, with a Warehouse, has each promote step first
	// compare its plan's candidates' rows with their incumbents'
	// (sqlrun.DiffPlan) into StepResult.Diff, as `tidemark diff PLAN`
	// would right before `tidemark promote`.
	DiffBeforePromote bool
}

// diffTimeout bounds a promote step's diff (DiffBeforePromote).
const diffTimeout = time.Minute

// ModelResult is a decision's finding for one model.
type ModelResult struct {
	Missing  []string `json:"missing"`
	Advances int      `json:"advances"`
}

// Failure is one expectation that did not hold.
type Failure struct {
	Step int    `json:"step"`
	Key  string `json:"key"`
	Want string `json:"want"`
	Got  string `json:"got"`
}

func (f Failure) String() string {
	return fmt.Sprintf("step %d: %s: want %s, got %s", f.Step, f.Key, f.Want, f.Got)
}

// StepResult is what one step did and observed.
type StepResult struct {
	Step    int                    `json:"step"`
	Kind    string                 `json:"kind"`
	Plan    string                 `json:"plan,omitempty"`
	Env     string                 `json:"env,omitempty"`
	Outcome string                 `json:"outcome,omitempty"`
	Codes   []string               `json:"codes,omitempty"`
	Models  map[string]ModelResult `json:"models,omitempty"`
	// Findings explain a decision, one sentence each.
	Findings []events.Finding `json:"findings,omitempty"`
	// CatchUp lists, per model, what bounded catch-up computed before the
	// strict retry.
	CatchUp map[string][]string `json:"catch_up,omitempty"`
	// Scheduled lists, per model, the ranges the step asked the worker to
	// compute (merged): scheduler work with its lookback, repair work an
	// acceptance issued, catch-up work; never a plan's backfill. It is
	// derived from the events the step appended with work.Of.
	Scheduled map[string][]string `json:"scheduled,omitempty"`
	// RepairsClosed lists the repair debts the step closed.
	RepairsClosed []RepairClosed `json:"repairs_closed,omitempty"`
	// Fenced counts scheduler advances rejected as stale_generation.
	Fenced      int       `json:"fenced,omitempty"`
	Divergences *int      `json:"divergences,omitempty"`
	RepairsOpen int       `json:"repairs_open"`
	Clock       time.Time `json:"clock"`
	Seq         uint64    `json:"seq"`
	Failures    []Failure `json:"failures,omitempty"`
	// Verify is, with a warehouse, sqlrun.VerifyEnv of the step's env
	// after the step: per SQL model the env serves, the rows its view
	// shows that a recompute does not give, and the reverse.
	Verify map[string]warehouse.Diff `json:"verify,omitempty"`
	// Audits are the audit results the step recorded (its AuditRecorded
	// events, in stream order): the worker audits each batch it computes.
	Audits []events.AuditRecorded `json:"audits,omitempty"`
	// Diff is, for a promote step run with Options.DiffBeforePromote, the
	// plan's diff (sqlrun.DiffPlan) taken before the promotion.
	Diff     *sqlrun.DiffReply `json:"diff,omitempty"`
	decision *events.PromotionDecided
	sched    map[string]interval.Set
	divs     []replay.Divergence
}

// RepairClosed is a repair debt closed during a step, with its latency.
type RepairClosed struct {
	Model     string   `json:"model"`
	Snapshot  string   `json:"snapshot"`
	Ranges    []string `json:"ranges"`
	LatencyMS int64    `json:"latency_ms"`
}

// Result sums up a run.
type Result struct {
	File         string       `json:"file"`
	Name         string       `json:"name"`
	Steps        []StepResult `json:"steps"`
	Expectations int          `json:"expectations"`
	Failed       int          `json:"failed"`
	Failures     []Failure    `json:"failures,omitempty"`
}

// simClock is the scenario's simulated clock.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *simClock) set(t time.Time) { c.mu.Lock(); c.t = t.UTC(); c.mu.Unlock() }

type runner struct {
	f      *File
	node   *natsnode.Node
	eng    *engine.Engine
	worker work.Runner // the built-in worker, computing SQL with a warehouse
	wh     *warehouse.Warehouse
	clock  *simClock
	env    string // the env the last step concerned
	ids    int
	tail   *tail
	// issued is the work the current step's events made due.
	issued []work.Item
	// audits are the AuditRecorded events the current step appended.
	audits  []events.AuditRecorded
	repairs repairQueue
	// diffFirst is Options.DiffBeforePromote (with a warehouse).
	diffFirst bool
}

// Run plays a validated file against a fresh embedded engine.
func Run(ctx context.Context, f *File, opts Options) (*Result, error) {
	dir := opts.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tidemark-scenario-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	r, err := start(ctx, f, dir)
	if err != nil {
		return nil, err
	}
	if opts.Warehouse != nil {
		r.wh = opts.Warehouse
		r.worker = &sqlrun.Runner{WH: r.wh, Proj: r.eng.Projection(), Done: r.worker}
		r.diffFirst = opts.DiffBeforePromote
	}
	defer r.close(context.WithoutCancel(ctx))
	res := &Result{File: f.Path, Name: f.Name}
	for _, st := range f.Steps {
		sr, err := r.step(ctx, st)
		if err != nil {
			return res, fmt.Errorf("%s: step %d (%s): %w", f.Path, st.Num, st.Kind, err)
		}
		sr.Failures = r.check(ctx, st, &sr)
		res.Expectations += st.Expect.Keys()
		res.Failed += len(sr.Failures)
		res.Failures = append(res.Failures, sr.Failures...)
		res.Steps = append(res.Steps, sr)
		if opts.OnStep != nil {
			opts.OnStep(sr)
		}
	}
	return res, nil
}

// start opens a fresh engine in dir for f, with the built-in worker.
func start(ctx context.Context, f *File, dir string) (*runner, error) {
	clock := &simClock{t: f.Clock}
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: dir, Name: "tidemark-engine"})
	if err != nil {
		return nil, err
	}
	// Model SQL is checked as serve checks it (sqlcheck).
	var eng *engine.Engine
	check := sqlcheck.ForEngine(func(fn func(*projections.State)) { eng.Projection().Read(fn) })
	eng, err = engine.Open(ctx, node.Conn(), engine.Config{Clock: clock.now, TrustCommandTime: true, Logger: quietLogger(), Check: check})
	if err != nil {
		node.Close()
		return nil, err
	}
	return &runner{f: f, node: node, eng: eng, clock: clock, tail: openTail(ctx, eng.Log().Reader()), worker: &inproc.Worker{Handler: eng, Actor: "worker:builtin"}}, nil
}

func (r *runner) close(ctx context.Context) {
	r.tail.stop()
	r.eng.Close(ctx)
	r.node.Close()
}

func (r *runner) id(kind string) string {
	r.ids++
	return fmt.Sprintf("scenario-%s-%d", kind, r.ids)
}

func (r *runner) do(ctx context.Context, cmd commands.Command) (commands.Reply, error) {
	m := cmd.Header()
	if m.ID == "" {
		m.ID = r.id(cmd.Kind())
	}
	m.At, m.Actor = r.clock.now(), "scenario"
	rep := r.eng.Handle(ctx, cmd)
	if err := rep.Err(); err != nil {
		return rep, fmt.Errorf("%s: %w", cmd.Kind(), err)
	}
	return rep, nil
}

// take reads the events appended since the last take and returns the work
// they make due (work.Of per command), adding it to the step's.
func (r *runner) take(ctx context.Context) ([]work.Item, error) {
	var seq uint64
	r.eng.Projection().Read(func(st *projections.State) { seq = st.Seq })
	recs, err := r.tail.readTo(ctx, seq)
	if err != nil {
		return nil, err
	}
	items := workOf(recs)
	r.issued = append(r.issued, items...)
	for _, rec := range recs {
		if a, ok := rec.Event.Payload.(events.AuditRecorded); ok {
			r.audits = append(r.audits, a)
		}
	}
	return items, nil
}

// run has the built-in worker compute the items of one run kind.
func (r *runner) run(ctx context.Context, items []work.Item, kind events.RunKind, at time.Time) error {
	for _, it := range items {
		if it.RunKind == kind {
			if err := r.worker.Run(ctx, it, at); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *runner) register(ctx context.Context, vs map[string]Version) error {
	for _, model := range slices.Sorted(maps.Keys(vs)) {
		v := vs[model]
		m := withDefaults(v.Model)
		if _, err := r.do(ctx, &commands.RegisterSnapshot{
			Model: model, Version: v.Name, Cron: m.Cron, IntervalUnit: m.Unit, Start: m.Start,
			Lookback: m.Lookback, SnapshotKind: m.Kind, AllowPartials: m.AllowPartials, DependsOn: m.DependsOn,
			SQL: m.SQL, TimeColumn: m.TimeColumn, BatchSize: m.BatchSize, BatchConcurrency: m.BatchConcurrency, Audits: m.Audits, Grain: m.Grain,
			Seed: m.Seed, Macros: m.Macros, Freshness: m.Freshness,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) buildPlan(ctx context.Context, id, env string, vs map[string]Version, bounds commands.Bounds) (events.PlanBuilt, error) {
	if err := r.register(ctx, vs); err != nil {
		return events.PlanBuilt{}, err
	}
	versions := map[string]string{}
	for m, v := range vs {
		versions[m] = v.Name
	}
	rep, err := r.do(ctx, &commands.BuildPlan{Plan: id, Env: env, Versions: versions, Bounds: bounds})
	if err != nil {
		return events.PlanBuilt{}, err
	}
	return *rep.Plan, nil
}

func (r *runner) plan(id string) (events.PlanBuilt, bool) {
	var pl events.PlanBuilt
	ok := false
	r.eng.Projection().Read(func(st *projections.State) {
		if p, found := st.Plans[id]; found {
			pl, ok = p.Built, true
		}
	})
	return pl, ok
}

// promote evaluates a plan's promotion. When the engine starts bounded
// catch-up, the built-in worker computes the requested work, the clock
// moves to advanceTo (the incumbents' ticks fire) when it is set, and the
// plan is promoted again for the strict retry.
func (r *runner) promote(ctx context.Context, id string, finalize bool, advanceTo time.Time) (*events.PromotionDecided, *events.CatchUpRequested, error) {
	rep, err := r.do(ctx, &commands.Promote{Plan: id})
	if err != nil {
		return nil, nil, err
	}
	pl, _ := r.plan(id)
	req := rep.CatchUp
	if req != nil {
		items, err := r.take(ctx)
		if err != nil {
			return nil, req, err
		}
		if err := r.run(ctx, items, events.RunCatchUp, r.clock.now()); err != nil {
			return nil, req, err
		}
		if !advanceTo.IsZero() {
			if _, err := r.runScheduler(ctx, pl.Env, advanceTo, false, 0); err != nil {
				return nil, req, err
			}
			advanceTo = time.Time{}
		}
		if rep, err = r.do(ctx, &commands.Promote{Plan: id}); err != nil {
			return nil, req, err
		}
	}
	d := rep.Decision
	if d != nil && d.Outcome == events.Accepted && finalize {
		if _, err := r.do(ctx, &commands.Finalize{Plan: id}); err != nil {
			return d, req, err
		}
	}
	if !advanceTo.IsZero() {
		// Without a catch-up phase there is nothing to interleave with: the
		// clock still moves, so later steps see the same time as written.
		if _, err := r.runScheduler(ctx, pl.Env, advanceTo, false, 0); err != nil {
			return d, req, err
		}
	}
	return d, req, nil
}

// MaxTicks bounds the ticks one run_scheduler step may fire.
const MaxTicks = 1_000_000

// runScheduler fires every tick up to until. gen, when not 0, is the
// generation the scheduler's first view was read at; it returns how many
// advances were fenced off as stale.
func (r *runner) runScheduler(ctx context.Context, env string, until time.Time, paused bool, gen uint64) (int, error) {
	fenced := 0
	for i := 0; ; i++ {
		if i >= MaxTicks {
			return fenced, fmt.Errorf("more than %d ticks before %s", MaxTicks, until.Format(time.RFC3339))
		}
		var next time.Time
		r.eng.Projection().Read(func(st *projections.State) { next = scheduler.NextTick(st, []string{env}, r.clock.now()) })
		if next.IsZero() || next.After(until) {
			break
		}
		r.clock.set(next)
		_, n, err := (&scheduler.Scheduler{Handler: r.eng, Proj: r.eng.Projection(), Logger: quietLogger()}).Tick(ctx, env, next, gen)
		if err != nil {
			return fenced, err
		}
		fenced += n
		gen = 0
		// The worker runs what the tick's events make due, derived as a
		// serving process derives it (work.Of), not from the reply.
		items, err := r.take(ctx)
		if err != nil {
			return fenced, err
		}
		if !paused {
			if err := r.run(ctx, items, events.RunScheduled, next); err != nil {
				return fenced, err
			}
		}
	}
	r.clock.set(until)
	return fenced, nil
}

func (r *runner) step(ctx context.Context, st Step) (StepResult, error) {
	sr := StepResult{Step: st.Num, Kind: st.Kind, Plan: st.Plan, Env: st.Env}
	closedBefore := map[uint64]bool{}
	r.eng.Projection().Read(func(s *projections.State) {
		for _, d := range s.Repairs {
			closedBefore[d.OpenSeq] = !d.Open()
		}
	})
	if _, err := r.take(ctx); err != nil {
		return sr, err
	}
	r.issued, r.audits = nil, nil
	if st.Env != "" {
		r.env = st.Env
	}
	if st.Plan != "" && st.Env == "" {
		if pl, ok := r.plan(st.Plan); ok {
			r.env = pl.Env
			sr.Env = pl.Env
		}
	}
	switch st.Kind {
	case "deploy":
		id := fmt.Sprintf("deploy-%d", st.Num)
		sr.Plan = id
		pl, err := r.buildPlan(ctx, id, st.Env, st.Versions, commands.Bounds{})
		if err != nil {
			return sr, err
		}
		if err := r.worker.Run(ctx, work.Backfill(pl), r.clock.now()); err != nil {
			return sr, err
		}
		if sr.decision, _, err = r.promote(ctx, id, true, time.Time{}); err != nil {
			return sr, err
		}
	case "plan":
		if _, err := r.buildPlan(ctx, st.Plan, st.Env, st.Versions, st.Bounds); err != nil {
			return sr, err
		}
	case "backfill":
		pl, _ := r.plan(st.Plan)
		var item work.Item
		r.eng.Projection().Read(func(s *projections.State) { item = work.BackfillThrough(s, pl, st.Through) })
		if err := r.worker.Run(ctx, item, r.clock.now()); err != nil {
			return sr, err
		}
	case "run_scheduler":
		// Repair work issued by an acceptance runs first, before any tick.
		for _, it := range r.repairs.due(st.WorkerPaused) {
			if err := r.worker.Run(ctx, it, r.clock.now()); err != nil {
				return sr, err
			}
		}
		fenced, err := r.runScheduler(ctx, st.Env, st.Until, st.WorkerPaused, st.Generation)
		if err != nil {
			return sr, err
		}
		if sr.Fenced = fenced; fenced > 0 {
			sr.Codes = []string{commands.CodeStaleGeneration.String()}
		}
	case "complete":
		if _, err := r.do(ctx, &commands.CompleteIntervals{Model: st.Model, Version: st.VersionName, Ranges: st.Intervals, RunKind: events.RunManual, Audits: st.Audits}); err != nil {
			return sr, err
		}
	case "invalidate":
		if _, err := r.do(ctx, &commands.InvalidateIntervals{Model: st.Model, Version: st.VersionName, Ranges: st.Intervals, Reason: "scenario"}); err != nil {
			return sr, err
		}
	case "promote":
		if r.diffFirst && r.wh != nil {
			dctx, cancel := context.WithTimeout(ctx, diffTimeout)
			d, err := sqlrun.DiffPlan(dctx, r.wh, r.eng.Projection(), st.Plan, "")
			cancel()
			if err != nil {
				return sr, fmt.Errorf("diff before the promotion: %w", err)
			}
			sr.Diff = &d
		}
		var err error
		var req *events.CatchUpRequested
		if sr.decision, req, err = r.promote(ctx, st.Plan, st.Finalize, st.AdvanceDuringCatchUp); err != nil {
			return sr, err
		}
		if req != nil {
			sr.CatchUp = map[string][]string{}
			for _, w := range req.Work {
				if set := interval.NewSet(w.Ranges...).AddSet(w.Recompute); !set.Empty() {
					sr.CatchUp[w.Model] = set.Strings()
				}
			}
		}
	case "replay":
		divs, err := r.verify(ctx)
		if err != nil {
			return sr, err
		}
		n := len(divs)
		sr.Divergences, sr.divs = &n, divs
	}
	if d := sr.decision; d != nil {
		sr.Outcome, sr.Codes, sr.Findings = string(d.Outcome), d.Codes, d.Findings
		sr.Models = map[string]ModelResult{}
		for m, f := range d.Models {
			sr.Models[m] = ModelResult{Missing: interval.Set(f.Missing).Strings(), Advances: f.Advances}
		}
	}
	if _, err := r.take(ctx); err != nil {
		return sr, err
	}
	sr.Audits = r.audits
	sr.sched = scheduled(r.issued)
	sr.Scheduled = rangeStrings(sr.sched)
	r.repairs.issued(r.issued)
	sr.Clock = r.clock.now()
	if r.wh != nil {
		if err := r.data(ctx, &sr); err != nil {
			return sr, err
		}
	}
	r.eng.Projection().Read(func(s *projections.State) {
		sr.Seq = s.Seq
		sr.RepairsOpen = len(s.OpenRepairs())
		for _, d := range s.Repairs {
			if !d.Open() && !closedBefore[d.OpenSeq] {
				sr.RepairsClosed = append(sr.RepairsClosed, RepairClosed{Model: d.Model, Snapshot: d.Snapshot,
					Ranges: interval.Set(d.Ranges).Strings(), LatencyMS: d.LatencyMS})
			}
		}
	})
	return sr, nil
}

// verify rebuilds every projection from the stream, compares it with the
// live one, and re-evaluates every recorded decision.
func (r *runner) verify(ctx context.Context) ([]replay.Divergence, error) {
	recs, err := r.eng.Log().Reader().Read(ctx, eventlog.ReadOptions{})
	if err != nil {
		return nil, err
	}
	divs := replay.Verify(recs)
	rebuilt, err := json.Marshal(replay.Fold(recs))
	if err != nil {
		return nil, err
	}
	var live []byte
	r.eng.Projection().Read(func(st *projections.State) { live, err = json.Marshal(st) })
	if err != nil {
		return nil, err
	}
	if string(live) != string(rebuilt) {
		divs = append(divs, replay.Divergence{Field: "projections", Recorded: "live state", Recomputed: "rebuilt state differs"})
	}
	return divs, nil
}

// data swaps every env's views onto its incumbents' tables and verifies
// the step's env, when it has one.
func (r *runner) data(ctx context.Context, sr *StepResult) error {
	if err := sqlrun.SyncOnce(ctx, r.wh, r.eng.Projection()); err != nil {
		return err
	}
	env := sr.Env
	if env == "" {
		env = r.env
	}
	exists := false
	r.eng.Projection().Read(func(s *projections.State) { exists = s.Envs[env] != nil })
	if !exists {
		return nil
	}
	diffs, err := sqlrun.VerifyEnv(ctx, r.wh, r.eng.Projection(), env, "")
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		sr.Verify = diffs
	}
	return nil
}
