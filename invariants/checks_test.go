package invariants

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/work"
)

// far is an end for "from here on" windows.
var far = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// checkCommand runs the checks that concern one command's events, against
// the state before (pre) and after (s.st) they were folded.
func (s *sim) checkCommand(cmd commands.Command, pre preState, group []events.Record) {
	s.tb.Helper()
	for _, r := range group {
		switch p := r.Event.Payload.(type) {
		case events.SnapshotRegistered:
			s.checkVersionName(p.Snapshot, p.Version)
		case events.PlanBuilt:
			s.checkPlan(p, pre)
			if c, ok := cmd.(*commands.BuildPlan); ok {
				s.checkComposition(c, p, pre)
			}
		case events.CatchUpRequested:
			s.checkCatchUp(p, pre)
		case events.IntervalsInvalidated:
			if strings.HasPrefix(p.Reason, "catch_up:") {
				s.checkNotProduction("catch-up invalidation", strings.TrimPrefix(p.Reason, "catch_up:"), p.Snapshot, p.Table, pre)
			}
		case events.PromotionDecided:
			s.checkDecision(p, r.Seq, pre)
		}
	}
	if adv, ok := cmd.(*commands.AdvanceScheduler); ok {
		s.checkAdvances(adv, pre, group)
	}
	s.checkRepairsClose()
}

// aligned reports whether r is whole intervals of sn's unit (allow_partials:
// start aligned).
func aligned(sn *projections.Snapshot, r interval.Range) bool {
	u := sn.Schedule.Unit()
	return !r.Empty() && u.Aligned(r.Start) && (sn.AllowPartials || u.Aligned(r.End))
}

// checkAligned is invariant 3 for a set of ranges scheduled for snapshot.
func (s *sim) checkAligned(what, snapshot string, rs []interval.Range) {
	s.tb.Helper()
	sn, ok := s.st.Snapshots[snapshot]
	if !ok {
		s.fail("3", "%s names unknown snapshot %s", what, snapshot)
	}
	for _, r := range rs {
		if !aligned(sn, r) {
			s.fail("3", "%s: range %s of %s is not aligned to its unit %s (allow_partials %t)", what, r, snapshot, sn.Unit, sn.AllowPartials)
		}
		if r.Start.Before(sn.Schedule.Unit().Floor(sn.Start)) {
			s.fail("3", "%s: range %s of %s starts before the snapshot's start %s", what, r, snapshot, ts(sn.Start))
		}
	}
}

// checkVersionName is invariant 4 for one version.
func (s *sim) checkVersionName(snapshot, version string) {
	s.tb.Helper()
	if !events.ValidVersion(version) {
		s.fail("4", "%s: version %q is not a valid version name (len %d)", snapshot, version, len(version))
	}
	if strings.Count(version, "+") > 1 {
		s.fail("4", "%s: version %q contains more than one '+'", snapshot, version)
	}
}

