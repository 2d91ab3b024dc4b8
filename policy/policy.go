// Package policy evaluates a plan's promotion against a projection view. It
// is a pure function: no I/O, no wall clock, no randomness, so a recorded
// decision can be re-evaluated from the stream and must come out the same.
//
// It implements the three policies of DESIGN.md. Per candidate, against
// the incumbent now, the candidate must cover everything in the window
// [candidate start, incumbent frontier now) (strict; with no incumbent
// coverage to match, its own backfill set: nothing is promoted empty), or,
// with a bound > 0, may miss one contiguous trailing suffix produced by at
// most N scheduler advances after plan build when the schedule is
// unchanged, history is complete and both frontiers are cron-tick
// boundaries. Under
// the trailing-gap allowance the suffix is accepted and stays missing
// (repair debt) unless a downstream candidate already computed intervals
// overlapping it. Under bounded catch-up, Evaluate asks the engine to
// backfill the suffix (and recompute overlapping downstream intervals);
// Retry then re-checks every candidate strictly, and the allowance, when
// set too, judges whatever is still missing.
//
// Importers: decide, replay, bench.
package policy

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Version is the policy rule set this build evaluates. Version 2 is
// DESIGN.md's amended contract: forward-only candidates on their
// incumbent's table, no captured frontier for an incumbent without
// coverage, the complete code list, every downstream overlap reported,
// repair work with the acceptance. Version 3 adds the amendment of
// 2026-12-04: nothing is promoted empty (a candidate with no incumbent, or
// whose incumbent has no coverage now, is checked against its own backfill
// set). Version 4 (issue 30) judges audits: a candidate with a failed
// blocking audit on a range of its check window is rejected audit_failed,
// a failed non-blocking one warns audit_warning; a version-3 build reading
// a log with audit results would skip them and decide otherwise. This
// build has no other version's rules: a decision recorded under an older
// version cannot be re-checked, and a plan built under one is rebuilt,
// not promoted.
const Version = 4

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
	// CodeAuditFailed (rejecting) and CodeAuditWarning (a warning) are for
	// models that declare audits: a failed blocking, or non-blocking,
	// audit on a range of the candidate's check window (judgeAudits).
	CodeAuditFailed  = "audit_failed"
	CodeAuditWarning = "audit_warning"
)

// Codes that only appear in the findings of a catch-up request, never in a
// decision.
const (
	// CodeCatchUpRequested: the candidate's suffix is backfilled before the
	// strict retry.
	CodeCatchUpRequested = "catch_up_requested"
	// CodeCatchUpRecompute: complete downstream intervals overlapping an
	// upstream suffix are invalidated and recomputed.
	CodeCatchUpRecompute = "catch_up_recompute"
)

// AcceptedCodes are the only codes an accepted decision carries;
// RejectedCodes the only ones a rejected decision carries (DESIGN.md,
// "Decision codes"). The warnings forward_only_overlap_retained and
// audit_warning are in both.
var (
	AcceptedCodes = []string{CodeNoGaps, CodeCaughtUp, CodeTrailingGapAccepted, CodeForwardOnlyOverlapKept, CodeAuditWarning}
	RejectedCodes = []string{CodeConflictingPlan, CodeMissingIntervals, CodeScheduleChanged, CodeHistoricalGap,
		CodeInternalGap, CodeAmbiguousBoundary, CodeTrailingGapExceeds, CodeDownstreamOverlap, CodeCatchUpExhausted,
		CodeAuditFailed, CodeForwardOnlyOverlapKept, CodeAuditWarning}
)

// passing codes say a candidate passed; they appear only when the whole
// decision is accepted.
var passing = map[string]bool{CodeNoGaps: true, CodeTrailingGapAccepted: true, CodeCaughtUp: true}

// warningCodes neither pass nor fail a candidate; they appear in either
// outcome.
var warningCodes = map[string]bool{CodeForwardOnlyOverlapKept: true, CodeAuditWarning: true}

// Rejects reports whether a code fails a promotion: any code but the
// passing ones and the warnings.
func Rejects(code string) bool { return !passing[code] && !warningCodes[code] }

// Supported reports whether this build can evaluate pol: an error naming
// the version when the plan was built under other rules (a plan built by
// an older build is rebuilt, not promoted under rules it was not built
// for).
func Supported(pol events.Policy) error {
	if pol.Version != Version {
		return fmt.Errorf("the plan was built under policy version %d; this build evaluates version %d only", pol.Version, Version)
	}
	return nil
}

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
	// Repairs is the repair work an acceptance with a gap issues.
	Repairs []events.RepairWork
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

