package invariants

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/work"
	"pgregory.net/rapid"
)

// t0 is the day the models start; the clock starts two days later, so
// daily models have history to backfill.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// schedDef is a cron with its unit (empty: derived) and partials setting.
type schedDef struct {
	Cron     string
	Unit     interval.Unit
	Partials bool
}

func (d schedDef) String() string {
	s := fmt.Sprintf("%q", d.Cron)
	if d.Unit != "" {
		s += " unit " + string(d.Unit)
	}
	if d.Partials {
		s += " allow_partials"
	}
	return s
}

// schedDefs are the schedules models are drawn from: mixed crons, derived
// and explicit units, and allow_partials with a unit coarser than the cron.
var schedDefs = []schedDef{
	{"@hourly", "", false},
	{"*/15 * * * *", "", false},
	{"0 */6 * * *", "hour", false},
	{"@daily", "hour", false},
	{"30 7 * * *", "hour", false},
	{"0 * * * *", "", false}, // @hourly written out: the same schedule
	{"@daily", "", false},
	{"30 * * * *", "", false},
	{"*/15 * * * *", "hour", true},
	{"@hourly", "day", true},
	{"0 */6 * * *", "", false},
	{"30 7 * * *", "day", true},
	{"@weekly", "day", false},
	{"0 0 * * 1-5", "hour", false},
	{"45 */2 * * *", "half_hour", false},
}

// modelDef is a model's definition (the base of its user versions).
type modelDef struct {
	Name     string
	Sched    schedDef
	Start    time.Time
	Lookback int
	Kind     events.Kind
	Deps     []string
}

// promoteCall is a promote command sent, kept to send it again (a
// duplicate must get the recorded answer).
type promoteCall struct {
	ID       string
	Plan     string
	Decision *events.PromotionDecided
	CatchUp  *events.CatchUpRequested
}

// preState is what a command's checks need from the state it was decided
// against (applying its events changes it).
type preState struct {
	inc map[string]map[string]string // env -> model -> snapshot
	gen map[string]uint64
	seq uint64
	// work is what a tick must schedule per model (the oracle's).
	work map[string]interval.Set
}

// sim is one history: the state the core decides against, the log of
// what it appended, the simulated clock, and the worker's queue.
type sim struct {
	t        *rapid.T // draws (nil in scripted tests)
	tb       tb       // reports
	st       *projections.State
	log      []events.Record
	ids      *events.IDSource
	clock    time.Time
	cmds     int
	models   []modelDef
	nextVer  map[string]int
	defs     map[string]modelDef // snapshot id -> definition of user versions
	plans    []string
	planN    int
	queue    []work.Item
	promotes []promoteCall
	steps    int
	// gens records every env's incumbents at each generation, as the
	// commands that moved it left them: the rollback oracle's history.
	gens map[string]map[uint64]map[string]string
	// mutate, when set, tampers with a decision before it is appended (to
	// show that each invariant can fail).
	mutate func(cmd commands.Command, d *decide.Decision)
}

// tb is what the checks report to: a *rapid.T, or a recorder in the tests
// that show each invariant can fail.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

func newSim(t *rapid.T, models []modelDef) *sim {
	return &sim{t: t, tb: t, st: projections.New(), ids: events.NewIDSource(), clock: t0.Add(54 * time.Hour),
		models: models, nextVer: map[string]int{}, defs: map[string]modelDef{}, gens: map[string]map[uint64]map[string]string{}}
}

func (s *sim) logf(format string, args ...any) {
	s.tb.Logf("[%s] "+format, append([]any{s.clock.Format("01-02T15:04")}, args...)...)
}

// fail reports a broken invariant.
func (s *sim) fail(inv string, format string, args ...any) {
	s.tb.Helper()
	s.tb.Fatalf("INVARIANT %s broken at %s (seq %d): %s", inv, s.clock.Format(time.RFC3339), s.st.Seq, fmt.Sprintf(format, args...))
}