// checkPlan: invariant 2 (forward-only tables), 3 (backfill sets aligned)
// and 4 (derived names) for a plan just built.
func (s *sim) checkPlan(p events.PlanBuilt, pre preState) {
	s.tb.Helper()
	for _, c := range p.Candidates {
		sn, ok := s.st.Snapshots[c.Snapshot]
		if !ok {
			s.fail("2", "plan %s: candidate %s is not registered", p.Plan, c.Snapshot)
		}
		if want := pre.inc[p.Env][c.Model]; c.Incumbent != want {
			s.fail("2", "plan %s: candidate %s captured incumbent %q, the env serves %q", p.Plan, c.Snapshot, c.Incumbent, want)
		}
		if sn.Table != c.Table {
			s.fail("2", "plan %s: candidate %s checks table %s but its completions write table %s", p.Plan, c.Snapshot, c.Table, sn.Table)
		}
		if sn.Kind == events.ForwardOnly {
			if c.Incumbent != "" {
				if inc := s.st.Snapshots[c.Incumbent]; c.Table != inc.Table {
					s.fail("2", "plan %s: forward-only %s writes table %s, not its incumbent %s's table %s", p.Plan, c.Snapshot, c.Table, c.Incumbent, inc.Table)
				}
			} else if c.Table != c.Snapshot {
				s.fail("2", "plan %s: forward-only %s has no incumbent in env %s, so it owns a new table; it writes %s", p.Plan, c.Snapshot, p.Env, c.Table)
			}
		}
		backfill := interval.NewSet(c.Backfill...)
		s.checkAligned("plan "+p.Plan+" backfill set", c.Snapshot, backfill)
		// The backfill set: the candidate's missing whole intervals from its
		// start to the captured frontier (floored to its unit unless
		// partials), or its readiness frontier at build without incumbent
		// coverage.
		start := sn.Schedule.Unit().Floor(sn.Start)
		end := sn.Schedule.ReadyFrontier(p.BuiltAt)
		if !c.IncumbentFrontier.IsZero() {
			end = c.IncumbentFrontier
			if !sn.AllowPartials {
				end = sn.Schedule.Unit().Floor(end)
			}
		}
		onIncumbent := c.Incumbent != "" && s.st.Snapshots[c.Incumbent].Table == c.Table
		var want interval.Set
		if !onIncumbent && start.Before(end) {
			want = wholeWork(s.st, sn, s.st.Table(c.Table).Missing(interval.R(start, end)))
		}
		if !backfill.Equal(want) {
			s.fail("3", "plan %s: backfill set of %s is %v, want %v (start %s, end %s)", p.Plan, c.Snapshot, backfill, want, ts(start), ts(end))
		}
		if c.Derived {
			inc := s.st.Snapshots[c.Incumbent]
			_, v, _ := events.ParseSnapshotID(c.Snapshot)
			if inc == nil || v != models.DerivedVersion(inc.Version, p.Plan) || strings.Count(v, "+") != 1 {
				s.fail("4", "plan %s: derived candidate %s (incumbent %s)", p.Plan, c.Snapshot, c.Incumbent)
			}
		}
	}
}

// checkAdvances: invariant 7 (only incumbents, at the current generation),
// 3 (aligned), and that the tick fills every missing ready interval and
// schedules nothing that is not ready.
func (s *sim) checkAdvances(cmd *commands.AdvanceScheduler, pre preState, group []events.Record) {
	s.tb.Helper()
	// A stale replica's advance that finds nothing to do appends nothing
	// (and so no condition guards it); one that appends must be at the
	// current generation.
	if cmd.Generation != pre.gen[cmd.Env] && len(group) > 0 {
		s.fail("7", "an advance at generation %d appended %d events; env %s is at %d", cmd.Generation, len(group), cmd.Env, pre.gen[cmd.Env])
	}
	scheduled := map[string]interval.Set{}
	for _, r := range group {
		a, ok := r.Event.Payload.(events.SchedulerAdvanced)
		if !ok {
			continue
		}
		if inc := pre.inc[cmd.Env][a.Model]; a.Snapshot != inc {
			s.fail("7", "the scheduler advanced %s for model %s in env %s, whose incumbent is %q", a.Snapshot, a.Model, cmd.Env, inc)
		}
		if a.Generation != pre.gen[cmd.Env] {
			s.fail("7", "advance of %s recorded generation %d, env is at %d", a.Snapshot, a.Generation, pre.gen[cmd.Env])
		}
		s.checkAligned("scheduler advance ranges", a.Snapshot, a.Ranges)
		s.checkAligned("scheduler advance repairs", a.Snapshot, a.Repairs)
		if !interval.NewSet(a.Repairs...).SubtractSet(a.Ranges).Empty() {
			s.fail("7", "advance of %s: repairs %v are not part of its ranges %v", a.Snapshot, interval.Set(a.Repairs), interval.Set(a.Ranges))
		}
		sn := s.st.Snapshots[a.Snapshot]
		// Open debt on the table within the work is listed as repairs.
		for _, r := range s.st.OpenRepairs() {
			if r.Env != cmd.Env || r.Table != sn.Table {
				continue
			}
			for _, g := range r.Ranges {
				if left := interval.Set(a.Ranges).Clip(g).SubtractSet(a.Repairs); !left.Empty() {
					s.fail("7", "advance of %s schedules %v of open repair debt %v without listing it as repairs %v", a.Snapshot, left, g, interval.Set(a.Repairs))
				}
			}
		}
		rf := sn.Schedule.ReadyFrontier(cmd.At)
		for _, rg := range a.Ranges {
			if rg.End.After(rf) {
				s.fail("7", "advance of %s at %s schedules %s, beyond the readiness frontier %s", a.Snapshot, ts(cmd.At), rg, ts(rf))
			}
		}
		scheduled[a.Model] = scheduled[a.Model].AddSet(a.Ranges)
	}
	if pre.work == nil {
		return // decided on a stale view: it may schedule more or less
	}
	// Exactly the oracle's work: missing ready intervals and new lookback.
	for model := range maps.Keys(pre.work) {
		if !scheduled[model].Equal(pre.work[model]) {
			s.fail("8", "the tick at %s schedules %v for %s; the oracle says %v", ts(cmd.At), scheduled[model], model, pre.work[model])
		}
	}
	for model := range maps.Keys(scheduled) {
		if _, ok := pre.work[model]; !ok {
			s.fail("8", "the tick at %s schedules %v for %s; the oracle says nothing", ts(cmd.At), scheduled[model], model)
		}
	}
	// Every missing ready interval of every incumbent is scheduled.
	for model, id := range pre.inc[cmd.Env] {
		sn := s.st.Snapshots[id]
		window := sn.Schedule.Ready(sn.Start, cmd.At)
		if window.Empty() {
			continue
		}
		if left := s.st.Table(sn.Table).Missing(window).SubtractSet(scheduled[model]); !left.Empty() {
			s.fail("7", "the tick at %s leaves %v of incumbent %s missing and unscheduled (ready window %s)", ts(cmd.At), left, id, window)
		}
	}
}

