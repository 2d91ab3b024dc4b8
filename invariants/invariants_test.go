package invariants

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/work"
	"pgregory.net/rapid"
)

// TestInvariants generates random deployment histories (1–4 models with
// mixed crons and units, lookback, forward-only and allow_partials models,
// whole kinds (full, view, seed: their work is one range from the start,
// docs/kinds.md; a worker dying half-way completes such a step whole or
// not at all), dependency chains; plans under every policy, backfills, scheduler ticks,
// some at a stale generation, a worker that is sometimes paused or dies
// half-way, manual completions and invalidations, promotions with catch-up
// and retries, rollbacks, duplicates, finalizations, and engine replicas
// deciding ticks and completions on a lagging view) and checks after every
// command and every step (the labels are those of the failure messages):
//
//  1. an accepted promotion never leaves production missing an interval
//     the demoted incumbent covered (from the candidate's start), outside a
//     trailing suffix the policy admitted; an admitted suffix is one range
//     ending at the incumbent's frontier, produced by at most the bound's
//     advances, after the captured frontier, with no downstream candidate
//     holding rows over it; each has exactly one open repair debt and
//     repair work covering it; a candidate without gap has neither; a
//     strict retry accepts only with its catch-up work computed.
//  2. a forward-only candidate writes its incumbent's table (with no
//     incumbent: its own); the table a candidate's completions write is the
//     one its plan checks; plan work (backfill, catch-up completions and
//     catch-up invalidations) of a plan not promoted yet never writes a
//     table an incumbent of its env serves.
//  3. every scheduled range (advances, their repairs, backfill sets,
//     catch-up work and recompute, repair work, every work item, `backfill
//     through`) is aligned to its snapshot's unit (allow_partials: start
//     aligned) and starts at or after the snapshot's start; the backfill set
//     is the candidate's missing whole intervals up to the captured
//     frontier; the engine accepts every completion of work it issued.
//  4. every version name is valid (events.ValidVersion) with at most one
//     '+'; a derived version is DerivedVersion(incumbent, plan); a user
//     version containing '+' is refused.
//  5. decisions carry only the codes their outcome allows, reject exactly
//     when a code rejects, conflicting_plan alone with no missing ranges,
//     codes are the union of the candidates' codes, caught_up only after a
//     catch-up; they record the view, policy, clock and generation.
//  6. Decide is deterministic, its append condition names only subjects it
//     writes, events survive the codec, the fold accepts them,
//     replay.Fold(log) JSON-equals the live state and replay.Verify finds
//     no divergence; a duplicate promote returns the recorded answer.
//  7. the scheduler advances only the env's incumbents at the current
//     generation (a stale generation is fenced off, on a lagging replica
//     too), never schedules an interval that is not ready, fills every
//     missing ready interval, and lists open debt as repairs.
//  8. a tick schedules exactly the oracle's work (oracle_test.go: missing
//     ready intervals plus new lookback, whole intervals).
//  9. an open repair debt's table never covers the debt (it closes when
//     the table covers the gap, by any route).
//  10. a promote records exactly what the oracle (written from DESIGN.md)
//     decides: outcome, codes, per-model missing ranges, catch-up work.
//  11. a run of the scheduler over (clock, until], every tick of any
//     incumbent firing (the scenario step run_scheduler), schedules per
//     incumbent exactly: the intervals the ticks of that model in
//     (clock, until] newly make ready plus their lookback, and (when any
//     tick fires) what was missing of them or of its ready window at
//     clock; whole intervals of the unit. A tick at or before clock (the
//     deploy's instant) fires no lookback.
//
// and three more: P, a plan's candidates are the versions it sets, exactly,
// plus a derived version of every downstream incumbent it does not set;
// F, a promote is refused only while its catch-up work is outstanding, and
// a finalize is carried out exactly for an accepted plan at the generation
// its acceptance set; R, a rollback is carried out exactly when the
// target is an earlier generation (the one before by default) that held
// every model served now, differs from now and needs no retired table,
// and then the env serves exactly that generation's incumbents (as the
// sim recorded them) at the next generation; and R', a restatement cascades as its rules
// say (restate_test.go).
//
// TestStaleViewsAreFenced replays decisions made on stale views (all
// fenced); TestEachInvariantCanFail shows each check can fail. A
// plain run plays 1000 histories (main_test.go); run longer with
// -rapid.checks=N, reproduce with -rapid.seed or -rapid.failfile.
func TestInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newSim(rt, drawModels(rt))
		s.setup()
		s.checkGlobal()
		steps := 1 + pick(rt, "steps", 50)
		for s.steps = 1; s.steps <= steps; s.steps++ {
			s.step()
			s.work(fmt.Sprintf("worker-%d", s.steps))
			s.checkGlobal()
		}
	})
	keys := slices.Sorted(maps.Keys(stats))
	for _, k := range keys {
		t.Logf("%-28s %d", k, stats[k])
	}
}