func (s *sim) capture() preState {
	p := preState{inc: map[string]map[string]string{}, gen: map[string]uint64{}, seq: s.st.Seq}
	for name, e := range s.st.Envs {
		p.inc[name] = maps.Clone(e.Incumbents)
		p.gen[name] = e.Generation
	}
	return p
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// exec decides cmd at the simulated clock, appends its events to the log
// (through the msgpack codec, as the stream stores them), folds them, runs
// the per-command checks and queues the work work.Of derives.
func (s *sim) exec(cmd commands.Command) (commands.Reply, []events.Record, error) {
	s.tb.Helper()
	return s.execOn(nil, cmd)
}

// errStale is the refusal of a command decided on a stale view whose
// append condition no longer holds (the engine re-decides it).
var errStale = commands.Errorf(commands.CodeConflict, "", "append condition failed: the view was stale")

// expectHolds reports whether the log still is as e requires.
func (s *sim) expectHolds(e events.Expect) bool {
	if e.LastSeq != nil && *e.LastSeq != s.st.Seq {
		return false
	}
	for subj, seq := range e.Subjects {
		if s.st.SubjectSeq[subj] != seq {
			return false
		}
	}
	return true
}

// execOn decides cmd on view (a replica's projection, older than the
// log; nil: the current state) and appends its events only if their
// append condition holds against the current log, as the engine's
// conditional append does.
func (s *sim) execOn(view *projections.State, cmd commands.Command) (commands.Reply, []events.Record, error) {
	s.tb.Helper()
	dst := s.st
	if view != nil {
		dst = view
	}
	m := cmd.Header()
	if m.ID == "" {
		s.cmds++
		m.ID = fmt.Sprintf("cmd-%d", s.cmds)
	}
	if m.Actor == "" {
		m.Actor = "rapid"
	}
	m.At = s.clock
	if err := cmd.Validate(); err != nil {
		return commands.Reply{}, nil, err
	}
	d, err := decide.Decide(dst, cmd)
	if err != nil && view != nil {
		return commands.Reply{}, nil, err
	}
	if err != nil {
		msg := err.Error()
		if i := strings.IndexAny(msg, "\"0123456789"); i > 0 {
			msg = msg[:i]
		}
		stats["refused "+cmd.Kind()+": "+msg]++
		s.checkRefusal(cmd, err)
		var ce *commands.Error
		if !errors.As(err, &ce) {
			s.fail("core", "%s: Decide returned an untyped error %v", cmd.Kind(), err)
		}
		return commands.Reply{}, nil, err
	}
	// The core is a pure function of its arguments.
	if again, err2 := decide.Decide(dst, cmd); err2 != nil || jsonOf(again.Events) != jsonOf(d.Events) {
		s.fail("6", "%s decided twice on the same state gives different events", cmd.Kind())
	}
	// Every subject the condition names is one the append writes.
	written := map[string]bool{}
	for _, p := range d.Events {
		written[p.Subject()] = true
	}
	for subj := range d.Expect.Subjects {
		if len(d.Events) > 0 && !written[subj] {
			s.fail("6", "%s: the append condition names subject %s, which it does not write", cmd.Kind(), subj)
		}
	}
	if len(d.Events) > 0 && d.Expect.LastSeq == nil && len(d.Expect.Subjects) == 0 {
		s.fail("6", "%s appends under no condition", cmd.Kind())
	}
	if view != nil {
		if !s.expectHolds(d.Expect) {
			stats["stale view: append refused"]++
			return commands.Reply{}, nil, errStale
		}
		stats["stale view: appended "+cmd.Kind()]++
	}
	if s.mutate != nil {
		s.mutate(cmd, &d)
	}
	pre := s.capture()
	if len(d.Events) > 0 {
		s.checkCarriedOut(cmd)
	}
	var want oracleOutcome
	promote, isPromote := cmd.(*commands.Promote)
	if isPromote && view == nil {
		want, isPromote = s.expectPromote(promote)
	} else {
		isPromote = false
	}
	if c, ok := cmd.(*commands.AdvanceScheduler); ok && view == nil {
		pre.work = expectedWork(s.st, c.Env, c.At)
	}
	var rbWant map[string]string
	rollback, isRollback := cmd.(*commands.Rollback)
	if isRollback && len(d.Events) > 0 {
		var refusal string
		if rbWant, refusal = s.expectRollback(rollback); refusal != "" {
			s.fail("R", "rollback of %s to %d carried out; the oracle refuses it: %s", rollback.Env, rollback.ToGeneration, refusal)
		}
	}
	var group []events.Record
	for _, p := range d.Events {
		ev := events.New(s.ids, m.At, p)
		ev.Causation, ev.Actor, ev.Correlation = m.ID, m.Actor, m.Correlation
		b, err := events.Encode(ev)
		if err != nil {
			s.fail("6", "encoding %s: %v", ev.Type, err)
		}
		dec, err := events.Decode(b)
		if err != nil {
			s.fail("6", "decoding %s: %v", ev.Type, err)
		}
		if jsonOf(dec.Payload) != jsonOf(p) {
			s.fail("6", "%s does not survive the codec:\n decided %s\n stored  %s", ev.Type, jsonOf(p), jsonOf(dec.Payload))
		}
		seq := uint64(len(s.log)) + 1
		rec := events.Record{Seq: seq, Subject: p.Subject(), Event: dec}
		if err := projections.Apply(s.st, seq, dec); err != nil {
			s.fail("6", "the fold refuses an event the core decided: %v", err)
		}
		s.log = append(s.log, rec)
		group = append(group, rec)
	}
	d.Reply.Accepted = true
	if len(group) > 0 {
		d.Reply.Seq, d.Reply.Events = group[len(group)-1].Seq, len(group)
	}
	s.count(cmd, group)
	s.checkCommand(cmd, pre, group)
	if isRollback && len(group) > 0 {
		e := s.st.Env(rollback.Env)
		if !maps.Equal(e.Incumbents, rbWant) || e.Generation != pre.gen[rollback.Env]+1 {
			s.fail("R", "rollback of %s to %d: incumbents %v at generation %d, want %v at %d", rollback.Env, rollback.ToGeneration, e.Incumbents, e.Generation, rbWant, pre.gen[rollback.Env]+1)
		}
	}
	for name, e := range s.st.Envs {
		if e.Generation != pre.gen[name] {
			if s.gens[name] == nil {
				s.gens[name] = map[uint64]map[string]string{}
			}
			s.gens[name][e.Generation] = maps.Clone(e.Incumbents)
		}
	}
	if isPromote {
		s.checkPromote(promote, want, d.Events)
	}
	items := work.Of(group)
	for _, it := range items {
		s.checkWorkItem(it)
	}
	s.queue = append(s.queue, items...)
	return d.Reply, group, nil
}

// wholeSQL and wholeSeed are what a whole kind's registration needs (a
// query for full and view, CSV content for a seed); the simulated worker
// reads neither.
var (
	wholeSQL  = map[events.Kind]string{events.Full: "SELECT 1 AS n", events.View: "SELECT 1 AS n"}
	wholeSeed = map[events.Kind]string{events.Seed: "id\n1\n"}
	// wholeKinds are the kinds computed whole (docs/kinds.md).
	wholeKinds = []events.Kind{events.Full, events.View, events.Seed}
)

// register registers a user version of a model.
func (s *sim) register(def modelDef, version string) error {
	_, _, err := s.exec(&commands.RegisterSnapshot{
		Model: def.Name, Version: version, Cron: def.Sched.Cron, IntervalUnit: def.Sched.Unit, Start: def.Start,
		Lookback: def.Lookback, SnapshotKind: def.Kind, AllowPartials: def.Sched.Partials, DependsOn: def.Deps,
		SQL: wholeSQL[def.Kind], Seed: wholeSeed[def.Kind],
	})
	if err == nil && strings.Contains(version, "+") {
		s.fail("4", "the user version %s@%s, which contains '+', was registered", def.Name, version)
	}
	if err == nil {
		s.defs[events.SnapshotID(def.Name, version)] = def
		s.logf("register %s@%s: cron %s, start %s, lookback %d, kind %s, depends_on %v", def.Name, version, def.Sched,
			def.Start.Format(time.RFC3339), def.Lookback, def.Kind, def.Deps)
	}
	return err
}

func (s *sim) newVersion(def modelDef) (string, error) {
	s.nextVer[def.Name]++
	v := fmt.Sprintf("v%d", s.nextVer[def.Name])
	if s.t != nil && chance(s.t, "version-with-plus", 3) {
		// '+' is reserved for derived versions: refused.
		if err := s.register(def, v+"+x"); err == nil {
			return v + "+x", nil
		}
	}
	return v, s.register(def, v)
}

func (s *sim) buildPlan(id, env string, versions map[string]string, trailing, catchUp int) (*events.PlanBuilt, error) {
	if len(versions) == 0 {
		return nil, errors.New("a plan with no versions")
	}
	r, _, err := s.exec(&commands.BuildPlan{Plan: id, Env: env, Versions: versions,
		Bounds: commands.Bounds{MaxTrailingGapAdvances: trailing, MaxCatchUpAdvances: catchUp}})
	s.logf("plan %s env %s versions %v trailing %d catch_up %d -> %v", id, env, versions, trailing, catchUp, errOr(err, "built"))
	if err != nil {
		return nil, err
	}
	s.plans = append(s.plans, id)
	if r.Plan != nil {
		for _, c := range r.Plan.Candidates {
			s.logf("  candidate %s table %s incumbent %q frontier %s backfill %v", c.Snapshot, c.Table, c.Incumbent,
				ts(c.IncumbentFrontier), interval.Set(c.Backfill))
		}
	}
	return r.Plan, nil
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("01-02T15:04")
}

// promote sends a promote command with a new id.
func (s *sim) promote(plan string) (*events.PromotionDecided, *events.CatchUpRequested, error) {
	cmd := &commands.Promote{Plan: plan}
	r, _, err := s.exec(cmd)
	call := promoteCall{ID: cmd.ID, Plan: plan, Decision: r.Decision, CatchUp: r.CatchUp}
	switch {
	case err != nil:
		s.logf("promote %s -> %v", plan, err)
	case r.CatchUp != nil:
		var parts []string
		for _, w := range r.CatchUp.Work {
			if len(w.Ranges)+len(w.Recompute) > 0 {
				parts = append(parts, fmt.Sprintf("%s %v recompute %v", w.Model, interval.Set(w.Ranges), interval.Set(w.Recompute)))
			}
		}
		s.logf("promote %s -> catch-up requested: %s", plan, strings.Join(parts, "; "))
	case r.Decision != nil:
		s.logf("promote %s -> %s %v %s", plan, r.Decision.Outcome, r.Decision.Codes, missingOf(r.Decision))
	}
	if err == nil {
		s.promotes = append(s.promotes, call)
	}
	return r.Decision, r.CatchUp, err
}

func missingOf(d *events.PromotionDecided) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(d.Models)) {
		f := d.Models[m]
		if len(f.Missing) > 0 {
			parts = append(parts, fmt.Sprintf("%s missing %v (%d advances)", m, interval.Set(f.Missing), f.Advances))
		}
	}
	return strings.Join(parts, "; ")
}