// checkRunWork is invariant 11: a run of the scheduler over (from, until]
// in which fired ticks fired (pre: the state at from) scheduled exactly,
// per incumbent, Work of: what its table missed at from of the ready
// window [start, RF(from)) (filled at the first tick, when one fires), of
// the intervals each of its own ticks T in (from, until] newly makes
// ready, [RF(T-), RF(T)) from its start, and the lookback of each such
// tick: the N whole intervals before the first newly ready one, from its
// start. It is written from DESIGN.md and SCENARIOS.md, independently of
// decide.Due: no recorded tick is consulted, only the ticks of the run.
func (s *sim) checkRunWork(pre *projections.State, env string, from, until time.Time, fired int, scheduled map[string]interval.Set) {
	s.tb.Helper()
	for model, id := range pre.Env(env).Incumbents {
		sn := pre.Snapshots[id]
		sched, u := sn.Schedule, sn.Schedule.Unit()
		start := u.Floor(sn.Start)
		table := pre.Table(sn.Table)
		var want interval.Set
		if fired > 0 {
			if w := sched.Ready(sn.Start, from); !w.Empty() {
				want = table.Missing(w)
			}
		}
		for t := sched.Next(from); !t.IsZero() && !t.After(until); t = sched.Next(t) {
			rf, prev := sched.ReadyFrontier(t), sched.ReadyFrontier(t.Add(-time.Nanosecond))
			if prev.IsZero() || !start.Before(rf) {
				continue
			}
			window := interval.R(start, rf)
			newly := interval.NewSet(interval.R(prev, rf)).Clip(window)
			if newly.Empty() {
				continue // the tick makes nothing new ready: no lookback
			}
			for _, r := range newly {
				want = want.AddSet(table.Missing(r))
			}
			if sn.Lookback > 0 && !sn.Kind.Whole() {
				first := u.Floor(newly.Start())
				want = want.AddSet(interval.NewSet(interval.R(u.Add(first, -sn.Lookback), first)).Clip(window))
			}
		}
		// A whole kind's work over the run: from its start to the latest
		// end any of its ticks' work reached (each tick's is whole).
		want = wholeWork(pre, sn, want)
		if got := scheduled[model]; !got.Equal(want) {
			s.fail("11", "the scheduler's run over (%s, %s] (%d ticks fired) scheduled %v for %s; its newly ready intervals, their lookback and what was missing make %v",
				ts(from), ts(until), fired, got, id, want)
		}
	}
	for model := range scheduled {
		if _, ok := pre.Env(env).Incumbents[model]; !ok {
			s.fail("11", "the scheduler's run over (%s, %s] scheduled %v for %s, no incumbent of %s", ts(from), ts(until), scheduled[model], model, env)
		}
	}
}