func (v *verdict) rejects() bool {
	for _, c := range v.f.Codes {
		if Rejects(c) {
			return true
		}
	}
	return false
}

// Evaluate runs the promotion check of plan against the view st. Under
// bounded catch-up it may return a Decision that NeedsCatchUp instead of a
// verdict. The caller checks Supported(plan.Policy) first.
func Evaluate(st *projections.State, plan events.PlanBuilt) Decision {
	if d, ok := planWideCheck(st, plan); !ok {
		return d
	}
	vs := map[string]*verdict{}
	anyEligible, anyReject := false, false
	for _, c := range plan.Candidates {
		v := checkCandidate(st, plan, c)
		judgeAudits(st, c, v)
		vs[c.Model] = v
		anyEligible = anyEligible || v.eligible
		anyReject = anyReject || v.rejects()
	}
	if anyEligible && !anyReject {
		return catchUp(st, plan, vs)
	}
	return finish(st, plan, vs)
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
		if sn, ok := st.Snapshots[w.Snapshot]; ok && sn.Kind.Whole() && len(w.Ranges) > 0 {
			// A whole kind's work is the whole object: its caught-up
			// suffix is what the request found missing.
			w.Ranges = requestedSuffix(req, w)
		}
		work[w.Model] = w
	}
	vs := map[string]*verdict{}
	for _, c := range plan.Candidates {
		vs[c.Model] = retryCandidate(st, plan, c, work[c.Model])
		judgeAudits(st, c, vs[c.Model])
	}
	// The forward-only downstream candidates on the production table keep
	// their rows over a caught-up suffix: the parent says so.
	for _, c := range plan.Candidates {
		if w := work[c.Model]; len(w.Ranges) > 0 {
			_, warnings := overlaps(st, plan, c, interval.NewSet(w.Ranges...))
			for _, fd := range warnings {
				vs[c.Model].add(fd.Code, fd)
			}
		}
	}
	return finish(st, plan, vs)
}

// requestedSuffix is the suffix req found missing for w's candidate (its
// catch_up_requested finding), or w's ranges when it has none.
func requestedSuffix(req events.CatchUpRequested, w events.CatchUpWork) []interval.Range {
	for _, fd := range req.Findings {
		if fd.Code == CodeCatchUpRequested && fd.Snapshot == w.Snapshot {
			return fd.Ranges
		}
	}
	return w.Ranges
}

// Conflicting reports whether d rejects the plan as a whole
// (conflicting_plan).
func (d Decision) Conflicting() bool { return slices.Contains(d.Codes, CodeConflictingPlan) }

