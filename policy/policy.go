// Package policy evaluates a plan's promotion against a projection view. It
// is a pure function: no I/O, no wall clock, no randomness, so a recorded
// decision can be re-evaluated from the stream and must come out the same.
//
// Version 1 implements the three policies of DESIGN.md. Per candidate,
// against the incumbent now, the candidate must cover everything in the
// window [candidate start, incumbent frontier now) (strict), or, with a
// bound > 0, may miss one contiguous trailing suffix produced by at most N
// scheduler advances after plan build when the schedule is unchanged,
// history is complete and both frontiers are cron-tick boundaries. Under
// the trailing-gap allowance the suffix is accepted and stays missing
// (repair debt) unless a downstream candidate already computed intervals
// overlapping it. Under bounded catch-up, Evaluate asks the engine to
// backfill the suffix (and recompute overlapping downstream intervals);
// Retry then re-checks every candidate strictly, and the allowance, when
// set too, judges whatever is still missing.
package policy

import (
	"slices"
	"sort"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Version is the policy rule set this build evaluates.
const Version = 1

// Decision codes. Rejecting codes fail a promotion; the others are findings
// or warnings of an accepted one.
const (
	CodeNoGaps                 = "no_gaps"
	CodeMissingIntervals       = "missing_intervals"
	CodeConflictingPlan        = "conflicting_plan"
	CodeTrailingGapAccepted    = "trailing_gap_accepted"
	CodeScheduleChanged        = "schedule_changed"
	CodeHistoricalGap          = "historical_gap"
	CodeInternalGap            = "internal_gap"
	CodeAmbiguousBoundary      = "ambiguous_boundary"
	CodeTrailingGapExceeds     = "trailing_gap_exceeds_bound"
	CodeDownstreamOverlap      = "downstream_overlap"
	CodeForwardOnlyOverlapKept = "forward_only_overlap_retained"
	CodeCaughtUp               = "caught_up"
	CodeCatchUpExhausted       = "catch_up_exhausted"
	CodeUnknownSnapshot        = "unknown_snapshot"
	CodeUnsupportedPolicyV     = "unsupported_policy_version"
)

// Codes that only appear in findings of a catch-up request or of a
// rejected decision; they never reject on their own.
const (
	// CodeCatchUpRequested: the candidate's suffix is backfilled before the
	// strict retry.
	CodeCatchUpRequested = "catch_up_requested"
	// CodeCatchUpRecompute: complete downstream intervals overlapping an
	// upstream suffix are invalidated and recomputed.
	CodeCatchUpRecompute = "catch_up_recompute"
	// CodeCatchUpEligible: the candidate could have caught up, but another
	// candidate rejected the plan.
	CodeCatchUpEligible = "catch_up_eligible"
)

var accepting = map[string]bool{
	CodeNoGaps: true, CodeTrailingGapAccepted: true, CodeForwardOnlyOverlapKept: true, CodeCaughtUp: true,
	CodeCatchUpRequested: true, CodeCatchUpRecompute: true, CodeCatchUpEligible: true,
}

// Rejects reports whether a code fails a promotion.
func Rejects(code string) bool { return !accepting[code] }

// Decision is the outcome of evaluating a plan.
type Decision struct {
	// Outcome is empty when CatchUp is set: nothing is decided yet.
	Outcome events.Outcome
	// Codes is the sorted union of every candidate's codes.
	Codes    []string
	Models   map[string]events.ModelFinding
	Findings []events.Finding
	// CatchUp, when set, is the work to do before the strict retry: one
	// entry per candidate, in plan (dependency) order.
	CatchUp []events.CatchUpWork
}

// NeedsCatchUp reports whether the engine must catch up before deciding.
func (d Decision) NeedsCatchUp() bool { return d.CatchUp != nil }

// verdict is one candidate's result.
type verdict struct {
	f        events.ModelFinding
	findings []events.Finding
	// eligible: the miss is a safe suffix within the catch-up bound.
	eligible bool
}

func (v *verdict) add(code string, fd events.Finding) {
	v.f.Codes = appendOnce(v.f.Codes, code)
	fd.Code = code
	if fd.Model == "" {
		fd.Model, fd.Snapshot = v.model(), v.f.Snapshot
	}
	if fd.Ranges == nil {
		fd.Ranges = []interval.Range{}
	}
	v.findings = append(v.findings, fd)
}

func (v *verdict) model() string { m, _, _ := events.ParseSnapshotID(v.f.Snapshot); return m }

// Evaluate runs the promotion check of plan against the view st. Under
// bounded catch-up it may return a Decision that NeedsCatchUp instead of a
// verdict.
func Evaluate(st *projections.State, plan events.PlanBuilt) Decision {
	if d, ok := planWideCheck(st, plan); !ok {
		return d
	}
	vs := map[string]*verdict{}
	anyEligible, anyReject := false, false
	for _, c := range plan.Candidates {
		v := checkCandidate(st, plan, c)
		vs[c.Model] = v
		anyEligible = anyEligible || v.eligible
		for _, code := range v.f.Codes {
			anyReject = anyReject || Rejects(code)
		}
	}
	if anyEligible && !anyReject {
		return catchUp(st, plan, vs)
	}
	for _, c := range plan.Candidates {
		if v := vs[c.Model]; v.eligible {
			v.add(CodeCatchUpEligible, events.Finding{Ranges: v.f.Missing, Advances: v.f.Advances,
				Message: sprintf("%s could catch up %s (%s), but another candidate rejects the plan", v.f.Snapshot, ranges(v.f.Missing), advances(v.f.Advances))})
		}
	}
	return finish(plan, vs)
}

// Retry is the strict re-check after the catch-up req: every candidate is
// checked again; what is still missing is judged by the trailing-gap
// allowance when the plan sets one, else it is catch_up_exhausted (another
// advance happened meanwhile) or missing_intervals.
func Retry(st *projections.State, plan events.PlanBuilt, req events.CatchUpRequested) Decision {
	if d, ok := planWideCheck(st, plan); !ok {
		return d
	}
	work := map[string]events.CatchUpWork{}
	for _, w := range req.Work {
		work[w.Model] = w
	}
	vs := map[string]*verdict{}
	for _, c := range plan.Candidates {
		vs[c.Model] = retryCandidate(st, plan, c, work[c.Model])
	}
	return finish(plan, vs)
}

// planWideCheck applies the checks that reject the plan as a whole.
func planWideCheck(st *projections.State, plan events.PlanBuilt) (Decision, bool) {
	if plan.Policy.Version > Version {
		return planWide(plan, CodeUnsupportedPolicyV, sprintf("the plan asks for policy version %d; this build evaluates version %d", plan.Policy.Version, Version)), false
	}
	env := st.Env(plan.Env)
	if env.Generation != plan.Generation {
		return planWide(plan, CodeConflictingPlan, sprintf("environment %s is at generation %d, the plan was built at generation %d: another promotion happened since; rebuild the plan", plan.Env, env.Generation, plan.Generation)), false
	}
	for _, c := range plan.Candidates {
		if now := env.Incumbents[c.Model]; now != c.Incumbent {
			return planWide(plan, CodeConflictingPlan, sprintf("%s is served by %s, the plan captured %s at build; rebuild the plan", c.Model, orNone(now), orNone(c.Incumbent))), false
		}
	}
	return Decision{}, true
}

// measure computes a candidate's window and what it misses in it.
func measure(st *projections.State, c events.Candidate) (v *verdict, window interval.Range, missing interval.Set, ok bool) {
	v = &verdict{f: events.ModelFinding{Snapshot: c.Snapshot, Missing: []interval.Range{}}}
	cand, found := st.Snapshots[c.Snapshot]
	if !found {
		v.add(CodeUnknownSnapshot, events.Finding{Message: sprintf("%s is not registered", c.Snapshot)})
		return v, window, nil, false
	}
	window, has := Window(st, c)
	if !has {
		v.add(CodeNoGaps, events.Finding{Message: sprintf("%s has no incumbent coverage to match", c.Snapshot)})
		return v, window, nil, false
	}
	missing = st.Table(cand.Table).Missing(window)
	if missing.Empty() {
		return v, window, nil, true
	}
	v.f.Missing = missing
	last := missing[len(missing)-1]
	if last.End.Equal(window.End) {
		if inc, ok := st.Snapshots[c.Incumbent]; ok {
			v.f.Advances = inc.Schedule.Advances(last.Start, last.End)
		}
	}
	return v, window, missing, true
}

func checkCandidate(st *projections.State, plan events.PlanBuilt, c events.Candidate) *verdict {
	v, window, missing, ok := measure(st, c)
	if !ok {
		return v
	}
	if missing.Empty() {
		v.add(CodeNoGaps, events.Finding{Related: c.Incumbent, Message: sprintf("%s covers everything %s covers up to %s", c.Snapshot, c.Incumbent, ts(window.End))})
		return v
	}
	pol := plan.Policy
	if pol.MaxTrailingGapAdvances == 0 && pol.MaxCatchUpAdvances == 0 {
		v.add(CodeMissingIntervals, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
			Message: sprintf("%s misses %s that %s covers; the strict policy allows no gap", c.Snapshot, ranges(missing), c.Incumbent)})
		return v
	}
	if !safeSuffix(st, c, window, missing, v) {
		return v
	}
	if pol.MaxCatchUpAdvances > 0 && v.f.Advances <= pol.MaxCatchUpAdvances {
		v.eligible = true
		return v
	}
	allowance(st, plan, c, missing, v)
	return v
}

