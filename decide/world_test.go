package decide

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// The test harness: a world is a projection state that commands are decided
// against and whose decisions are folded back into it, as the engine does,
// without a server. Every decision it folds is checked against the rules
// that hold for all decisions (see checkDecision).

// t0 is the fixed origin of every test clock.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// h is t0 plus i hours.
func h(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

// day is t0 plus i days.
func day(i int) time.Time { return t0.AddDate(0, 0, i) }

// hrs is the range [h(a), h(b)).
func hrs(a, b int) interval.Range { return interval.R(h(a), h(b)) }

// rs is a normalised set of ranges.
func rs(r ...interval.Range) interval.Set { return interval.NewSet(r...) }

type world struct {
	tb  testing.TB
	st  *projections.State
	ids *events.IDSource
	seq uint64
	n   int
	// log is every event folded, in order.
	log []events.Event
}

func newWorld(tb testing.TB) *world {
	return &world{tb: tb, st: projections.New(), ids: events.NewIDSource()}
}

// nextID is a fresh command id.
func (w *world) nextID() string {
	w.n++
	return fmt.Sprintf("cmd-%04d", w.n)
}

// do decides cmd at clock at with a fresh command id: it validates it,
// decides it and folds the decision's events (caused by the command, at
// increasing sequences) into the state. An error appends nothing.
func (w *world) do(cmd commands.Command, at time.Time) (Decision, error) {
	m := cmd.Header()
	m.ID, m.At = w.nextID(), at
	return w.again(cmd)
}

// again decides cmd with the id and clock it already carries (a retry).
func (w *world) again(cmd commands.Command) (Decision, error) {
	w.tb.Helper()
	if err := cmd.Validate(); err != nil {
		return Decision{}, err
	}
	before := w.st.Seq
	dec, err := Decide(w.st, cmd)
	if w.st.Seq != before {
		w.tb.Fatalf("Decide changed the state it read")
	}
	if err != nil {
		if len(dec.Events) > 0 {
			w.tb.Fatalf("%s: an error with %d events", cmd.Kind(), len(dec.Events))
		}
		return dec, err
	}
	checkDecision(w.tb, w.st, cmd, dec)
	w.fold(cmd, cmd.Header().At, dec.Events)
	return dec, nil
}

// fold applies payloads as the events of cmd at clock at, as the engine
// writes them (caused by its id, carrying its digest).
func (w *world) fold(cmd commands.Command, at time.Time, ps []events.Payload) {
	w.tb.Helper()
	for _, p := range ps {
		ev := events.New(w.ids, at, p)
		ev.Causation, ev.Digest = cmd.Header().ID, commands.Digest(cmd)
		w.seq++
		w.log = append(w.log, ev)
		if err := projections.Apply(w.st, w.seq, ev); err != nil {
			w.tb.Fatalf("fold %T: %v", p, err)
		}
	}
}

// must is do that fails the test on an error.
func (w *world) must(cmd commands.Command, at time.Time) Decision {
	w.tb.Helper()
	dec, err := w.do(cmd, at)
	if err != nil {
		w.tb.Fatalf("%s at %s: %v", cmd.Kind(), at.Format(time.RFC3339), err)
	}
	return dec
}

// refused is do that expects a *commands.Error with code and no events.
func (w *world) refused(cmd commands.Command, at time.Time, code commands.Code) *commands.Error {
	w.tb.Helper()
	seq := w.st.Seq
	_, err := w.do(cmd, at)
	var ce *commands.Error
	if !errors.As(err, &ce) {
		w.tb.Fatalf("%s: want a %s *commands.Error, got %v", cmd.Kind(), code, err)
	}
	if ce.Code != code {
		w.tb.Fatalf("%s: want code %s, got %v", cmd.Kind(), code, ce)
	}
	if w.st.Seq != seq {
		w.tb.Fatalf("%s: a refused command appended events", cmd.Kind())
	}
	return ce
}

// register registers a version; Start defaults to t0.
func (w *world) register(r commands.RegisterSnapshot) {
	w.tb.Helper()
	if r.Start.IsZero() {
		r.Start = t0
	}
	w.must(&r, t0)
}

// hourly registers an @hourly incremental version of model.
func (w *world) hourly(model, version string, deps ...string) {
	w.tb.Helper()
	w.register(commands.RegisterSnapshot{Model: model, Version: version, Cron: "@hourly", DependsOn: deps})
}

// build builds a plan and returns what it recorded.
func (w *world) build(c commands.BuildPlan, at time.Time) events.PlanBuilt {
	w.tb.Helper()
	dec := w.must(&c, at)
	if dec.Reply.Plan == nil {
		w.tb.Fatalf("build_plan %s: no plan in the reply", c.Plan)
	}
	return *dec.Reply.Plan
}

// plan builds plan id in env setting versions, with the bounds given
// (trailing, catch-up).
func (w *world) plan(id, env string, versions map[string]string, at time.Time, bounds ...int) events.PlanBuilt {
	w.tb.Helper()
	c := commands.BuildPlan{Plan: id, Env: env, Versions: versions}
	if len(bounds) > 0 {
		c.MaxTrailingGapAdvances = bounds[0]
	}
	if len(bounds) > 1 {
		c.MaxCatchUpAdvances = bounds[1]
	}
	return w.build(c, at)
}

// backfill completes every candidate's backfill set, as a worker would.
func (w *world) backfill(plan string, at time.Time) {
	w.tb.Helper()
	for _, c := range w.st.Plans[plan].Built.Candidates {
		if len(c.Backfill) == 0 {
			continue
		}
		w.complete(c.Snapshot, at, events.RunBackfill, c.Backfill...)
	}
}

// complete completes ranges of a snapshot ("model@version").
func (w *world) complete(snapshot string, at time.Time, kind events.RunKind, r ...interval.Range) Decision {
	w.tb.Helper()
	m, v, _ := events.ParseSnapshotID(snapshot)
	return w.must(&commands.CompleteIntervals{Model: m, Version: v, Ranges: r, RunKind: kind}, at)
}

// invalidate invalidates ranges of a snapshot.
func (w *world) invalidate(snapshot string, at time.Time, r ...interval.Range) Decision {
	w.tb.Helper()
	m, v, _ := events.ParseSnapshotID(snapshot)
	return w.must(&commands.InvalidateIntervals{Model: m, Version: v, Ranges: r, Reason: "test"}, at)
}

// promote promotes a plan with a fresh command id.
func (w *world) promote(plan string, at time.Time) Decision {
	w.tb.Helper()
	return w.must(&commands.Promote{Plan: plan}, at)
}

// decided promotes a plan and returns the decision it recorded.
func (w *world) decided(plan string, at time.Time) events.PromotionDecided {
	w.tb.Helper()
	dec := w.promote(plan, at)
	if dec.Reply.Decision == nil {
		w.tb.Fatalf("promote %s: no decision (catch-up %v)", plan, dec.Reply.CatchUp != nil)
	}
	return *dec.Reply.Decision
}

// deploy builds a strict plan setting versions, completes its backfill,
// promotes it (it must be accepted) and finalizes it.
func (w *world) deploy(env, plan string, versions map[string]string, at time.Time) {
	w.tb.Helper()
	w.plan(plan, env, versions, at)
	w.backfill(plan, at)
	if pd := w.decided(plan, at); pd.Outcome != events.Accepted {
		w.tb.Fatalf("deploy %s: %s %v", plan, pd.Outcome, pd.Codes)
	}
	w.must(&commands.Finalize{Plan: plan}, at)
}

// advance runs one scheduler tick at at with the env's generation and
// returns the advances; the work is not run (a paused worker).
func (w *world) advance(env string, at time.Time) []events.SchedulerAdvanced {
	w.tb.Helper()
	dec := w.must(&commands.AdvanceScheduler{Env: env, Generation: w.st.Env(env).Generation}, at)
	return dec.Reply.Advances
}

// tick runs one scheduler tick at at and completes the advances' work as
// a worker would, in the order given.
func (w *world) tick(env string, at time.Time) []events.SchedulerAdvanced {
	w.tb.Helper()
	advs := w.advance(env, at)
	for _, a := range advs {
		w.complete(a.Snapshot, at, events.RunScheduled, a.Ranges...)
	}
	return advs
}

// run ticks env at every tick of any of its incumbents in (from, until].
func (w *world) run(env string, from, until time.Time) {
	w.tb.Helper()
	for t := from; ; {
		next := time.Time{}
		for _, id := range w.st.Env(env).Incumbents {
			n := w.st.Snapshots[id].Schedule.Next(t)
			if next.IsZero() || n.Before(next) {
				next = n
			}
		}
		if next.IsZero() || next.After(until) {
			return
		}
		w.tick(env, next)
		t = next
	}
}

// incumbent is the snapshot serving model in env.
func (w *world) incumbent(env, model string) string { return w.st.Env(env).Incumbents[model] }

// openRepairs counts the open repair debts.
func (w *world) openRepairs() int { return len(w.st.OpenRepairs()) }

// The codes a decision may carry (DESIGN.md, "Decision codes (the complete
// list)"), written down here rather than taken from the policy package.
var (
	acceptedCodes = []string{"no_gaps", "caught_up", "trailing_gap_accepted", "forward_only_overlap_retained", "audit_warning"}
	rejectedCodes = []string{"conflicting_plan", "missing_intervals", "schedule_changed", "historical_gap", "internal_gap",
		"ambiguous_boundary", "trailing_gap_exceeds_bound", "downstream_overlap", "catch_up_exhausted", "audit_failed",
		"forward_only_overlap_retained", "audit_warning"}
)

// checkDecision checks what holds for every decision: Expect names only
// subjects the events write, at the sequences the view holds; every
// recorded promotion decision carries only the codes its outcome allows,
// conflicting_plan alone and without missing ranges, codes that are the
// union of its models' codes, and repair work exactly for the candidates
// accepted with a gap, in plan order.
func checkDecision(tb testing.TB, st *projections.State, cmd commands.Command, dec Decision) {
	tb.Helper()
	written := map[string]bool{}
	for _, p := range dec.Events {
		written[p.Subject()] = true
	}
	for s, seq := range dec.Expect.Subjects {
		// With no events nothing is appended, so the condition is moot
		// (an empty advance still names the env subject).
		if !written[s] && len(dec.Events) > 0 {
			tb.Fatalf("%s: Expect names subject %s, which no event writes (events %v)", cmd.Kind(), s, written)
		}
		if seq != st.SubjectSeq[s] {
			tb.Fatalf("%s: Expect %s at %d, the view has %d", cmd.Kind(), s, seq, st.SubjectSeq[s])
		}
	}
	if dec.Expect.LastSeq != nil && *dec.Expect.LastSeq != st.Seq {
		tb.Fatalf("%s: Expect last seq %d, the view is at %d", cmd.Kind(), *dec.Expect.LastSeq, st.Seq)
	}
	if len(dec.Events) > 0 && dec.Expect.LastSeq == nil && len(dec.Expect.Subjects) == 0 {
		tb.Fatalf("%s: %d events appended under no condition", cmd.Kind(), len(dec.Events))
	}
	for _, p := range dec.Events {
		if rb, ok := p.(events.EnvironmentRolledBack); ok {
			// A rollback carries the view and clock it was decided at and
			// moves the generation on by one.
			gen := st.Env(rb.Env).Generation
			if rb.EvaluatedAtSeq != st.Seq || !rb.EvaluatedAt.Equal(cmd.Header().At) || rb.FromGeneration != gen || rb.Generation != gen+1 ||
				rb.ToGeneration >= gen || len(rb.Models) == 0 {
				tb.Fatalf("rollback of %s: evaluated at seq %d (view %d), clock %v (command %v), generations %d -> %d (to %d's), env at %d, %d models",
					rb.Env, rb.EvaluatedAtSeq, st.Seq, rb.EvaluatedAt, cmd.Header().At, rb.FromGeneration, rb.Generation, rb.ToGeneration, gen, len(rb.Models))
			}
			continue
		}
		pd, ok := p.(events.PromotionDecided)
		if !ok {
			continue
		}
		// A decision carries the sequence and clock it was evaluated at,
		// the policy, and the generation after it (bumped on acceptance).
		pl := st.Plans[pd.Plan]
		gen := st.Env(pd.Env).Generation
		if pd.Outcome == events.Accepted {
			gen++
		}
		if pd.EvaluatedAtSeq != st.Seq || !pd.EvaluatedAt.Equal(cmd.Header().At) || pl == nil ||
			pd.Policy != pl.Built.Policy || pd.Generation != gen || pd.Env != pl.Built.Env {
			tb.Fatalf("decision %s: evaluated at seq %d (view %d), clock %v (command %v), policy %+v, generation %d (want %d)",
				pd.Plan, pd.EvaluatedAtSeq, st.Seq, pd.EvaluatedAt, cmd.Header().At, pd.Policy, pd.Generation, gen)
		}
		checkPromotion(tb, st, pd)
	}
}

func checkPromotion(tb testing.TB, st *projections.State, pd events.PromotionDecided) {
	tb.Helper()
	allowed := rejectedCodes
	if pd.Outcome == events.Accepted {
		allowed = acceptedCodes
	} else if pd.Outcome != events.Rejected {
		tb.Fatalf("decision %s: outcome %q", pd.Plan, pd.Outcome)
	}
	for _, c := range pd.Codes {
		if !slices.Contains(allowed, c) {
			tb.Fatalf("decision %s: %s decision carries code %s (%v)", pd.Plan, pd.Outcome, c, pd.Codes)
		}
	}
	for _, f := range pd.Findings {
		if !slices.Contains(allowed, f.Code) {
			tb.Fatalf("decision %s: %s decision has a finding with code %s", pd.Plan, pd.Outcome, f.Code)
		}
	}
	if !sort.StringsAreSorted(pd.Codes) {
		tb.Fatalf("decision %s: codes not sorted: %v", pd.Plan, pd.Codes)
	}
	if slices.Contains(pd.Codes, "conflicting_plan") {
		if len(pd.Codes) != 1 {
			tb.Fatalf("decision %s: conflicting_plan with other codes %v", pd.Plan, pd.Codes)
		}
		for m, f := range pd.Models {
			if len(f.Missing) > 0 {
				tb.Fatalf("decision %s: conflicting_plan with missing ranges for %s: %v", pd.Plan, m, f.Missing)
			}
		}
		if len(pd.Repairs) > 0 {
			tb.Fatalf("decision %s: conflicting_plan with repairs", pd.Plan)
		}
		return
	}
	union := map[string]bool{}
	for _, f := range pd.Models {
		for _, c := range f.Codes {
			union[c] = true
		}
	}
	var got []string
	for c := range union {
		got = append(got, c)
	}
	sort.Strings(got)
	if !slices.Equal(got, pd.Codes) && !(len(got) == 0 && len(pd.Codes) == 0) {
		tb.Fatalf("decision %s: codes %v are not the union of the models' codes %v", pd.Plan, pd.Codes, got)
	}
	// Repair work: one entry per candidate accepted with a gap, in plan
	// order, whole intervals covering the gap.
	pl := st.Plans[pd.Plan]
	var want []string
	if pd.Outcome == events.Accepted && pl != nil {
		for _, c := range pl.Built.Candidates {
			if len(pd.Models[c.Model].Missing) > 0 {
				want = append(want, c.Model)
			}
		}
	}
	var have []string
	for _, r := range pd.Repairs {
		have = append(have, r.Model)
		sn := st.Snapshots[r.Snapshot]
		gap := interval.NewSet(pd.Models[r.Model].Missing...)
		work := interval.NewSet(r.Ranges...)
		for _, g := range gap {
			if !work.Covers(g) {
				tb.Fatalf("decision %s: repair work %v of %s does not cover the gap %v", pd.Plan, work, r.Model, g)
			}
		}
		u := sn.Schedule.Unit()
		for _, x := range work {
			if !u.Aligned(x.Start) || (!u.Aligned(x.End) && !sn.AllowPartials) {
				tb.Fatalf("decision %s: repair work %v of %s is not whole %s intervals", pd.Plan, x, r.Model, u)
			}
		}
	}
	if !slices.Equal(have, want) {
		tb.Fatalf("decision %s: repair work for %v, want %v", pd.Plan, have, want)
	}
}

// model describes a version to register; the zero fields default to an
// @hourly incremental version starting at t0.
type model struct {
	name, version string
	cron          string
	unit          interval.Unit
	kind          events.Kind
	lookback      int
	partials      bool
	start         time.Time
	deps          []string
	// sql and seed are a whole kind's query and a seed's CSV content.
	sql, seed string
}

func (m model) command() commands.RegisterSnapshot {
	r := commands.RegisterSnapshot{Model: m.name, Version: m.version, Cron: m.cron, IntervalUnit: m.unit,
		SnapshotKind: m.kind, Lookback: m.lookback, AllowPartials: m.partials, Start: m.start, DependsOn: m.deps, SQL: m.sql, Seed: m.seed}
	if r.Version == "" {
		r.Version = "v1"
	}
	if r.Cron == "" {
		r.Cron = "@hourly"
	}
	return r
}

// deployed registers ms and deploys them to env prod at clock at (plan
// "deploy"): every model's incumbent is its v1.
func deployed(tb testing.TB, at time.Time, ms ...model) *world {
	tb.Helper()
	w := newWorld(tb)
	versions := map[string]string{}
	for _, m := range ms {
		w.register(m.command())
		versions[m.name] = m.command().Version
	}
	w.deploy("prod", "deploy", versions, at)
	return w
}

// standard is the race of DESIGN.md: events (and the children given) are
// deployed at 06:00 and scheduled until 10:00; events v2 is registered
// (as given, else like v1) and plan p1 setting it is built at 10:00 with
// bounds (trailing, catch-up) and backfilled. The scheduler has not
// ticked since.
func standard(tb testing.TB, v2 *model, bounds []int, children ...model) *world {
	tb.Helper()
	w := deployed(tb, h(6), append([]model{{name: "events"}}, children...)...)
	w.run("prod", h(6), h(10))
	if v2 == nil {
		v2 = &model{name: "events"}
	}
	c := v2.command()
	c.Version = "v2"
	w.register(c)
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(10), bounds...)
	w.backfill("p1", h(10))
	return w
}

// at1107 is the clock of most promotions: after the 11:00 tick.
var at1107 = h(11).Add(7 * time.Minute)

// holds reports whether the log, as st shows it, still meets exp: the
// condition an append of a decision made against an older view is checked
// against.
func holds(st *projections.State, exp events.Expect) bool {
	if exp.LastSeq != nil && *exp.LastSeq != st.Seq {
		return false
	}
	for s, seq := range exp.Subjects {
		if st.SubjectSeq[s] != seq {
			return false
		}
	}
	return true
}

// decideOnly decides cmd (fresh id, clock at) against the current state
// without folding it: a writer's view before another writer appends.
func (w *world) decideOnly(cmd commands.Command, at time.Time) Decision {
	w.tb.Helper()
	m := cmd.Header()
	m.ID, m.At = w.nextID(), at
	if err := cmd.Validate(); err != nil {
		w.tb.Fatalf("%s: %v", cmd.Kind(), err)
	}
	dec, err := Decide(w.st, cmd)
	if err != nil {
		w.tb.Fatalf("%s: %v", cmd.Kind(), err)
	}
	return dec
}