// tick advances the clock to the k-th next cron tick of env's incumbents
// and runs the scheduler there with the env generation (stale: an older
// one first, which must be fenced off).
func (s *sim) tick(env string, k int, stale bool) bool {
	t := s.clock
	for i := 0; i < k; i++ {
		n := scheduler.NextTick(s.st, []string{env}, t)
		if n.IsZero() {
			break
		}
		t = n
	}
	if !t.After(s.clock) {
		return false
	}
	return s.tickAt(env, t, stale)
}

func (s *sim) tickAt(env string, t time.Time, stale bool) bool {
	s.clock = t
	gen := s.st.Env(env).Generation
	id := scheduler.TickID(env, t)
	if stale && gen > 1 {
		_, group, err := s.exec(&commands.AdvanceScheduler{Meta: commands.Meta{ID: id, Actor: "scheduler"}, Env: env, Generation: gen - 1})
		var ce *commands.Error
		if err == nil || !errors.As(err, &ce) || ce.Code != commands.CodeStaleGeneration || len(group) > 0 {
			s.fail("7", "a scheduler advance at stale generation %d (env %s is at %d) was not fenced off: err %v, %d events", gen-1, env, gen, err, len(group))
		}
		s.logf("tick %s at generation %d: fenced (%v)", env, gen-1, ce.Code)
	}
	r, _, err := s.exec(&commands.AdvanceScheduler{Meta: commands.Meta{ID: id, Actor: "scheduler"}, Env: env, Generation: gen})
	if err != nil {
		s.logf("tick %s -> %v", env, err)
		return true
	}
	var parts []string
	for _, a := range r.Advances {
		p := fmt.Sprintf("%s %v", a.Snapshot, interval.Set(a.Ranges))
		if len(a.Repairs) > 0 {
			p += fmt.Sprintf(" (repairs %v)", interval.Set(a.Repairs))
		}
		parts = append(parts, p)
	}
	s.logf("tick %s gen %d: %s", env, gen, strings.Join(parts, "; "))
	return true
}

