// Package policy evaluates a plan's promotion against a projection view. It
// is a pure function: no I/O, no wall clock, no randomness, so a recorded
// decision can be re-evaluated from the stream and must come out the same.
//
// Version 1 implements the strict check and the trailing-gap allowance:
// per candidate, against the incumbent now, the candidate must cover
// everything in the window [candidate start, incumbent frontier now), or,
// with max_trailing_gap_advances N > 0, may miss one contiguous trailing
// suffix produced by at most N scheduler advances after plan build, when
// the schedule is unchanged, history is complete, both frontiers are
// cron-tick boundaries and no downstream candidate already computed
// intervals overlapping the suffix. Bounded catch-up needs the engine to
// backfill before a retry; plans that ask for it are rejected with
// policy_not_available until it exists.
package policy

import (
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
	CodePolicyNotAvailable     = "policy_not_available"
	CodeUnknownSnapshot        = "unknown_snapshot"
	CodeUnsupportedPolicyV     = "unsupported_policy_version"
)

var accepting = map[string]bool{CodeNoGaps: true, CodeTrailingGapAccepted: true, CodeForwardOnlyOverlapKept: true}

// Rejects reports whether a code fails a promotion.
func Rejects(code string) bool { return !accepting[code] }

// Decision is the outcome of evaluating a plan.
type Decision struct {
	Outcome events.Outcome
	// Codes is the sorted union of every candidate's codes.
	Codes  []string
	Models map[string]events.ModelFinding
}

// Evaluate runs the promotion check of plan against the view st.
func Evaluate(st *projections.State, plan events.PlanBuilt) Decision {
	if plan.Policy.Version > Version {
		return planWide(plan, CodeUnsupportedPolicyV)
	}
	env := st.Env(plan.Env)
	if env.Generation != plan.Generation {
		return planWide(plan, CodeConflictingPlan)
	}
	for _, c := range plan.Candidates {
		if env.Incumbents[c.Model] != c.Incumbent {
			return planWide(plan, CodeConflictingPlan)
		}
	}
	d := Decision{Models: map[string]events.ModelFinding{}}
	for _, c := range plan.Candidates {
		d.Models[c.Model] = checkCandidate(st, plan, c)
	}
	return finish(d)
}

func checkCandidate(st *projections.State, plan events.PlanBuilt, c events.Candidate) events.ModelFinding {
	f := events.ModelFinding{Snapshot: c.Snapshot, Missing: []interval.Range{}}
	cand, ok := st.Snapshots[c.Snapshot]
	if !ok {
		f.Codes = []string{CodeUnknownSnapshot}
		return f
	}
	window, ok := Window(st, c)
	if !ok {
		f.Codes = []string{CodeNoGaps}
		return f
	}
	missing := st.Table(cand.Table).Missing(window)
	if missing.Empty() {
		f.Codes = []string{CodeNoGaps}
		return f
	}
	f.Missing = missing
	last := missing[len(missing)-1]
	if last.End.Equal(window.End) {
		if inc, ok := st.Snapshots[c.Incumbent]; ok {
			f.Advances = inc.Schedule.Advances(last.Start, last.End)
		}
	}
	switch {
	case plan.Policy.MaxCatchUpAdvances > 0:
		f.Codes = []string{CodePolicyNotAvailable}
	case plan.Policy.MaxTrailingGapAdvances > 0:
		f = trailingGap(st, plan, c, cand, window, missing, f)
	default:
		f.Codes = []string{CodeMissingIntervals}
	}
	return f
}

// trailingGap judges a miss under the trailing-gap allowance; the first
// failing condition gives the code.
func trailingGap(st *projections.State, plan events.PlanBuilt, c events.Candidate, cand *projections.Snapshot, window interval.Range, missing interval.Set, f events.ModelFinding) events.ModelFinding {
	inc := st.Snapshots[c.Incumbent]
	captured, err := interval.NewSchedule(c.IncumbentCron, c.IncumbentUnit, c.IncumbentAllowPartials)
	switch {
	case err != nil || !captured.Same(inc.Schedule) || !captured.Same(cand.Schedule):
		f.Codes = []string{CodeScheduleChanged}
		return f
	case window.Start.Before(c.IncumbentFrontier) && missing.Overlaps(interval.R(window.Start, c.IncumbentFrontier)):
		f.Codes = []string{CodeHistoricalGap}
		return f
	case !missing.IsSuffix(window.End):
		f.Codes = []string{CodeInternalGap}
		return f
	case !captured.IsBoundary(c.IncumbentFrontier) || !captured.IsBoundary(window.End):
		f.Codes = []string{CodeAmbiguousBoundary}
		return f
	case f.Advances > plan.Policy.MaxTrailingGapAdvances:
		f.Codes = []string{CodeTrailingGapExceeds}
		return f
	}
	suffix := missing[0]
	for _, d := range descendants(plan, c.Snapshot) {
		child, ok := st.Snapshots[d.Snapshot]
		if !ok {
			continue
		}
		u := child.Schedule.Unit()
		inUnit := interval.R(u.Floor(suffix.Start), u.Ceil(suffix.End))
		if !st.Table(d.Table).Overlaps(inUnit) {
			continue
		}
		if child.Kind == events.ForwardOnly && d.Incumbent != "" && st.Snapshots[d.Incumbent] != nil && st.Snapshots[d.Incumbent].Table == d.Table {
			f.Codes = appendOnce(f.Codes, CodeForwardOnlyOverlapKept)
			continue
		}
		f.Codes = []string{CodeDownstreamOverlap}
		return f
	}
	f.Codes = append([]string{CodeTrailingGapAccepted}, f.Codes...)
	return f
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
	return out
}

func appendOnce(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
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

func planWide(plan events.PlanBuilt, code string) Decision {
	d := Decision{Outcome: events.Rejected, Codes: []string{code}, Models: map[string]events.ModelFinding{}}
	for _, c := range plan.Candidates {
		d.Models[c.Model] = events.ModelFinding{Snapshot: c.Snapshot, Codes: []string{code}, Missing: []interval.Range{}}
	}
	return d
}

func finish(d Decision) Decision {
	set := map[string]bool{}
	for _, f := range d.Models {
		for _, c := range f.Codes {
			set[c] = true
		}
	}
	d.Outcome = events.Accepted
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
func (d Decision) Event(plan events.PlanBuilt, seq uint64, at time.Time, generation uint64) events.PromotionDecided {
	gen := generation
	if d.Outcome == events.Accepted {
		gen++
	}
	return events.PromotionDecided{
		Plan: plan.Plan, Env: plan.Env, Outcome: d.Outcome, Codes: d.Codes, Models: d.Models,
		EvaluatedAtSeq: seq, EvaluatedAt: at.UTC(), Policy: plan.Policy, Generation: gen,
	}
}