// checkCatchUp: invariant 3 for catch-up work and 2 for what it writes.
func (s *sim) checkCatchUp(p events.CatchUpRequested, pre preState) {
	s.tb.Helper()
	for _, w := range p.Work {
		s.checkAligned("catch-up of "+p.Plan, w.Snapshot, w.Ranges)
		s.checkAligned("catch-up recompute of "+p.Plan, w.Snapshot, w.Recompute)
		if len(w.Ranges)+len(w.Recompute) > 0 {
			s.checkNotProduction("catch-up work", p.Plan, w.Snapshot, w.Table, pre)
		}
	}
}

// checkNotProduction is invariant 2: snapshot, a candidate of plan not yet
// promoted, must not write a table an incumbent of the plan's env serves.
func (s *sim) checkNotProduction(what, plan, snapshot, table string, pre preState) {
	s.tb.Helper()
	pl, ok := s.st.Plans[plan]
	if !ok || pl.Accepted() {
		return // stale work of a plan promoted already
	}
	// Only the plan's env: a version's own table may serve another env
	// through a forward-only successor there, by design.
	env := pl.Built.Env
	for _, id := range pre.inc[env] {
		if id == snapshot {
			continue
		}
		if sn := s.st.Snapshots[id]; sn != nil && sn.Table == table {
			s.fail("2", "%s of plan %s: candidate %s writes table %s, which incumbent %s serves in env %s", what, plan, snapshot, table, id, env)
		}
	}
}

func modelOf(snapshot string) string { m, _, _ := events.ParseSnapshotID(snapshot); return m }

// checkCandidateWrite is invariant 2 at the moment the worker completes
// plan work (backfill, catch-up) of a snapshot not promoted yet.
func (s *sim) checkCandidateWrite(it work.Item, sn *projections.Snapshot) {
	s.tb.Helper()
	if it.RunKind != events.RunBackfill && it.RunKind != events.RunCatchUp {
		return
	}
	s.checkNotProduction(string(it.RunKind)+" work", it.Plan, sn.Snapshot, sn.Table, s.capture())
}

// checkWorkItem: invariant 3 for every work item, and 7 for scheduled and
// repair work (only the env's incumbents).
func (s *sim) checkWorkItem(it work.Item) {
	s.tb.Helper()
	for _, st := range it.Steps {
		s.checkAligned(fmt.Sprintf("%s work item %s", it.RunKind, it.ID), st.Snapshot, st.Ranges)
		if it.RunKind == events.RunScheduled || it.RunKind == events.RunRepair {
			if inc := s.st.Env(it.Env).Incumbents[modelOf(st.Snapshot)]; inc != st.Snapshot {
				s.fail("7", "%s work for %s in env %s, whose incumbent is %q", it.RunKind, st.Snapshot, it.Env, inc)
			}
		}
	}
}