// runScheduler fires every tick of any incumbent of env in (clock,
// until], as the scenario step run_scheduler does; the worker completes
// each tick's work before the next tick (paused: it drops it, and later
// ticks schedule it again). Work queued before the run stays queued. Then
// it checks invariant 11 on what the run scheduled, and returns it with
// the number of ticks fired.
func (s *sim) runScheduler(env string, until time.Time, paused bool) (map[string]interval.Set, int) {
	from := s.clock
	before := replay.Fold(s.log) // the state at from, for invariant 11
	held := s.queue
	s.queue = nil
	scheduled := map[string]interval.Set{}
	fired := 0
	for {
		next := scheduler.NextTick(s.st, []string{env}, s.clock)
		if next.IsZero() || next.After(until) {
			break
		}
		s.clock = next
		gen := s.st.Env(env).Generation
		_, group, err := s.exec(&commands.AdvanceScheduler{Meta: commands.Meta{ID: scheduler.TickID(env, next), Actor: "scheduler"}, Env: env, Generation: gen})
		if err != nil {
			s.logf("run tick %s -> %v", env, err)
			break
		}
		fired++
		for _, r := range group {
			if a, ok := r.Event.Payload.(events.SchedulerAdvanced); ok {
				scheduled[a.Model] = scheduled[a.Model].AddSet(a.Ranges)
			}
		}
		if paused {
			s.queue = nil
		} else {
			s.runQueue(workAll, "")
		}
	}
	s.queue = held
	s.clock = until
	s.logf("run scheduler %s until %s (%d ticks, paused %v): %v", env, ts(until), fired, paused, scheduled)
	s.checkRunWork(before, env, from, until, fired, scheduled)
	return scheduled, fired
}