func unitOf(d schedDef) interval.Unit {
	return interval.MustSchedule(d.Cron, d.Unit, d.Partials).Unit()
}

// startFor is t0 plus h hours, floored to the schedule's unit.
func startFor(d schedDef, h int) time.Time {
	return unitOf(d).Floor(t0.Add(time.Duration(h) * time.Hour))
}

func drawModels(t *rapid.T) []modelDef {
	n := 1 + pick(t, "models", 4)
	var out []modelDef
	for i := 0; i < n; i++ {
		sd := schedDefs[pick(t, fmt.Sprintf("m%d-schedule", i), len(schedDefs))]
		def := modelDef{Name: fmt.Sprintf("m%d", i), Sched: sd, Kind: events.Incremental, Deps: []string{}}
		def.Start = startFor(sd, []int{0, 0, 0, 3, 13, 30}[pick(t, fmt.Sprintf("m%d-start", i), 6)])
		def.Lookback = pick(t, fmt.Sprintf("m%d-lookback", i), 4)
		if chance(t, fmt.Sprintf("m%d-kind", i), 25) {
			def.Kind = events.ForwardOnly
		} else if chance(t, fmt.Sprintf("m%d-whole", i), 20) {
			def.Kind = wholeKinds[pick(t, fmt.Sprintf("m%d-whole-kind", i), len(wholeKinds))]
			def.Lookback = 0 // computed whole: nothing to look back over
		}
		for j := 0; j < i; j++ {
			if chance(t, fmt.Sprintf("m%d-dep-m%d", i, j), 50) {
				def.Deps = append(def.Deps, fmt.Sprintf("m%d", j))
			}
		}
		out = append(out, def)
	}
	return out
}

// setup registers v1 of every model and deploys it to prod.
func (s *sim) setup() {
	versions := map[string]string{}
	for _, def := range s.models {
		v, err := s.newVersion(def)
		if err != nil {
			s.tb.Fatalf("registering %s: %v", def.Name, err)
		}
		versions[def.Name] = v
	}
	s.deploy("prod", versions)
	if len(s.st.Env("prod").Incumbents) != len(s.models) {
		s.tb.Fatalf("the initial deploy did not promote every model: %v", s.st.Env("prod").Incumbents)
	}
}

type action struct {
	name   string
	weight int
	run    func(s *sim)
}

var actions = []action{
	{"tick", 30, (*sim).actTick},
	{"tick-model", 5, (*sim).actTickModel},
	{"run-scheduler", 8, (*sim).actRunScheduler},
	{"wait", 4, (*sim).actWait},
	{"plan", 12, (*sim).actPlan},
	{"promote", 14, (*sim).actPromote},
	{"backfill-through", 4, (*sim).actBackfillThrough},
	{"complete", 5, (*sim).actComplete},
	{"invalidate", 4, (*sim).actInvalidate},
	{"finalize", 3, (*sim).actFinalize},
	{"deploy", 3, (*sim).actDeploy},
	{"duplicate-promote", 2, (*sim).actDuplicatePromote},
	{"stale-tick", 2, (*sim).actStaleTick},
	{"race", 16, (*sim).actRace},
	{"rollback-race", 4, (*sim).actRollbackRace},
	{"replica-tick", 4, (*sim).actReplicaTick},
	{"rollback", 4, (*sim).actRollback},
	{"restate", 4, (*sim).actRestate},
}