func retryCandidate(st *projections.State, plan events.PlanBuilt, c events.Candidate, w events.CatchUpWork) *verdict {
	v, window, missing, ok := measure(st, c)
	if !ok {
		return v
	}
	if missing.Empty() {
		if len(w.Ranges) > 0 || len(w.Recompute) > 0 {
			v.add(CodeCaughtUp, events.Finding{Ranges: interval.NewSet(w.Ranges...).AddSet(w.Recompute), Advances: w.Advances,
				Message: sprintf("%s caught up: %s was computed before the strict retry, which passed", c.Snapshot, ranges(interval.NewSet(w.Ranges...).AddSet(w.Recompute)))})
		} else {
			v.add(CodeNoGaps, events.Finding{Related: c.Incumbent, Message: sprintf("%s covers everything %s covers up to %s", c.Snapshot, c.Incumbent, ts(window.End))})
		}
		return v
	}
	if plan.Policy.MaxTrailingGapAdvances > 0 {
		if safeSuffix(st, c, window, missing, v) {
			allowance(st, plan, c, missing, v)
		}
		return v
	}
	before := w.IncumbentFrontier
	if before.Before(window.End) && !missing.Overlaps(interval.R(window.Start, maxTime(before, window.Start))) {
		v.add(CodeCatchUpExhausted, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
			Message: sprintf("%s misses %s again: the scheduler advanced %s during catch-up (incumbent frontier %s → %s)", c.Snapshot, ranges(missing), advances(v.f.Advances), ts(before), ts(window.End))})
		return v
	}
	v.add(CodeMissingIntervals, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
		Message: sprintf("%s still misses %s after catch-up, which no scheduler advance explains", c.Snapshot, ranges(missing))})
	return v
}