// planWideCheck applies the checks that reject the plan as a whole.
func planWideCheck(st *projections.State, plan events.PlanBuilt) (Decision, bool) {
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

// measure computes a candidate's window and what it misses in it. ok is
// false when the candidate is not gap-checked against a window: v then
// holds its verdict (unchanged, on its incumbent's table, or checked
// against its own backfill set, see unmatched).
func measure(st *projections.State, pol events.Policy, c events.Candidate) (v *verdict, window interval.Range, missing interval.Set, ok bool) {
	v = &verdict{f: events.ModelFinding{Snapshot: c.Snapshot, Missing: []interval.Range{}}}
	if c.Snapshot == c.Incumbent {
		return v, window, nil, false // unchanged: nothing to say
	}
	if inc, found := st.Snapshots[c.Incumbent]; found && inc.Table == c.Table {
		v.add(CodeNoGaps, events.Finding{Related: c.Incumbent,
			Message: sprintf("%s writes %s's table %s, so it shares its coverage: nothing to backfill or check", c.Snapshot, c.Incumbent, c.Table)})
		return v, window, nil, false
	}
	window, has := Window(st, c)
	if !has {
		if c.Incumbent == "" || st.Frontier(c.Incumbent).IsZero() {
			unmatched(st, pol, c, v)
			return v, window, nil, false
		}
		v.add(CodeNoGaps, events.Finding{Related: c.Incumbent,
			Message: sprintf("%s starts at or after %s's frontier %s: its check window is empty", c.Snapshot, c.Incumbent, ts(st.Frontier(c.Incumbent)))})
		return v, window, nil, false
	}
	missing = st.Table(c.Table).Missing(window)
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

// unmatched checks a candidate with no incumbent, or whose incumbent has no
// coverage now, against its own backfill set (fixed at build): nothing is
// promoted empty. It passes no_gaps when its table covers the set (an
// empty set passes); otherwise it is rejected, missing_intervals under the
// strict policy and historical_gap with a bound > 0 (no incumbent suffix
// can explain the miss), with what it lacks as missing and no advances.
func unmatched(st *projections.State, pol events.Policy, c events.Candidate, v *verdict) {
	var missing interval.Set
	for _, r := range c.Backfill {
		missing = missing.AddSet(st.Table(c.Table).Missing(r))
	}
	if missing.Empty() {
		v.add(CodeNoGaps, events.Finding{Related: c.Incumbent, Message: sprintf("%s has no incumbent coverage to match", c.Snapshot)})
		return
	}
	v.f.Missing = missing
	what := sprintf("%s misses %s of its backfill set; with no incumbent coverage to match, nothing is promoted empty", c.Snapshot, ranges(missing))
	if pol.MaxTrailingGapAdvances == 0 && pol.MaxCatchUpAdvances == 0 {
		v.add(CodeMissingIntervals, events.Finding{Related: c.Incumbent, Ranges: missing, Message: what + "; the strict policy allows no gap"})
		return
	}
	v.add(CodeHistoricalGap, events.Finding{Related: c.Incumbent, Ranges: missing,
		Message: what + "; the bounds admit only a trailing suffix of the incumbent's coverage, and there is none"})
}

// judgeAudits adds, after the coverage check, the candidate's audit codes:
// audit_failed for each blocking audit whose latest result failed on a
// range of its check window (AuditWindow), audit_warning for each
// non-blocking one; each finding names the audit, the failed ranges in
// the window and the violating rows of the failing results latest there.
func judgeAudits(st *projections.State, c events.Candidate, v *verdict) {
	for _, f := range st.FailedAudits(c.Snapshot, AuditWindow(st, c)) {
		code, what := CodeAuditWarning, "non-blocking audit"
		if f.Blocking {
			code, what = CodeAuditFailed, "blocking audit"
		}
		result := sprintf("%d violating rows in the failing batches", f.Count)
		if f.Count == 1 {
			result = "1 violating row in the failing batches"
		}
		if f.Error != "" {
			result = sprintf("it could not run: %s", f.Error)
		}
		consequence := "it only warns"
		if f.Blocking {
			consequence = "recompute those intervals with rows that pass it, or register a version whose audit holds"
		}
		v.add(code, events.Finding{Ranges: f.Ranges, Audit: f.Audit, Count: f.Count,
			Message: sprintf("model %s: %s's %s %s failed on %s within its check window (%s); %s", v.model(), c.Snapshot, what, f.Audit, ranges(f.Ranges), result, consequence)})
	}
}

// AuditWindow is the part of time a candidate's audits are judged over:
// its check window (Window) or, with no incumbent coverage to match, its
// backfill set, as the coverage check reads them; nothing for a candidate
// that is its incumbent (the plan set it unchanged).
func AuditWindow(st *projections.State, c events.Candidate) interval.Set {
	if c.Snapshot == c.Incumbent {
		return nil
	}
	if w, ok := Window(st, c); ok {
		return interval.NewSet(w)
	}
	if c.Incumbent == "" || st.Frontier(c.Incumbent).IsZero() {
		return interval.NewSet(c.Backfill...)
	}
	return nil
}

func checkCandidate(st *projections.State, plan events.PlanBuilt, c events.Candidate) *verdict {
	v, window, missing, ok := measure(st, plan.Policy, c)
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
	v, window, missing, ok := measure(st, plan.Policy, c)
	if !ok {
		return v
	}
	if missing.Empty() {
		if len(w.Ranges) > 0 {
			v.add(CodeCaughtUp, events.Finding{Related: c.Incumbent, Ranges: w.Ranges, Advances: w.Advances,
				Message: sprintf("%s caught up: its suffix %s was computed before the strict retry, which passed", c.Snapshot, ranges(w.Ranges))})
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
// one gives the code. It reports whether all hold. An incumbent that had no
// coverage at build has no captured frontier: the historical-gap check and
// the captured half of the boundary check do not apply.
func safeSuffix(st *projections.State, c events.Candidate, window interval.Range, missing interval.Set, v *verdict) bool {
	inc := st.Snapshots[c.Incumbent]
	cand := st.Snapshots[c.Snapshot]
	captured, err := interval.NewSchedule(c.IncumbentCron, c.IncumbentUnit, c.IncumbentAllowPartials)
	hasCaptured := !c.IncumbentFrontier.IsZero()
	switch {
	case err != nil || inc == nil || cand == nil || !captured.Same(inc.Schedule) || !captured.Same(cand.Schedule):
		v.add(CodeScheduleChanged, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("%s runs on %s and %s on %s, but the plan captured %s at build: advances cannot be compared across schedules",
				c.Snapshot, schedOfSnap(cand), c.Incumbent, schedOfSnap(inc), schedOf(c.IncumbentCron, c.IncumbentUnit))})
		return false
	case hasCaptured && window.Start.Before(c.IncumbentFrontier) && missing.Overlaps(interval.R(window.Start, c.IncumbentFrontier)):
		hist := missing.Clip(interval.R(window.Start, c.IncumbentFrontier))
		v.add(CodeHistoricalGap, events.Finding{Related: c.Incumbent, Ranges: hist,
			Message: sprintf("%s misses %s before the frontier %s captured at plan build; only a trailing suffix can be allowed", c.Snapshot, ranges(hist), ts(c.IncumbentFrontier))})
		return false
	case !missing.IsSuffix(window.End):
		v.add(CodeInternalGap, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("%s misses %s: not one contiguous suffix ending at the incumbent frontier %s", c.Snapshot, ranges(missing), ts(window.End))})
		return false
	case (hasCaptured && !captured.IsBoundary(c.IncumbentFrontier)) || !captured.IsBoundary(window.End):
		v.add(CodeAmbiguousBoundary, events.Finding{Related: c.Incumbent, Ranges: missing,
			Message: sprintf("the captured frontier %s or the current frontier %s of %s is not a cron-tick boundary of %s, so the advances that made the gap cannot be counted",
				ts(c.IncumbentFrontier), ts(window.End), c.Incumbent, schedOf(c.IncumbentCron, c.IncumbentUnit))})
		return false
	}
	return true
}

// allowance judges a safe suffix under the trailing-gap bound and the
// downstream guard, which checks every transitive downstream candidate and
// reports all overlaps and warnings.
func allowance(st *projections.State, plan events.PlanBuilt, c events.Candidate, missing interval.Set, v *verdict) {
	pol := plan.Policy
	if v.f.Advances > pol.MaxTrailingGapAdvances {
		bound := max(pol.MaxTrailingGapAdvances, pol.MaxCatchUpAdvances)
		v.add(CodeTrailingGapExceeds, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
			Message: sprintf("%s misses %s, produced by %s after plan build; the bound is %d", c.Snapshot, ranges(missing), advances(v.f.Advances), bound)})
		return
	}
	blocking, warnings := overlaps(st, plan, c, missing)
	for _, fd := range blocking {
		v.add(fd.Code, fd)
	}
	if len(blocking) == 0 {
		v.add(CodeTrailingGapAccepted, events.Finding{Related: c.Incumbent, Ranges: missing, Advances: v.f.Advances,
			Message: sprintf("%s misses the trailing suffix %s, produced by %s after plan build (bound %d); it stays missing and is tracked as repair debt",
				c.Snapshot, ranges(missing), advances(v.f.Advances), pol.MaxTrailingGapAdvances)})
	}
	for _, fd := range warnings {
		v.add(fd.Code, fd)
	}
}

// overlaps finds the transitive downstream candidates of c whose tables
// hold coverage overlapping gap: downstream_overlap findings for those
// that would be served rows built without the parent's data, and
// forward_only_overlap_retained warnings for forward-only ones on the
// production table, which keep their historical rows by design.
func overlaps(st *projections.State, plan events.PlanBuilt, c events.Candidate, gap interval.Set) (blocking, warnings []events.Finding) {
	for _, d := range descendants(plan, c.Snapshot) {
		child, ok := st.Snapshots[d.Snapshot]
		if !ok {
			continue
		}
		var overlap interval.Set
		for _, g := range gap {
			overlap = overlap.AddSet(st.Table(d.Table).Clip(inUnit(child, g)))
		}
		if overlap.Empty() {
			continue
		}
		if retainsProduction(st, d) {
			warnings = append(warnings, events.Finding{Code: CodeForwardOnlyOverlapKept, Model: c.Model, Snapshot: c.Snapshot, Related: d.Snapshot, Ranges: overlap,
				Message: sprintf("downstream candidate %s writes its incumbent's (production) table and keeps its historical rows there over %s, overlapping %s's gap; they are retained by design", d.Snapshot, ranges(overlap), c.Snapshot)})
			continue
		}
		blocking = append(blocking, events.Finding{Code: CodeDownstreamOverlap, Model: c.Model, Snapshot: c.Snapshot, Related: d.Snapshot, Ranges: overlap,
			Message: sprintf("downstream candidate %s already computed %s, overlapping %s's gap %s: those rows were built without the parent's data", d.Snapshot, ranges(overlap), c.Snapshot, ranges(gap))})
	}
	return blocking, warnings
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
			if !ok || retainsProduction(st, d) {
				continue
			}
			if overlap := st.Table(d.Table).Clip(inUnit(child, suffix)); !overlap.Empty() {
				// A whole kind is invalidated and recomputed whole
				// (projections.State.WorkOf).
				recompute[d.Model] = recompute[d.Model].AddSet(st.WorkOf(child, overlap))
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
				w.Ranges = st.WorkOf(sn, v.f.Missing)
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

// retainsProduction reports whether downstream candidate d writes its
// incumbent's (production) table: a forward-only version, or the incumbent
// itself set again by the plan. Its rows stay in place: catch-up never
// invalidates them, and an overlap is a warning, not a rejection.
func retainsProduction(st *projections.State, d events.Candidate) bool {
	if d.Incumbent == "" {
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
// frontier now). ok is false when there is none: no incumbent or an
// incumbent without coverage now (the candidate is then checked against
// its own backfill set instead), or a frontier at or before the start
// (nothing to check).
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

// finish turns the candidates' verdicts into the decision. It is rejected
// when any candidate's code rejects; then the passing codes (no_gaps,
// trailing_gap_accepted, caught_up) and their findings are dropped, so a
// rejected decision carries only rejecting codes and warnings, and each
// model's missing ranges stay. An acceptance with a gap issues its repair
// work, in plan (dependency) order.
func finish(st *projections.State, plan events.PlanBuilt, vs map[string]*verdict) Decision {
	d := Decision{Models: map[string]events.ModelFinding{}, Findings: []events.Finding{}, Outcome: events.Accepted}
	for _, c := range plan.Candidates {
		if vs[c.Model].rejects() {
			d.Outcome = events.Rejected
		}
	}
	set := map[string]bool{}
	for _, c := range plan.Candidates {
		v := vs[c.Model]
		f := v.f
		if f.Codes == nil {
			f.Codes = []string{}
		}
		if d.Outcome == events.Rejected {
			f.Codes = slices.DeleteFunc(slices.Clone(f.Codes), func(code string) bool { return passing[code] })
		}
		d.Models[c.Model] = f
		for _, fd := range v.findings {
			if d.Outcome == events.Accepted || !passing[fd.Code] {
				d.Findings = append(d.Findings, fd)
			}
		}
		for _, code := range f.Codes {
			set[code] = true
		}
		if d.Outcome == events.Accepted && len(f.Missing) > 0 {
			w := events.RepairWork{Model: c.Model, Snapshot: c.Snapshot, Table: c.Table, Ranges: f.Missing}
			if sn, ok := st.Snapshots[c.Snapshot]; ok {
				w.Ranges = st.WorkOf(sn, f.Missing)
			}
			d.Repairs = append(d.Repairs, w)
		}
	}
	d.Codes = []string{}
	for c := range set {
		d.Codes = append(d.Codes, c)
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
		Findings: d.Findings, CatchUpSeq: catchUpSeq, Repairs: d.Repairs,
	}
}

// Request turns a decision that NeedsCatchUp into its CatchUpRequested.
func (d Decision) Request(plan events.PlanBuilt, seq uint64, at time.Time) events.CatchUpRequested {
	return events.CatchUpRequested{
		Plan: plan.Plan, Env: plan.Env, EvaluatedAtSeq: seq, EvaluatedAt: at.UTC(), Policy: plan.Policy,
		Work: d.CatchUp, Findings: d.Findings,
	}
}