// actRollback rolls an env back: to the generation before (most often),
// or to a drawn one (any, valid or not).
func (s *sim) actRollback() {
	env := s.drawEnv("rollback-env", true)
	var to uint64
	if chance(s.t, "rollback-to", 40) {
		to = uint64(pick(s.t, "rollback-gen", int(s.st.Env(env).Generation)+2))
	}
	r, _, err := s.exec(&commands.Rollback{Env: env, ToGeneration: to})
	s.logf("rollback %s to %d: %s", env, to, errOr(err, fmt.Sprintf("generation %d", s.st.Env(env).Generation)))
	_ = r
}

func (s *sim) step() {
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	x := pick(s.t, fmt.Sprintf("step-%d", s.steps), total)
	for _, a := range actions {
		if x < a.weight {
			s.logf("--- step %d: %s", s.steps, a.name)
			a.run(s)
			return
		}
		x -= a.weight
	}
}

// drawEnv picks an env; with any, qa may be picked although it has no
// incumbents yet.
func (s *sim) drawEnv(label string, any bool) string {
	envs := []string{"prod"}
	if any || len(s.st.Env("qa").Incumbents) > 0 {
		envs = append(envs, "qa")
	}
	if len(envs) > 1 && chance(s.t, label, 15) {
		return "qa"
	}
	return "prod"
}

func (s *sim) actTick() {
	k := []int{1, 1, 1, 1, 1, 1, 2, 3, 6}[pick(s.t, "tick-skip", 9)]
	s.tick(s.drawEnv("tick-env", false), k, false)
}

// actRunScheduler is the scenario step run_scheduler: every tick of any
// incumbent in (clock, until] fires, the worker computing each tick's
// work before the next one (or, paused, none of it).
func (s *sim) actRunScheduler() {
	until := s.clock.Add(time.Duration(1+pick(s.t, "run-minutes", 8*60)) * time.Minute)
	s.runScheduler(s.drawEnv("run-env", false), until, chance(s.t, "run-paused", 20))
}

func (s *sim) actStaleTick() { s.tick(s.drawEnv("tick-env", false), 1, true) }

// actTickModel moves to the next tick of one incumbent (the scheduler was
// down for the other models' ticks before it).
func (s *sim) actTickModel() {
	env := s.drawEnv("tick-env", false)
	inc := s.st.Env(env).Incumbents
	ms := slices.Sorted(maps.Keys(inc))
	if len(ms) == 0 {
		return
	}
	m := ms[pick(s.t, "tick-model", len(ms))]
	next := s.st.Snapshots[inc[m]].Schedule.Next(s.clock)
	s.tickAt(env, next, false)
}

func (s *sim) actWait() {
	d := time.Duration(1+pick(s.t, "wait-minutes", 180)) * time.Minute
	if chance(s.t, "wait-long", 10) {
		d = time.Duration(1+pick(s.t, "wait-hours", 60)) * time.Hour
	}
	s.clock = s.clock.Add(d)
	s.logf("clock moves on without ticks")
}

var policies = [][2]int{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {0, 2}, {1, 1}, {2, 2}, {1, 2}, {2, 1}}