// safeSuffix applies the conditions both bounds share; the first failing
// one gives the code. It reports whether all hold.
func safeSuffix(st *projections.State, c events.Candidate, window interval.Range, missing interval.Set, v *verdict) bool {
	inc := st.Snapshots[c.Incumbent]
	cand := st.Snapshots[c.Snapshot]
	captured, err := interval.NewSchedule(c.IncumbentCron, c.IncumbentUnit, c.IncumbentAllowPartials)
	switch {
	case err != nil || !captured.Same(inc.Schedule) || !captured.Same(cand.Schedule):
		v.add(CodeScheduleChanged, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("%s runs on %s and %s on %s, but the plan captured %s at build: advances cannot be compared across schedules",
				c.Snapshot, sched(cand.Schedule), c.Incumbent, sched(inc.Schedule), schedOf(c.IncumbentCron, c.IncumbentUnit))})
		return false
	case window.Start.Before(c.IncumbentFrontier) && missing.Overlaps(interval.R(window.Start, c.IncumbentFrontier)):
		hist := missing.Clip(interval.R(window.Start, c.IncumbentFrontier))
		v.add(CodeHistoricalGap, events.Finding{Related: c.Incumbent, Ranges: hist,
			Message: sprintf("%s misses %s before the frontier %s captured at plan build; only a trailing suffix can be allowed", c.Snapshot, ranges(hist), ts(c.IncumbentFrontier))})
		return false
	case !missing.IsSuffix(window.End):
		v.add(CodeInternalGap, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("%s misses %s: not one contiguous suffix ending at the incumbent frontier %s", c.Snapshot, ranges(missing), ts(window.End))})
		return false
	case !captured.IsBoundary(c.IncumbentFrontier) || !captured.IsBoundary(window.End):
		v.add(CodeAmbiguousBoundary, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("the captured frontier %s or the current frontier %s of %s is not a cron-tick boundary of %s, so the advances that made the gap cannot be counted",
				ts(c.IncumbentFrontier), ts(window.End), c.Incumbent, schedOf(c.IncumbentCron, c.IncumbentUnit))})
		return false
	}
	return true
}

