// Package policy evaluates a plan's promotion against a projection view. It
// is a pure function: no I/O, no wall clock, no randomness, so a recorded
// decision can be re-evaluated from the stream and must come out the same.
//
// Version 1 implements the strict check: per candidate, against the
// incumbent now, the candidate must cover everything in the window
// [candidate start, incumbent frontier now). Plans that ask for a
// trailing-gap or catch-up bound are rejected with policy_not_available
// until those policies exist.
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
	CodeNoGaps             = "no_gaps"
	CodeMissingIntervals   = "missing_intervals"
	CodeConflictingPlan    = "conflicting_plan"
	CodePolicyNotAvailable = "policy_not_available"
	CodeUnknownSnapshot    = "unknown_snapshot"
	CodeUnsupportedPolicyV = "unsupported_policy_version"
)

var accepting = map[string]bool{CodeNoGaps: true}

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
	if plan.Policy.MaxTrailingGapAdvances > 0 || plan.Policy.MaxCatchUpAdvances > 0 {
		f.Codes = []string{CodePolicyNotAvailable}
		return f
	}
	f.Codes = []string{CodeMissingIntervals}
	return f
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
