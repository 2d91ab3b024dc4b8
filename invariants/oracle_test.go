package invariants

import (
	"maps"
	"slices"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// The oracle re-derives, from DESIGN.md's text, what a promote command
// must record (invariant 10) and what a scheduler tick must schedule
// (invariant 8), written independently of policy/ and decide/ (it shares
// only the interval arithmetic: sets, Next/Prev, ReadyFrontier, Work).

// boundary reports whether x is a cron-tick boundary of sched: a value
// RF can take.
func boundary(sched interval.Schedule, x time.Time) bool {
	if sched.AllowPartials() {
		return sched.ReadyFrontier(x).Equal(x)
	}
	u := sched.Unit()
	return u.Aligned(x) && sched.ReadyFrontier(u.Add(x, 1).Add(-time.Nanosecond)).Equal(x)
}

// advances counts the distinct RF(T) over ticks T with s < RF(T) <= f.
func advances(sched interval.Schedule, s, f time.Time) int {
	seen := map[time.Time]bool{}
	rf := func(t time.Time) time.Time {
		if sched.AllowPartials() {
			return t
		}
		return sched.Unit().Floor(t)
	}
	for t := sched.Next(s); !t.IsZero() && !rf(t).After(f); t = sched.Next(t) {
		if rf(t).After(s) {
			seen[rf(t)] = true
		}
	}
	return len(seen)
}

// expectation is what the oracle says a candidate gets.
type expectation struct {
	codes    map[string]bool
	missing  interval.Set
	eligible bool // safe suffix within the catch-up bound
	suffix   interval.Set
	adv      int
}

func (e *expectation) add(c string) { e.codes[c] = true }

func (e *expectation) rejects() bool {
	for c := range e.codes {
		if policy.Rejects(c) {
			return true
		}
	}
	return false
}

// descendantsOf returns the plan's candidates transitively downstream of c.
func descendantsOf(plan events.PlanBuilt, c events.Candidate) []events.Candidate {
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
	var out []events.Candidate
	for _, d := range plan.Candidates {
		if reach[d.Snapshot] && d.Snapshot != c.Snapshot {
			out = append(out, d)
		}
	}
	return out
}

// keepsProduction: a downstream candidate writing its incumbent's table
// (a forward-only version, or any version whose table its incumbent
// serves) keeps its rows by design: "its rows stay in place".
func keepsProduction(st *projections.State, d events.Candidate) bool {
	inc := st.Snapshots[d.Incumbent]
	return inc != nil && inc.Table == d.Table
}

// overlapOf is d's recorded coverage over the intervals of gap (in d's
// unit).
func overlapOf(st *projections.State, d events.Candidate, gap interval.Set) interval.Set {
	u := st.Snapshots[d.Snapshot].Schedule.Unit()
	var out interval.Set
	for _, g := range gap {
		out = out.AddSet(st.Table(d.Table).Clip(interval.R(u.Floor(g.Start), u.Ceil(g.End))))
	}
	return out
}

// guard applies the downstream guard to c's gap: blocking overlaps give
// downstream_overlap, forward-only ones on production the warning.
func guard(st *projections.State, plan events.PlanBuilt, c events.Candidate, gap interval.Set, e *expectation) (blocked bool) {
	for _, d := range descendantsOf(plan, c) {
		if overlapOf(st, d, gap).Empty() {
			continue
		}
		if keepsProduction(st, d) {
			e.add(policy.CodeForwardOnlyOverlapKept)
		} else {
			e.add(policy.CodeDownstreamOverlap)
			blocked = true
		}
	}
	return blocked
}

// window measures a candidate: checked is false when it is not
// gap-checked against a window (unchanged, shares its incumbent's table,
// an empty window, or nothing to match: then its own backfill set).
func window(st *projections.State, pol events.Policy, c events.Candidate, e *expectation) (w interval.Range, inc *projections.Snapshot, checked bool) {
	if c.Snapshot == c.Incumbent {
		return w, nil, false
	}
	cand := st.Snapshots[c.Snapshot]
	inc = st.Snapshots[c.Incumbent]
	if inc != nil && inc.Table == c.Table {
		e.add(policy.CodeNoGaps)
		return w, inc, false
	}
	if inc == nil || st.Table(inc.Table).Empty() {
		// Nothing is promoted empty: the candidate's own backfill set,
		// fixed at build, must be covered.
		e.missing = interval.NewSet(c.Backfill...).SubtractSet(st.Table(c.Table))
		switch {
		case e.missing.Empty():
			e.add(policy.CodeNoGaps)
		case pol.MaxTrailingGapAdvances == 0 && pol.MaxCatchUpAdvances == 0:
			e.add(policy.CodeMissingIntervals)
		default:
			e.add(policy.CodeHistoricalGap)
		}
		return w, inc, false
	}
	f := st.Table(inc.Table).Frontier()
	start := cand.Schedule.Unit().Floor(cand.Start)
	if !start.Before(f) {
		e.add(policy.CodeNoGaps)
		return w, inc, false
	}
	w = interval.R(start, f)
	e.missing = st.Table(c.Table).Missing(w)
	return w, inc, true
}

// safe checks the conditions the allowance and catch-up share, in
// DESIGN.md's order; the first failing one gives the code.
func safe(st *projections.State, c events.Candidate, w interval.Range, inc *projections.Snapshot, e *expectation) bool {
	cand := st.Snapshots[c.Snapshot]
	captured, err := interval.NewSchedule(c.IncumbentCron, c.IncumbentUnit, c.IncumbentAllowPartials)
	switch {
	case err != nil || !captured.Same(inc.Schedule) || !captured.Same(cand.Schedule):
		e.add(policy.CodeScheduleChanged)
	case !c.IncumbentFrontier.IsZero() && e.missing.Overlaps(interval.R(w.Start, c.IncumbentFrontier)):
		e.add(policy.CodeHistoricalGap)
	case len(e.missing) != 1 || !e.missing[0].End.Equal(w.End):
		e.add(policy.CodeInternalGap)
	case (!c.IncumbentFrontier.IsZero() && !boundary(captured, c.IncumbentFrontier)) || !boundary(captured, w.End):
		e.add(policy.CodeAmbiguousBoundary)
	default:
		e.suffix = e.missing
		e.adv = advances(captured, e.missing[0].Start, e.missing[0].End)
		return true
	}
	return false
}

// allowance judges a safe suffix under the trailing-gap bound.
func allowance(st *projections.State, plan events.PlanBuilt, c events.Candidate, e *expectation) {
	if e.adv > plan.Policy.MaxTrailingGapAdvances {
		e.add(policy.CodeTrailingGapExceeds)
		return
	}
	if !guard(st, plan, c, e.suffix, e) {
		e.add(policy.CodeTrailingGapAccepted)
	}
}

// oracleOutcome is the oracle's answer for a promote: "conflicting", or
// "catch-up" with the work, or "accepted"/"rejected" with codes and
// per-model missing ranges.
type oracleOutcome struct {
	kind      string
	codes     []string
	missing   map[string]interval.Set
	work      map[string]interval.Set
	recompute map[string]interval.Set
}

func conflicting(st *projections.State, plan events.PlanBuilt) bool {
	env := st.Env(plan.Env)
	if env.Generation != plan.Generation {
		return true
	}
	for _, c := range plan.Candidates {
		if env.Incumbents[c.Model] != c.Incumbent {
			return true
		}
	}
	return false
}

// evaluate is the promotion check of a plan on st (no catch-up open).
func evaluate(st *projections.State, plan events.PlanBuilt) oracleOutcome {
	if conflicting(st, plan) {
		return oracleOutcome{kind: "conflicting", codes: []string{policy.CodeConflictingPlan}}
	}
	es := map[string]*expectation{}
	anyEligible, anyReject := false, false
	pol := plan.Policy
	for _, c := range plan.Candidates {
		e := &expectation{codes: map[string]bool{}}
		es[c.Model] = e
		w, inc, checked := window(st, plan.Policy, c, e)
		switch {
		case !checked:
		case e.missing.Empty():
			e.add(policy.CodeNoGaps)
		case pol.MaxTrailingGapAdvances == 0 && pol.MaxCatchUpAdvances == 0:
			e.add(policy.CodeMissingIntervals)
		case !safe(st, c, w, inc, e):
		case pol.MaxCatchUpAdvances > 0 && e.adv <= pol.MaxCatchUpAdvances:
			e.eligible = true
		default:
			allowance(st, plan, c, e)
		}
		anyEligible = anyEligible || e.eligible
		anyReject = anyReject || e.rejects()
	}
	if anyEligible && !anyReject {
		out := oracleOutcome{kind: "catch-up", work: map[string]interval.Set{}, recompute: map[string]interval.Set{}}
		for _, c := range plan.Candidates {
			e := es[c.Model]
			if !e.eligible {
				continue
			}
			out.work[c.Model] = wholeWork(st, st.Snapshots[c.Snapshot], e.suffix)
			for _, d := range descendantsOf(plan, c) {
				if keepsProduction(st, d) {
					continue
				}
				if ov := overlapOf(st, d, e.suffix); !ov.Empty() {
					out.recompute[d.Model] = out.recompute[d.Model].AddSet(wholeWork(st, st.Snapshots[d.Snapshot], ov))
				}
			}
		}
		return out
	}
	return finish(plan, es)
}

// retry is the strict re-check after the catch-up req.
func retry(st *projections.State, plan events.PlanBuilt, req events.CatchUpRequested) oracleOutcome {
	if conflicting(st, plan) {
		return oracleOutcome{kind: "conflicting", codes: []string{policy.CodeConflictingPlan}}
	}
	work := map[string]events.CatchUpWork{}
	for _, w := range req.Work {
		work[w.Model] = w
	}
	es := map[string]*expectation{}
	for _, c := range plan.Candidates {
		e := &expectation{codes: map[string]bool{}}
		es[c.Model] = e
		w, inc, checked := window(st, plan.Policy, c, e)
		cw := work[c.Model]
		switch {
		case !checked:
		case e.missing.Empty() && len(cw.Ranges) > 0:
			e.add(policy.CodeCaughtUp)
		case e.missing.Empty():
			e.add(policy.CodeNoGaps)
		case plan.Policy.MaxTrailingGapAdvances > 0:
			if safe(st, c, w, inc, e) {
				allowance(st, plan, c, e)
			}
		case cw.IncumbentFrontier.Before(w.End) && !e.missing.Overlaps(interval.R(w.Start, maxTime(cw.IncumbentFrontier, w.Start))):
			e.add(policy.CodeCatchUpExhausted)
		default:
			e.add(policy.CodeMissingIntervals)
		}
		if len(cw.Ranges) > 0 {
			// Judged against the caught-up suffix: a whole kind's work is
			// the whole object, its suffix what the request found missing.
			caught := interval.NewSet(cw.Ranges...)
			if sn := st.Snapshots[c.Snapshot]; sn != nil && sn.Kind.Whole() {
				for _, f := range req.Findings {
					if f.Code == policy.CodeCatchUpRequested && f.Snapshot == c.Snapshot {
						caught = interval.NewSet(f.Ranges...)
					}
				}
			}
			for _, d := range descendantsOf(plan, c) {
				if keepsProduction(st, d) && !overlapOf(st, d, caught).Empty() {
					e.add(policy.CodeForwardOnlyOverlapKept)
				}
			}
		}
	}
	return finish(plan, es)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func finish(plan events.PlanBuilt, es map[string]*expectation) oracleOutcome {
	out := oracleOutcome{kind: "accepted", missing: map[string]interval.Set{}}
	for _, e := range es {
		if e.rejects() {
			out.kind = "rejected"
		}
	}
	codes := map[string]bool{}
	for _, c := range plan.Candidates {
		e := es[c.Model]
		out.missing[c.Model] = e.missing
		for code := range e.codes {
			if out.kind == "rejected" && !policy.Rejects(code) && code != policy.CodeForwardOnlyOverlapKept {
				continue
			}
			codes[code] = true
		}
	}
	out.codes = slices.Sorted(maps.Keys(codes))
	return out
}

// checkPromote is invariant 10: the promote's recorded outcome (decision
// or catch-up request) is the oracle's, decided on the same state.
// The oracle runs on the state the promote is decided against (expect);
// the comparison runs after the other checks (so that they name what they
// see first).
func (s *sim) expectPromote(cmd *commands.Promote) (oracleOutcome, bool) {
	pl, ok := s.st.Plans[cmd.Plan]
	if !ok {
		return oracleOutcome{}, false
	}
	if pl.CatchUpOpen() {
		return retry(s.st, pl.Built, *pl.CatchUp), true
	}
	return evaluate(s.st, pl.Built), true
}

func (s *sim) checkPromote(cmd *commands.Promote, want oracleOutcome, payloads []events.Payload) {
	s.tb.Helper()
	pl, ok := s.st.Plans[cmd.Plan]
	if !ok || len(payloads) == 0 {
		return
	}
	switch p := payloads[0].(type) {
	case events.CatchUpRequested:
		if want.kind != "catch-up" {
			s.fail("10", "promote %s: catch-up requested; the oracle says %s %v %v", cmd.Plan, want.kind, want.codes, want.missing)
		}
		for _, w := range p.Work {
			if !interval.NewSet(w.Ranges...).Equal(want.work[w.Model]) || !interval.NewSet(w.Recompute...).Equal(want.recompute[w.Model]) {
				s.fail("10", "promote %s: catch-up work for %s is %v recompute %v; the oracle says %v recompute %v", cmd.Plan, w.Model,
					interval.Set(w.Ranges), interval.Set(w.Recompute), want.work[w.Model], want.recompute[w.Model])
			}
		}
	case events.PromotionDecided:
		got := string(p.Outcome)
		if slices.Contains(p.Codes, policy.CodeConflictingPlan) {
			got = "conflicting"
		}
		if got != want.kind || !slices.Equal(sortedCopy(p.Codes), want.codes) {
			s.fail("10", "promote %s: recorded %s %v; the oracle says %s %v (missing %v)", cmd.Plan, p.Outcome, p.Codes, want.kind, want.codes, want.missing)
		}
		if want.kind == "conflicting" {
			return
		}
		for _, c := range pl.Built.Candidates {
			if got := interval.NewSet(p.Models[c.Model].Missing...); !got.Equal(want.missing[c.Model]) {
				s.fail("10", "promote %s: %s missing recorded %v; the oracle says %v", cmd.Plan, c.Model, got, want.missing[c.Model])
			}
		}
	}
}

// wholeWork is the work that computes set for sn, as docs/kinds.md states
// it: whole intervals of its unit; for a whole kind (full, view, seed),
// one range from its start (floored to its unit) to the end of that, or
// to its table's frontier when later. Written from the doc, apart from
// projections.State.WorkOf.
func wholeWork(st *projections.State, sn *projections.Snapshot, set interval.Set) interval.Set {
	w := sn.Schedule.Work(set)
	if w.Empty() || (sn.Kind != events.Full && sn.Kind != events.View && sn.Kind != events.Seed) {
		return w
	}
	end := w.Frontier()
	if f := st.Table(sn.Table).Frontier(); f.After(end) {
		end = f
	}
	return interval.NewSet(interval.R(sn.Schedule.Unit().Floor(sn.Start), end))
}

// expectedWork is what a tick of env at t must schedule per incumbent
// model: every missing ready interval and, when t is one of the model's
// own ticks (it fires now) and makes intervals ready, its lookback: the N
// whole intervals before the first newly ready one (at the previous
// tick's readiness frontier), clipped to the start; whole intervals of the
// unit. A tick of the model before t (the deploy's instant, a tick before
// it became an incumbent) does not fire at t: it adds no lookback.
func expectedWork(st *projections.State, env string, t time.Time) map[string]interval.Set {
	out := map[string]interval.Set{}
	e := st.Env(env)
	for model, id := range e.Incumbents {
		sn := st.Snapshots[id]
		sched := sn.Schedule
		tick := sched.Prev(t)
		rf := sched.ReadyFrontier(t)
		start := sched.Unit().Floor(sn.Start)
		if tick.IsZero() || !start.Before(rf) {
			continue
		}
		w := interval.R(start, rf)
		work := st.Table(sn.Table).Missing(w)
		if sn.Lookback > 0 && !sn.Kind.Whole() && tick.Equal(t) {
			if prev := sched.ReadyFrontier(tick.Add(-time.Nanosecond)); !prev.IsZero() && prev.Before(rf) {
				u := sched.Unit()
				first := u.Floor(prev)
				work = work.AddSet(interval.NewSet(interval.R(u.Add(first, -sn.Lookback), first)).Clip(w))
			}
		}
		if work = wholeWork(st, sn, work); !work.Empty() {
			out[model] = work
		}
	}
	return out
}