// allowance judges a safe suffix under the trailing-gap bound and the
// downstream guard.
func allowance(st *projections.State, plan events.PlanBuilt, c events.Candidate, missing interval.Set, v *verdict) {
	pol := plan.Policy
	if v.f.Advances > pol.MaxTrailingGapAdvances {
		bound := pol.MaxTrailingGapAdvances
		if pol.MaxCatchUpAdvances > bound {
			bound = pol.MaxCatchUpAdvances
		}
		v.add(CodeTrailingGapExceeds, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
			Message: sprintf("%s misses %s, produced by %s after plan build; the bound is %d", c.Snapshot, ranges(missing), advances(v.f.Advances), bound)})
		return
	}
	suffix := missing[0]
	var warnings []events.Finding
	for _, d := range descendants(plan, c.Snapshot) {
		child, ok := st.Snapshots[d.Snapshot]
		if !ok {
			continue
		}
		overlap := st.Table(d.Table).Clip(inUnit(child, suffix))
		if overlap.Empty() {
			continue
		}
		if retainsProduction(st, d, child) {
			warnings = append(warnings, events.Finding{Code: CodeForwardOnlyOverlapKept, Related: d.Snapshot, Ranges: overlap,
				Message: sprintf("forward-only child %s keeps its historical rows in the production table over %s, overlapping %s's gap; they are retained by design", d.Snapshot, ranges(overlap), c.Snapshot)})
			continue
		}
		v.add(CodeDownstreamOverlap, events.Finding{Related: d.Snapshot, Ranges: overlap,
			Message: sprintf("downstream candidate %s already computed %s, overlapping %s's gap %s: those rows were built without the parent's data", d.Snapshot, ranges(overlap), c.Snapshot, suffix)})
		return
	}
	v.add(CodeTrailingGapAccepted, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
		Message: sprintf("%s misses the trailing suffix %s, produced by %s after plan build (bound %d); it stays missing and is tracked as repair debt",
			c.Snapshot, ranges(missing), advances(v.f.Advances), pol.MaxTrailingGapAdvances)})
	for _, w := range warnings {
		v.add(w.Code, w)
	}
}

// catchUp builds the catch-up request: each eligible candidate backfills
// its suffix; each non-forward-only downstream candidate recomputes its
// complete intervals that overlap an upstream suffix.
func catchUp(st *projections.State, plan events.PlanBuilt, vs map[string]*verdict) Decision {
	recompute := map[string]interval.Set{}
	var findings []events.Finding
	for _, c := range plan.Candidates {
		v := vs[c.Model]
		if !v.eligible {
			continue
		}
		suffix := v.f.Missing[0]
		for _, d := range descendants(plan, c.Snapshot) {
			child, ok := st.Snapshots[d.Snapshot]
			if !ok || retainsProduction(st, d, child) {
				continue
			}
			if overlap := st.Table(d.Table).Clip(inUnit(child, suffix)); !overlap.Empty() {
				recompute[d.Model] = recompute[d.Model].AddSet(overlap)
			}
		}
	}
	d := Decision{CatchUp: []events.CatchUpWork{}, Models: map[string]events.ModelFinding{}}
	for _, c := range plan.Candidates {
		v := vs[c.Model]
		w := events.CatchUpWork{Model: c.Model, Snapshot: c.Snapshot, Table: c.Table, Ranges: []interval.Range{},
			Recompute: []interval.Range{}, IncumbentFrontier: st.Frontier(c.Incumbent)}
		if v.eligible {
			w.Ranges, w.Advances = v.f.Missing, v.f.Advances
			if sn, ok := st.Snapshots[c.Snapshot]; ok {
				w.Ranges = sn.Schedule.Work(v.f.Missing)
			}
			findings = append(findings, events.Finding{Code: CodeCatchUpRequested, Model: c.Model, Snapshot: c.Snapshot, Related: c.Incumbent,
				Ranges: v.f.Missing, Advances: v.f.Advances,
				Message: sprintf("%s misses %s, produced by %s after plan build (catch-up bound %d): it is backfilled before a strict retry",
					c.Snapshot, ranges(v.f.Missing), advances(v.f.Advances), plan.Policy.MaxCatchUpAdvances)})
		} else {
			findings = append(findings, v.findings...)
		}
		if rc := recompute[c.Model]; !rc.Empty() {
			w.Recompute = rc
			findings = append(findings, events.Finding{Code: CodeCatchUpRecompute, Model: c.Model, Snapshot: c.Snapshot, Ranges: rc,
				Message: sprintf("%s already computed %s, overlapping an upstream suffix: invalidated now and recomputed after it", c.Snapshot, ranges(rc))})
		}
		d.CatchUp = append(d.CatchUp, w)
		d.Models[c.Model] = v.f
	}
	d.Findings = findings
	return d
}