// drawVersion picks the version a plan sets for a model: a new version
// (same definition, or a changed kind, schedule, lookback, start or
// dependencies), one already registered (older, derived, another env's),
// v1 (a rollback), or the incumbent.
func (s *sim) drawVersion(env string, def modelDef) (string, bool) {
	label := "version-" + def.Name
	switch pick(s.t, label, 6) {
	case 0:
		if chance(s.t, label+"-kind", 25) {
			switch {
			case def.Kind == events.ForwardOnly || def.Kind.Whole():
				def.Kind = events.Incremental
			case chance(s.t, label+"-kind-whole", 30):
				def.Kind = wholeKinds[pick(s.t, label+"-whole-kind", len(wholeKinds))]
			default:
				def.Kind = events.ForwardOnly
			}
		}
		if chance(s.t, label+"-resched", 25) {
			def.Sched = schedDefs[pick(s.t, label+"-schedule", len(schedDefs))]
			def.Start = unitOf(def.Sched).Floor(def.Start)
		}
		if chance(s.t, label+"-relookback", 25) {
			def.Lookback = pick(s.t, label+"-lookback", 4)
		}
		if def.Kind.Whole() {
			def.Lookback = 0
		}
		if chance(s.t, label+"-restart", 20) {
			def.Start = startFor(def.Sched, pick(s.t, label+"-start", 51))
		}
		if chance(s.t, label+"-redeps", 15) {
			def.Deps = []string{}
			for _, up := range s.models {
				if up.Name >= def.Name {
					break
				}
				if chance(s.t, label+"-dep-"+up.Name, 50) {
					def.Deps = append(def.Deps, up.Name)
				}
			}
		}
		v, err := s.newVersion(def)
		return v, err == nil
	case 1:
		v, err := s.newVersion(def)
		return v, err == nil
	case 2, 3:
		var ids []string
		for id, sn := range s.st.Snapshots {
			if sn.Model == def.Name {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		if len(ids) == 0 {
			return "", false
		}
		_, v, _ := events.ParseSnapshotID(ids[pick(s.t, label+"-existing", len(ids))])
		return v, true
	case 4:
		// A rollback to the first version.
		if _, ok := s.st.Snapshots[events.SnapshotID(def.Name, "v1")]; ok {
			return "v1", true
		}
		return "", false
	default:
		if id := s.st.Env(env).Incumbents[def.Name]; id != "" {
			_, v, _ := events.ParseSnapshotID(id)
			return v, true
		}
		v, err := s.newVersion(def)
		return v, err == nil
	}
}

func (s *sim) drawVersions(env string) map[string]string {
	versions := map[string]string{}
	for _, def := range s.models {
		if !chance(s.t, "set-"+def.Name, 40) {
			continue
		}
		if v, ok := s.drawVersion(env, def); ok {
			versions[def.Name] = v
		}
	}
	if len(versions) == 0 {
		def := s.models[pick(s.t, "set-one", len(s.models))]
		if v, ok := s.drawVersion(env, def); ok {
			versions[def.Name] = v
		}
	}
	return versions
}

func (s *sim) actPlan() {
	env := s.drawEnv("plan-env", true)
	versions := s.drawVersions(env)
	if len(versions) == 0 {
		return
	}
	pol := policies[pick(s.t, "policy", len(policies))]
	s.planN++
	id := fmt.Sprintf("p%d", s.planN)
	if chance(s.t, "long-plan-id", 5) {
		id += strings.Repeat("x", 100+pick(s.t, "plan-id-length", 27)-len(id))
	}
	_, _ = s.buildPlan(id, env, versions, pol[0], pol[1])
}

func (s *sim) drawPlan(label string) (string, bool) {
	if len(s.plans) == 0 {
		return "", false
	}
	if !chance(s.t, label+"-older", 40) {
		return s.plans[len(s.plans)-1], true
	}
	return s.plans[pick(s.t, label, len(s.plans))], true
}

// actPromote promotes a plan; under catch-up the worker acts on the
// catch-up work, the scheduler may advance meanwhile, and the plan is
// promoted again for the strict retry.
func (s *sim) actPromote() {
	if id, ok := s.drawPlan("promote-plan"); ok {
		s.promoteFlow(id)
	}
}

func (s *sim) promoteFlow(id string) {
	d, req, err := s.promote(id)
	if err == nil && req != nil {
		s.work("catch-up-worker")
		if chance(s.t, "advance-during-catch-up", 35) {
			s.tick(s.st.Plans[id].Built.Env, 1+pick(s.t, "catch-up-ticks", 2), false)
			s.work("catch-up-tick-worker")
		}
		if !chance(s.t, "no-retry", 20) {
			d, _, _ = s.promote(id)
		}
	}
	if d != nil && d.Outcome == events.Accepted && chance(s.t, "finalize-after", 50) {
		_ = s.finalize(id)
	}
}

// actRace is the race tidemark exists for: a plan under a drawn policy is
// built and backfilled while the scheduler keeps advancing the incumbents,
// then promoted (with catch-up and retry under bounded catch-up).
func (s *sim) actRace() {
	env := s.drawEnv("race-env", false)
	if len(s.st.Env(env).Incumbents) == 0 {
		return
	}
	s.race(env, s.drawVersions(env))
}

// actRollbackRace races a plan that changes a model and rolls a model
// downstream of it back to v1.
func (s *sim) actRollbackRace() {
	var children []modelDef
	for _, def := range s.models {
		if len(def.Deps) > 0 {
			children = append(children, def)
		}
	}
	if len(children) == 0 {
		return
	}
	child := children[pick(s.t, "rollback-child", len(children))]
	up := child.Deps[pick(s.t, "rollback-parent", len(child.Deps))]
	if chance(s.t, "rollback-forward-only-first", 50) {
		// A forward-only change of the child first, promoted.
		fo := child
		fo.Kind = events.ForwardOnly
		if v, err := s.newVersion(fo); err == nil {
			s.planN++
			id := fmt.Sprintf("p%d", s.planN)
			if _, err := s.buildPlan(id, "prod", map[string]string{child.Name: v}, 0, 0); err == nil {
				s.promoteFlow(id)
			}
		}
	}
	for _, def := range s.models {
		if def.Name == up {
			if v, err := s.newVersion(def); err == nil {
				s.race("prod", map[string]string{up: v, child.Name: "v1"})
			}
		}
	}
}

func (s *sim) race(env string, versions map[string]string) {
	if len(versions) == 0 {
		return
	}
	pol := policies[pick(s.t, "race-policy", len(policies))]
	s.planN++
	id := fmt.Sprintf("p%d", s.planN)
	if pl, err := s.buildPlan(id, env, versions, pol[0], pol[1]); err != nil || pl == nil {
		return
	}
	s.work("race-backfill-worker")
	// The scheduler advances the incumbents meanwhile: usually once or
	// twice, at the next tick of a model the plan sets.
	set := slices.Sorted(maps.Keys(versions))
	for i, n := 0, []int{1, 1, 1, 2, 2, 0, 3}[pick(s.t, "race-ticks", 7)]; i < n; i++ {
		m := set[pick(s.t, "race-tick-model", len(set))]
		if sn := s.st.Snapshots[s.st.Env(env).Incumbents[m]]; sn != nil && !chance(s.t, "race-tick-any", 30) {
			s.tickAt(env, sn.Schedule.Next(s.clock), false)
		} else {
			s.tick(env, 1, false)
		}
		s.work(fmt.Sprintf("race-tick-worker-%d", i))
	}
	if chance(s.t, "race-wait", 30) {
		s.actWait()
	}
	s.promoteFlow(id)
}

func (s *sim) actDuplicatePromote() {
	if len(s.promotes) == 0 {
		return
	}
	call := s.promotes[pick(s.t, "duplicate-of", len(s.promotes))]
	r, group, err := s.exec(&commands.Promote{Meta: commands.Meta{ID: call.ID}, Plan: call.Plan})
	s.logf("promote %s again with command id %s -> duplicate %t", call.Plan, call.ID, r.Duplicate)
	if err != nil || len(group) > 0 || !r.Duplicate {
		s.fail("6", "promote %s sent again with id %s: err %v, %d events, duplicate %t", call.Plan, call.ID, err, len(group), r.Duplicate)
	}
	if call.Decision != nil && jsonOf(r.Decision) != jsonOf(call.Decision) {
		s.fail("6", "promote %s sent again with id %s answers decision\n %s\nrecorded\n %s", call.Plan, call.ID, jsonOf(r.Decision), jsonOf(call.Decision))
	}
	if call.CatchUp != nil && r.CatchUp != nil && jsonOf(r.CatchUp) != jsonOf(call.CatchUp) {
		s.fail("6", "promote %s sent again with id %s answers another catch-up request", call.Plan, call.ID)
	}
}

// actBackfillThrough is the scenario step `backfill {plan, through}`: the
// plan's backfill set up to a time (floored to each candidate's unit).
func (s *sim) actBackfillThrough() {
	s.tb.Helper()
	id, ok := s.drawPlan("backfill-plan")
	if !ok {
		return
	}
	pl := s.st.Plans[id].Built
	through := time.Time{}
	if span := pl.End.Sub(pl.Start); span > 0 && !chance(s.t, "backfill-full", 25) {
		through = pl.Start.Add(time.Duration(pick(s.t, "backfill-through", int(span/time.Minute)+1)) * time.Minute)
	}
	s.backfillThrough(id, through)
}

// backfillThrough runs work.BackfillThrough(state, plan, through), as
// the scenario step `backfill` does.
func (s *sim) backfillThrough(id string, through time.Time) {
	s.tb.Helper()
	item := work.BackfillThrough(s.st, s.st.Plans[id].Built, through)
	s.logf("backfill %s through %s", id, ts(through))
	s.checkWorkItem(item)
	s.runItem(item, -1)
}

// drawRanges picks aligned ranges of a snapshot from its start; ended
// ones only when ended is set.
func (s *sim) drawRanges(label string, ended bool) (string, interval.Set, bool) {
	ids := slices.Sorted(maps.Keys(s.st.Snapshots))
	id := ids[pick(s.t, label+"-snapshot", len(ids))]
	sn := s.st.Snapshots[id]
	u := sn.Schedule.Unit()
	start := u.Floor(sn.Start)
	limit := u.Floor(s.clock)
	if !ended {
		limit = u.Add(limit, 3)
	}
	n := 0
	for t := start; !u.Add(t, 1).After(limit) && n < 2000; t = u.Add(t, 1) {
		n++
	}
	if n == 0 {
		return "", nil, false
	}
	// Prefer the recent end of history: that is where gaps matter.
	back := pick(s.t, label+"-back", min(n, 61))
	length := 1 + pick(s.t, label+"-length", min(back+1, 6))
	first := u.Add(start, n-1-back)
	return id, interval.NewSet(interval.R(first, u.Add(first, length))), true
}

func (s *sim) actComplete() {
	if id, rs, ok := s.drawRanges("complete", true); ok {
		_ = s.complete(id, rs)
	}
}

func (s *sim) actInvalidate() {
	if id, rs, ok := s.drawRanges("invalidate", false); ok {
		_ = s.invalidate(id, rs)
	}
}

func (s *sim) actFinalize() {
	if id, ok := s.drawPlan("finalize-plan"); ok {
		_ = s.finalize(id)
	}
}

func (s *sim) actDeploy() {
	env := s.drawEnv("deploy-env", true)
	if versions := s.drawVersions(env); len(versions) > 0 {
		s.deploy(env, versions)
	}
}

// pick draws 0..n-1 about uniformly (rapid's integer generators favour
// small values, which would starve the later actions); it shrinks to 0.
func pick(t *rapid.T, label string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(rapid.Uint32().Draw(t, label) % uint32(n))
}

// chance is true with about pct percent; it shrinks to false.
func chance(t *rapid.T, label string, pct int) bool { return pick(t, label, 100) >= 100-pct }

// staleView is a replica's projection: the state k events ago.
func (s *sim) staleView(label string) (*projections.State, int) {
	k := 1 + pick(s.t, label, 8)
	if k >= len(s.log) {
		return nil, 0
	}
	return replay.Fold(s.log[:len(s.log)-k]), k
}

// actReplicaTick runs the next tick on a scheduler replica whose
// projection lags k events behind (it reads the generation there too);
// its append must be refused if it could schedule what a promotion since
// demoted. A refused tick is decided again on the current state.
func (s *sim) actReplicaTick() {
	view, k := s.staleView("replica-lag")
	if view == nil {
		return
	}
	env := "prod"
	t := scheduler.NextTick(s.st, []string{env}, s.clock)
	if t.IsZero() {
		return
	}
	s.clock = t
	gen := view.Env(env).Generation
	if gen == 0 {
		return
	}
	cmd := &commands.AdvanceScheduler{Meta: commands.Meta{ID: scheduler.TickID(env, t), Actor: "scheduler"}, Env: env, Generation: gen}
	_, group, err := s.execOn(view, cmd)
	s.logf("tick %s on a replica %d events behind (generation %d) -> %s, %d events", env, k, gen, errOr(err, "appended"), len(group))
	if err != nil {
		s.tickAt(env, t, false)
	}
}