// Worker modes.
const (
	workAll = iota
	workPartial
	workKeep
	workDrop
)

// work lets the simulated worker act on its queue: complete everything,
// complete part of it, leave it queued, or drop it (a paused worker; the
// scheduler picks skipped work up at a later tick).
func (s *sim) work(label string) {
	if len(s.queue) == 0 {
		return
	}
	s.runQueue([]int{workAll, workAll, workAll, workAll, workAll, workAll, workAll, workPartial, workPartial, workKeep, workKeep, workDrop, workDrop}[pick(s.t, label, 13)], label)
}

// runQueue acts on the queue in one of the worker modes.
func (s *sim) runQueue(mode int, label string) {
	switch mode {
	case workAll:
		q := s.queue
		s.queue = nil
		for _, it := range q {
			s.runItem(it, -1)
		}
	case workPartial:
		q := s.queue
		s.queue = nil
		n := pick(s.t, label+"-items", len(q))
		for _, it := range q[:n] {
			s.runItem(it, -1)
		}
		pieces := pick(s.t, label+"-pieces", 9)
		s.runItem(q[n], pieces)
		if chance(s.t, label+"-redeliver", 50) {
			s.queue = append(s.queue, q[n])
		}
		s.queue = append(s.queue, q[n+1:]...)
	case workKeep:
		s.logf("worker: %d item(s) stay queued", len(s.queue))
	case workDrop:
		s.logf("worker: paused, drops %d item(s)", len(s.queue))
		s.queue = nil
	}
}

// runItem completes a work item's steps in order; pieces >= 0 stops after
// that many unit intervals (a worker that died half-way).
func (s *sim) runItem(it work.Item, pieces int) {
	for _, st := range it.Steps {
		if pieces == 0 {
			return
		}
		sn, ok := s.st.Snapshots[st.Snapshot]
		if !ok {
			s.fail("3", "work item %s names unknown snapshot %s", it.ID, st.Snapshot)
		}
		ranges := interval.Set(st.Ranges)
		if pieces > 0 && sn.Kind.Whole() {
			pieces-- // one batch, one transaction: all of it or nothing
		} else if pieces > 0 {
			split := ranges.Split(sn.Schedule.Unit())
			if len(split) > pieces {
				split = split[:pieces]
			}
			pieces -= len(split)
			ranges = interval.NewSet(split...)
		}
		if ranges.Empty() {
			continue
		}
		s.checkCandidateWrite(it, sn)
		cmd := &commands.CompleteIntervals{Meta: commands.Meta{Actor: "worker", Correlation: st.RunID},
			Model: st.Model, Version: st.Version, Ranges: ranges, RunKind: it.RunKind, RunID: st.RunID}
		var err error
		done := false
		if s.t != nil && chance(s.t, "stale-completion", 10) {
			// Decided by an engine replica whose projection lags behind;
			// refused (say, its append condition failed), it is decided
			// again on the current state.
			if view, k := s.staleView("completion-lag"); view != nil {
				_, _, err = s.execOn(view, cmd)
				s.logf("worker %s: complete %s %v on a replica %d events behind -> %s", it.RunKind, st.Snapshot, ranges, k, errOr(err, "ok"))
				done = err == nil
			}
		}
		if !done {
			_, _, err = s.exec(cmd)
			s.logf("worker %s: complete %s %v -> %s", it.RunKind, st.Snapshot, ranges, errOr(err, "ok"))
		}
		if err != nil {
			s.fail("3", "the engine refuses work it issued (%s item %s, %s %v): %v", it.RunKind, it.ID, st.Snapshot, ranges, err)
		}
		if pieces == 0 {
			return
		}
	}
}

