package views

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// MaxNextStepAdvances bounds the allowances NextSteps tries: a gap wider
// than this many advances is not worth a policy, it wants its backfill.
const MaxNextStepAdvances = 64

// NextStep is something an operator can do about a rejected promotion.
type NextStep struct {
	// Text says what, and why it would help.
	Text string
	// Command is the command to run ("" when none fits).
	Command string
}

// NextSteps says what to do about the rejected decision d, on the view
// it was evaluated on (st: the stream folded to d.EvaluatedAtSeq): the
// smallest trailing-gap allowance (policy.Evaluate, re-run with it)
// that would have accepted the plan on that view, the smallest
// catch-up bound that would have caught it up, and, by its codes, the
// work or rebuild it wants. Nil for an accepted decision or a plan not
// in st. Pure: the same view and decision give the same steps.
func NextSteps(st *projections.State, d events.PromotionDecided) []NextStep {
	pl := st.Plans[d.Plan]
	if d.Outcome != events.Rejected || pl == nil {
		return nil
	}
	b := pl.Built
	if err := policy.Supported(d.Policy); err != nil {
		return []NextStep{{Text: "the plan was built under other policy rules (" + err.Error() + "): build it again", Command: planCommand(b, 0, 0)}}
	}
	var out []NextStep
	if n, ok := smallest(st, b, d.Policy, func(p *events.Policy, n int) { p.MaxTrailingGapAdvances = n },
		d.Policy.MaxTrailingGapAdvances, func(r policy.Decision) bool { return !r.NeedsCatchUp() && r.Outcome == events.Accepted }); ok {
		out = append(out, NextStep{
			Text:    fmt.Sprintf("--max-trailing-gap-advances %d would accept this on the same view: the trailing gap stays missing, as repair debt the scheduler computes first", n),
			Command: planCommand(b, n, d.Policy.MaxCatchUpAdvances)})
	}
	if n, ok := smallest(st, b, d.Policy, func(p *events.Policy, n int) { p.MaxCatchUpAdvances = n },
		d.Policy.MaxCatchUpAdvances, func(r policy.Decision) bool { return r.NeedsCatchUp() }); ok {
		out = append(out, NextStep{
			Text:    fmt.Sprintf("--max-catch-up-advances %d would catch this up: the trailing gap is computed first, then the promotion is checked strictly again", n),
			Command: planCommand(b, d.Policy.MaxTrailingGapAdvances, n)})
	}
	codes := map[string]bool{}
	for _, c := range d.Codes {
		codes[c] = true
	}
	switch {
	case codes[policy.CodeConflictingPlan]:
		out = append(out, NextStep{Text: "the environment changed since the plan was built (another promotion or a rollback): build the plan again on it",
			Command: planCommand(b, d.Policy.MaxTrailingGapAdvances, d.Policy.MaxCatchUpAdvances)})
	case codes[policy.CodeMissingIntervals] || codes[policy.CodeHistoricalGap] || codes[policy.CodeInternalGap]:
		out = append(out, NextStep{Text: "the candidates miss " + missing(d) + ": let their backfill finish (`tidemark status` shows the plan's progress; a worker computes it: is one running?), then promote again",
			Command: "tidemark promote " + b.Plan})
	case codes[policy.CodeCatchUpExhausted]:
		out = append(out, NextStep{Text: "the scheduler advanced again during the catch-up: promote again", Command: "tidemark promote " + b.Plan})
	case codes[policy.CodeAuditFailed]:
		out = append(out, NextStep{Text: "a blocking audit failed on the candidates' rows: fix the data they read and restate the failed ranges (or make the audit non-blocking in a new version), then promote again",
			Command: "tidemark audit explain " + b.Plan})
	case codes[policy.CodeScheduleChanged]:
		out = append(out, NextStep{Text: "the incumbent's schedule changed since the plan was built: no allowance applies; build the plan again",
			Command: planCommand(b, 0, 0)})
	}
	return out
}

// smallest is the smallest bound n, from above the plan's own up to
// MaxNextStepAdvances, whose policy (set) makes policy.Evaluate of b on
// st pass ok.
func smallest(st *projections.State, b events.PlanBuilt, pol events.Policy, set func(*events.Policy, int), from int, ok func(policy.Decision) bool) (int, bool) {
	for n := from + 1; n <= MaxNextStepAdvances; n++ {
		b.Policy = pol
		set(&b.Policy, n)
		if ok(policy.Evaluate(st, b)) {
			return n, true
		}
	}
	return 0, false
}

// planCommand is the command that builds b again with the given bounds.
func planCommand(b events.PlanBuilt, trailing, catchUp int) string {
	var set []string
	for _, c := range b.Candidates {
		if !c.Derived {
			_, v, _ := strings.Cut(c.Snapshot, "@")
			set = append(set, c.Model+"="+v)
		}
	}
	sort.Strings(set)
	cmd := "tidemark plan --env " + b.Env + " --set " + strings.Join(set, ",")
	if trailing > 0 {
		cmd += fmt.Sprintf(" --max-trailing-gap-advances %d", trailing)
	}
	if catchUp > 0 {
		cmd += fmt.Sprintf(" --max-catch-up-advances %d", catchUp)
	}
	return cmd
}

// missing is what d's candidates miss, by model.
func missing(d events.PromotionDecided) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(d.Models)) {
		if f := d.Models[m]; len(f.Missing) > 0 {
			parts = append(parts, f.Snapshot+" "+interval.Set(f.Missing).String())
		}
	}
	if len(parts) == 0 {
		return "part of their backfill"
	}
	return strings.Join(parts, ", ")
}