// checkDecision: invariant 5 for every decision, 1 for acceptances.
func (s *sim) checkDecision(d events.PromotionDecided, seq uint64, pre preState) {
	s.tb.Helper()
	allowed := policy.RejectedCodes
	if d.Outcome == events.Accepted {
		allowed = policy.AcceptedCodes
	} else if d.Outcome != events.Rejected {
		s.fail("5", "plan %s: outcome %q", d.Plan, d.Outcome)
	}
	rejecting := false
	for _, c := range d.Codes {
		if !slices.Contains(allowed, c) {
			s.fail("5", "plan %s: a %s decision carries code %q (codes %v)", d.Plan, d.Outcome, c, d.Codes)
		}
		rejecting = rejecting || policy.Rejects(c)
	}
	if rejecting != (d.Outcome == events.Rejected) {
		s.fail("5", "plan %s: %s decision with codes %v", d.Plan, d.Outcome, d.Codes)
	}
	if slices.Contains(d.Codes, policy.CodeConflictingPlan) {
		if len(d.Codes) != 1 {
			s.fail("5", "plan %s: conflicting_plan with other codes %v", d.Plan, d.Codes)
		}
		for m, f := range d.Models {
			if len(f.Missing) > 0 {
				s.fail("5", "plan %s: conflicting_plan reports missing ranges for %s: %v", d.Plan, m, interval.Set(f.Missing))
			}
		}
	}
	if slices.Contains(d.Codes, policy.CodeCaughtUp) && d.CatchUpSeq == 0 {
		s.fail("5", "plan %s: caught_up without a catch-up", d.Plan)
	}
	union := map[string]bool{}
	for _, f := range d.Models {
		for _, c := range f.Codes {
			union[c] = true
		}
	}
	if got := slices.Sorted(maps.Keys(union)); !slices.Equal(got, sortedCopy(d.Codes)) {
		s.fail("5", "plan %s: codes %v are not the union of the candidates' codes %v", d.Plan, d.Codes, got)
	}
	for _, f := range d.Findings {
		if !slices.Contains(d.Codes, f.Code) {
			s.fail("5", "plan %s: finding %q is not among the codes %v", d.Plan, f.Code, d.Codes)
		}
	}
	for _, w := range d.Repairs {
		s.checkAligned("repair work of "+d.Plan, w.Snapshot, w.Ranges)
	}
	// What it was evaluated at, and the generation it leaves.
	pl := s.st.Plans[d.Plan]
	wantGen := pre.gen[d.Env]
	if d.Outcome == events.Accepted {
		wantGen++
	}
	if d.EvaluatedAtSeq != pre.seq || d.Policy != pl.Built.Policy || d.Generation != wantGen || !d.EvaluatedAt.Equal(s.clock) {
		s.fail("5", "plan %s: decision evaluated at seq %d (view %d), policy %+v (plan %+v), generation %d (want %d), at %s", d.Plan,
			d.EvaluatedAtSeq, pre.seq, d.Policy, pl.Built.Policy, d.Generation, wantGen, ts(d.EvaluatedAt))
	}
	// A strict retry accepts only once the catch-up work is all computed.
	if d.CatchUpSeq > 0 && d.Outcome == events.Accepted && pl.CatchUp != nil {
		if left := outstanding(s.st, *pl.CatchUp); !left.Empty() {
			s.fail("1", "plan %s accepted after catch-up with %v of its work not computed", d.Plan, left)
		}
	}
	if d.Outcome == events.Accepted {
		s.checkAccepted(d, seq, pre)
	} else if len(d.Repairs) > 0 {
		s.fail("1", "plan %s: a rejection issues repair work %v", d.Plan, d.Repairs)
	}
}

func sortedCopy(l []string) []string { c := slices.Clone(l); sort.Strings(c); return c }