// complete records ranges by hand.
func (s *sim) complete(snapshot string, ranges interval.Set) error {
	m, v, _ := events.ParseSnapshotID(snapshot)
	_, _, err := s.exec(&commands.CompleteIntervals{Model: m, Version: v, Ranges: ranges, RunKind: events.RunManual})
	s.logf("complete %s %v by hand -> %s", snapshot, ranges, errOr(err, "ok"))
	return err
}

func (s *sim) invalidate(snapshot string, ranges interval.Set) error {
	m, v, _ := events.ParseSnapshotID(snapshot)
	_, _, err := s.exec(&commands.InvalidateIntervals{Model: m, Version: v, Ranges: ranges, Reason: "rapid"})
	s.logf("invalidate %s %v -> %s", snapshot, ranges, errOr(err, "ok"))
	return err
}

func (s *sim) finalize(plan string) error {
	_, _, err := s.exec(&commands.Finalize{Plan: plan})
	s.logf("finalize %s -> %s", plan, errOr(err, "ok"))
	return err
}

// deploy builds a strict plan, has the worker complete its backfill,
// promotes it and finalizes it (the scenario step `deploy`).
func (s *sim) deploy(env string, versions map[string]string) {
	s.planN++
	id := fmt.Sprintf("deploy%d", s.planN)
	pl, err := s.buildPlan(id, env, versions, 0, 0)
	if err != nil || pl == nil {
		return
	}
	s.runItem(work.Backfill(*pl), -1)
	d, _, err := s.promote(id)
	if err == nil && d != nil && d.Outcome == events.Accepted {
		_ = s.finalize(id)
	}
	// The backfill item work.Of queued for the plan is done.
	s.queue = slices.DeleteFunc(s.queue, func(it work.Item) bool { return it.Plan == id && it.RunKind == events.RunBackfill })
}

// stats counts what the histories exercised (printed with -v), to see
// that the generator reaches the interesting cases.
var stats = map[string]int{}

func (s *sim) count(cmd commands.Command, group []events.Record) {
	for _, r := range group {
		switch p := r.Event.Payload.(type) {
		case events.PromotionDecided:
			stats["decision "+string(p.Outcome)]++
			for _, c := range p.Codes {
				stats["code "+c]++
			}
			if p.CatchUpSeq > 0 {
				stats["decision after catch-up"]++
			}
			if len(p.Repairs) > 0 {
				stats["decision with repairs"]++
			}
			for _, f := range p.Models {
				if sn := s.st.Snapshots[f.Snapshot]; sn != nil && sn.Kind.Whole() {
					for _, c := range f.Codes {
						stats["whole-kind code "+c]++
					}
				}
			}
		case events.CatchUpRequested:
			stats["catch-up requested"]++
			for _, w := range p.Work {
				if len(w.Recompute) > 0 {
					stats["catch-up recompute"]++
				}
			}
		case events.RepairCompleted:
			stats["repair closed"]++
		case events.EnvironmentRolledBack:
			stats["rollback"]++
			if p.ToGeneration+1 < p.FromGeneration {
				stats["rollback past the previous generation"]++
			}
			if len(p.Repairs) > 0 {
				stats["rollback closing repairs"]++
			}
		case events.SchedulerAdvanced:
			stats["advance"]++
			if len(p.Repairs) > 0 {
				stats["advance with repairs"]++
			}
		case events.PlanBuilt:
			stats["plan"]++
			for _, c := range p.Candidates {
				if c.Derived {
					stats["derived candidate"]++
				}
				if inc := s.st.Snapshots[c.Incumbent]; inc != nil && c.Snapshot != c.Incumbent && inc.Table == c.Table {
					stats["candidate on its incumbent's table"]++
					if s.st.Snapshots[c.Snapshot].Kind != events.ForwardOnly {
						stats["incremental candidate on its incumbent's table"]++
						if len(c.Upstream) > 0 {
							stats["  ... with upstream"]++
						}
					}
				}
			}
		}
	}
}