// retainsProduction reports whether downstream candidate d is a forward-only
// version writing its incumbent's (production) table.
func retainsProduction(st *projections.State, d events.Candidate, child *projections.Snapshot) bool {
	if child.Kind != events.ForwardOnly || d.Incumbent == "" {
		return false
	}
	inc, ok := st.Snapshots[d.Incumbent]
	return ok && inc.Table == d.Table
}

// inUnit widens r to the unit of sn.
func inUnit(sn *projections.Snapshot, r interval.Range) interval.Range {
	u := sn.Schedule.Unit()
	return interval.R(u.Floor(r.Start), u.Ceil(r.End))
}

// descendants returns the plan's candidates downstream of snapshot,
// transitively, in plan order.
func descendants(plan events.PlanBuilt, snapshot string) []events.Candidate {
	reach := map[string]bool{snapshot: true}
	var out []events.Candidate
	for changed := true; changed; {
		changed = false
		for _, c := range plan.Candidates {
			if reach[c.Snapshot] {
				continue
			}
			for _, u := range c.Upstream {
				if reach[u] {
					reach[c.Snapshot], changed = true, true
					out = append(out, c)
					break
				}
			}
		}
	}
	order := map[string]int{}
	for i, c := range plan.Candidates {
		order[c.Snapshot] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Snapshot] < order[out[j].Snapshot] })
	return out
}

func appendOnce(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

// Window is the check window of a candidate: [candidate start, incumbent
// frontier now). ok is false when there is nothing to check (no incumbent,
// an incumbent without coverage, or a frontier at or before the start).
func Window(st *projections.State, c events.Candidate) (interval.Range, bool) {
	cand, ok := st.Snapshots[c.Snapshot]
	if !ok || c.Incumbent == "" {
		return interval.Range{}, false
	}
	frontier := st.Frontier(c.Incumbent)
	if frontier.IsZero() {
		return interval.Range{}, false
	}
	start := cand.Schedule.Unit().Floor(cand.Start)
	if !start.Before(frontier) {
		return interval.Range{}, false
	}
	return interval.R(start, frontier), true
}

func planWide(plan events.PlanBuilt, code, message string) Decision {
	d := Decision{Outcome: events.Rejected, Codes: []string{code}, Models: map[string]events.ModelFinding{},
		Findings: []events.Finding{{Code: code, Ranges: []interval.Range{}, Message: message}}}
	for _, c := range plan.Candidates {
		d.Models[c.Model] = events.ModelFinding{Snapshot: c.Snapshot, Codes: []string{code}, Missing: []interval.Range{}}
	}
	return d
}

func finish(plan events.PlanBuilt, vs map[string]*verdict) Decision {
	d := Decision{Models: map[string]events.ModelFinding{}, Findings: []events.Finding{}, Outcome: events.Accepted}
	set := map[string]bool{}
	for _, c := range plan.Candidates {
		v := vs[c.Model]
		d.Models[c.Model] = v.f
		d.Findings = append(d.Findings, v.findings...)
		for _, code := range v.f.Codes {
			set[code] = true
		}
	}
	for c := range set {
		d.Codes = append(d.Codes, c)
		if Rejects(c) {
			d.Outcome = events.Rejected
		}
	}
	sort.Strings(d.Codes)
	return d
}

// Event turns a decision into the PromotionDecided payload recorded for it.
// catchUpSeq is the sequence of the request a retry answers (0 if none).
func (d Decision) Event(plan events.PlanBuilt, seq uint64, at time.Time, generation, catchUpSeq uint64) events.PromotionDecided {
	gen := generation
	if d.Outcome == events.Accepted {
		gen++
	}
	return events.PromotionDecided{
		Plan: plan.Plan, Env: plan.Env, Outcome: d.Outcome, Codes: d.Codes, Models: d.Models,
		EvaluatedAtSeq: seq, EvaluatedAt: at.UTC(), Policy: plan.Policy, Generation: gen,
		Findings: d.Findings, CatchUpSeq: catchUpSeq,
	}
}

// Request turns a decision that NeedsCatchUp into its CatchUpRequested.
func (d Decision) Request(plan events.PlanBuilt, seq uint64, at time.Time) events.CatchUpRequested {
	return events.CatchUpRequested{
		Plan: plan.Plan, Env: plan.Env, EvaluatedAtSeq: seq, EvaluatedAt: at.UTC(), Policy: plan.Policy,
		Work: d.CatchUp, Findings: d.Findings,
	}
}