// checkAccepted is invariant 1: the new incumbents cover everything the
// demoted ones covered (from each candidate's start), except an admitted
// trailing suffix, which is a real trailing gap within the bound and has
// exactly one open repair debt and repair work.
func (s *sim) checkAccepted(d events.PromotionDecided, seq uint64, pre preState) {
	s.tb.Helper()
	pl := s.st.Plans[d.Plan]
	env := s.st.Env(d.Env)
	inPlan := map[string]bool{}
	for _, c := range pl.Built.Candidates {
		inPlan[c.Model] = true
		if env.Incumbents[c.Model] != c.Snapshot {
			s.fail("1", "plan %s accepted but %s serves %s", d.Plan, env.Incumbents[c.Model], c.Model)
		}
		f := d.Models[c.Model]
		admitted := interval.NewSet(f.Missing...)
		demoted := pre.inc[d.Env][c.Model]
		if demoted != "" && demoted != c.Snapshot {
			inc := s.st.Snapshots[demoted]
			cand := s.st.Snapshots[c.Snapshot]
			from := cand.Schedule.Unit().Floor(cand.Start)
			incCov := s.st.Table(inc.Table).Clip(interval.R(from, far))
			if lost := incCov.SubtractSet(s.st.Table(c.Table)).SubtractSet(admitted); !lost.Empty() {
				s.fail("1", "plan %s: promoting %s over %s loses %v that %s covered (admitted suffix %v)", d.Plan, c.Snapshot, demoted, lost, demoted, admitted)
			}
			if !admitted.Empty() {
				frontier := s.st.Table(inc.Table).Frontier()
				if !admitted.IsSuffix(frontier) {
					s.fail("1", "plan %s: %s admitted gap %v is not one suffix ending at %s's frontier %s", d.Plan, c.Snapshot, admitted, demoted, ts(frontier))
				}
				if !slices.Contains(f.Codes, policy.CodeTrailingGapAccepted) {
					s.fail("1", "plan %s: %s accepted missing %v without trailing_gap_accepted (codes %v)", d.Plan, c.Snapshot, admitted, f.Codes)
				}
				adv := inc.Schedule.Advances(admitted[0].Start, admitted[0].End)
				if adv != f.Advances || adv < 1 || adv > d.Policy.MaxTrailingGapAdvances {
					s.fail("1", "plan %s: %s admitted gap %v counts %d advances (recorded %d), bound %d", d.Plan, c.Snapshot, admitted, adv, f.Advances, d.Policy.MaxTrailingGapAdvances)
				}
				if !c.IncumbentFrontier.IsZero() && admitted[0].Start.Before(c.IncumbentFrontier) {
					s.fail("1", "plan %s: %s admitted gap %v reaches before the captured frontier %s", d.Plan, c.Snapshot, admitted, ts(c.IncumbentFrontier))
				}
				s.checkDownstreamClean(pl.Built, c, admitted)
			}
		} else if !admitted.Empty() {
			s.fail("1", "plan %s: %s (incumbent %q) accepted with missing %v", d.Plan, c.Snapshot, demoted, admitted)
		}
		// Exactly one open debt per candidate accepted with a gap, and
		// repair work that covers it.
		var debts []*projections.Repair
		for _, r := range s.st.Repairs {
			if r.OpenSeq == seq && r.Model == c.Model {
				debts = append(debts, r)
			}
		}
		var work interval.Set
		for _, w := range d.Repairs {
			if w.Model == c.Model {
				if w.Snapshot != c.Snapshot || w.Table != c.Table {
					s.fail("1", "plan %s: repair work %s/%s for candidate %s/%s", d.Plan, w.Snapshot, w.Table, c.Snapshot, c.Table)
				}
				work = work.AddSet(w.Ranges)
			}
		}
		switch {
		case admitted.Empty() && (len(debts) > 0 || !work.Empty()):
			s.fail("1", "plan %s: %s accepted without gap has %d debts and repair work %v", d.Plan, c.Snapshot, len(debts), work)
		case !admitted.Empty() && len(debts) != 1:
			s.fail("1", "plan %s: %s accepted with gap %v has %d repair debts, want 1", d.Plan, c.Snapshot, admitted, len(debts))
		case !admitted.Empty():
			if r := debts[0]; !r.Open() || r.Table != c.Table || !interval.NewSet(r.Ranges...).Equal(admitted) {
				s.fail("1", "plan %s: %s debt open=%t table %s ranges %v, want open on %s for %v", d.Plan, c.Snapshot, r.Open(), r.Table, interval.Set(r.Ranges), c.Table, admitted)
			}
			if !admitted.SubtractSet(work).Empty() {
				s.fail("1", "plan %s: repair work %v does not cover %s's gap %v", d.Plan, work, c.Snapshot, admitted)
			}
		}
	}
	for m, id := range pre.inc[d.Env] {
		if !inPlan[m] && env.Incumbents[m] != id {
			s.fail("1", "plan %s moved %s (not a candidate) from %s to %s", d.Plan, m, id, env.Incumbents[m])
		}
	}
}

// checkDownstreamClean: no transitive downstream candidate that does not
// keep the production table holds coverage overlapping an admitted gap.
func (s *sim) checkDownstreamClean(plan events.PlanBuilt, c events.Candidate, gap interval.Set) {
	s.tb.Helper()
	reach := map[string]bool{c.Snapshot: true}
	for changed := true; changed; {
		changed = false
		for _, d := range plan.Candidates {
			if reach[d.Snapshot] {
				continue
			}
			for _, u := range d.Upstream {
				if reach[u] {
					reach[d.Snapshot], changed = true, true
					break
				}
			}
		}
	}
	for _, d := range plan.Candidates {
		if !reach[d.Snapshot] || d.Snapshot == c.Snapshot {
			continue
		}
		if keepsProduction(s.st, d) {
			continue // keeps the production table's rows by design
		}
		if s.st.Table(d.Table).OverlapsSet(gap) {
			s.fail("1", "plan %s accepted %s's gap %v while downstream candidate %s holds %v", plan.Plan, c.Snapshot, gap, d.Snapshot, s.st.Table(d.Table).Clip(interval.R(gap.Start(), gap.Frontier())))
		}
	}
}

// checkRepairsClose: a debt closes when its table covers the gap, by any
// route.
func (s *sim) checkRepairsClose() {
	s.tb.Helper()
	for _, r := range s.st.OpenRepairs() {
		cov := s.st.Table(r.Table)
		covered := true
		for _, g := range r.Ranges {
			covered = covered && cov.Covers(g)
		}
		if covered {
			s.fail("9", "repair debt of %s (plan %s, %v) is still open although table %s covers it", r.Snapshot, r.Plan, interval.Set(r.Ranges), r.Table)
		}
	}
}

// checkGlobal runs after every step: invariant 4 over every version, 6
// (rebuild from the log), and the open catch-ups' bookkeeping.
func (s *sim) checkGlobal() {
	s.tb.Helper()
	for id, sn := range s.st.Snapshots {
		s.checkVersionName(id, sn.Version)
	}
	live, err := json.Marshal(s.st)
	if err != nil {
		s.fail("6", "marshal live state: %v", err)
	}
	rebuilt, err := json.Marshal(replay.Fold(s.log))
	if err != nil {
		s.fail("6", "marshal rebuilt state: %v", err)
	}
	if string(live) != string(rebuilt) {
		s.fail("6", "replay.Fold(log) differs from the live state:\n live    %s\n rebuilt %s", live, rebuilt)
	}
	if divs := replay.Verify(s.log); len(divs) > 0 {
		var lines []string
		for _, d := range divs {
			lines = append(lines, d.String())
		}
		s.fail("6", "replay.Verify finds %d divergence(s):\n%s", len(divs), strings.Join(lines, "\n"))
	}
}

// checkComposition: a plan's candidates are the versions it sets, exactly,
// plus a derived version of every downstream incumbent it does not set.
func (s *sim) checkComposition(cmd *commands.BuildPlan, p events.PlanBuilt, pre preState) {
	s.tb.Helper()
	inc := pre.inc[cmd.Env]
	byModel := map[string]events.Candidate{}
	for _, c := range p.Candidates {
		byModel[c.Model] = c
	}
	reach := map[string]bool{}
	for m, v := range cmd.Versions {
		if c, ok := byModel[m]; !ok || c.Snapshot != events.SnapshotID(m, v) || c.Derived {
			s.fail("P", "plan %s sets %s@%s; its candidate for %s is %q (derived %t)", p.Plan, m, v, m, c.Snapshot, c.Derived)
		}
		if inc[m] != events.SnapshotID(m, v) {
			reach[m] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for m, id := range inc {
			if reach[m] {
				continue
			}
			for _, d := range s.st.Snapshots[id].DependsOn {
				if reach[d] {
					reach[m], changed = true, true
					break
				}
			}
		}
	}
	for m := range reach {
		if _, set := cmd.Versions[m]; set {
			continue
		}
		if c, ok := byModel[m]; !ok || !c.Derived {
			s.fail("P", "plan %s: downstream incumbent %s gets no derived candidate (%q)", p.Plan, m, c.Snapshot)
		}
	}
	for m, c := range byModel {
		if _, set := cmd.Versions[m]; !set && !reach[m] {
			s.fail("P", "plan %s: candidate %s is neither set nor downstream of a change", p.Plan, c.Snapshot)
		}
	}
}

// outstanding is the catch-up work of req its tables do not cover yet.
func outstanding(st *projections.State, req events.CatchUpRequested) interval.Set {
	var left interval.Set
	for _, w := range req.Work {
		todo := interval.NewSet(w.Ranges...).AddSet(w.Recompute)
		for _, r := range todo {
			left = left.AddSet(st.Table(w.Table).Missing(r))
		}
	}
	return left
}

// checkRefusal: a promote is refused only while its catch-up work is
// outstanding (and the plan does not conflict); a finalize only when the
// plan is not accepted or the env moved on since.
func (s *sim) checkRefusal(cmd commands.Command, err error) {
	s.tb.Helper()
	switch c := cmd.(type) {
	case *commands.Promote:
		pl, ok := s.st.Plans[c.Plan]
		if !ok {
			return
		}
		if !pl.CatchUpOpen() || conflicting(s.st, pl.Built) || outstanding(s.st, *pl.CatchUp).Empty() {
			s.fail("F", "promote %s refused: %v", c.Plan, err)
		}
	case *commands.Finalize:
		pl, ok := s.st.Plans[c.Plan]
		if ok && pl.Accepted() && s.st.Env(pl.Built.Env).Generation == pl.AcceptedGeneration {
			s.fail("F", "finalize %s refused although it is accepted at the env's generation: %v", c.Plan, err)
		}
	case *commands.Rollback:
		if _, refusal := s.expectRollback(c); refusal == "" {
			s.fail("R", "rollback of %s to %d refused; the oracle carries it out: %v", c.Env, c.ToGeneration, err)
		}
	}
}

// expectRollback is the rollback oracle (invariant R), on the state
// before the command: the incumbents the env must have after it, or why
// it must be refused. The target is the env's incumbents at that
// generation as the sim recorded them (sim.gens), not the projection's
// history.
func (s *sim) expectRollback(c *commands.Rollback) (map[string]string, string) {
	e, ok := s.st.Envs[c.Env]
	if !ok || e.Generation == 0 {
		return nil, "no promotion in the env"
	}
	to := c.ToGeneration
	if to == 0 {
		to = e.Generation - 1
	}
	if to == 0 || to >= e.Generation {
		return nil, fmt.Sprintf("generation %d is not an earlier one of %d", to, e.Generation)
	}
	want, ok := s.gens[c.Env][to]
	if !ok {
		s.fail("R", "the sim recorded no generation %d of %s", to, c.Env)
	}
	for m := range e.Incumbents {
		if _, ok := want[m]; !ok {
			return nil, "model " + m + " had no incumbent then"
		}
	}
	if maps.Equal(want, e.Incumbents) {
		return nil, "nothing changes"
	}
	for m, id := range want {
		if id == e.Incumbents[m] {
			continue
		}
		tables := []string{s.st.Snapshots[id].Table}
		up, _ := s.st.UpstreamOf(id)
		for _, u := range up {
			tables = append(tables, s.st.Snapshots[u].Table)
		}
		for _, t := range tables {
			if _, gone := s.st.Retired[t]; gone {
				return nil, "table " + t + " retired"
			}
		}
	}
	return maps.Clone(want), ""
}

// checkCarriedOut (on the state before): a finalize appends only for an
// accepted plan, not finalized yet, at the generation its acceptance set.
func (s *sim) checkCarriedOut(cmd commands.Command) {
	s.tb.Helper()
	if c, ok := cmd.(*commands.Finalize); ok {
		pl := s.st.Plans[c.Plan]
		if pl == nil || !pl.Accepted() || pl.Finalized || pl.AcceptedGeneration != s.st.Env(pl.Built.Env).Generation {
			s.fail("F", "finalize %s carried out for a plan not accepted at the env's generation", c.Plan)
		}
	}
}
