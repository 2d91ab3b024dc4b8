package decide

import (
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// promote evaluates a plan's promotion with the policy it was built with
// and records the decision, or, under bounded catch-up, the catch-up
// request (with the invalidations of the downstream intervals it
// recomputes, in one atomic batch). While a request's work is outstanding
// the strict retry is refused, unless the plan conflicts by now. A plan may
// be promoted again with a new command id: it is evaluated like any plan
// (once its own acceptance moved the env generation, it is rejected
// conflicting_plan). Decisions read the whole view, so they are appended
// only if nothing at all changed since it was read.
func promote(st *projections.State, c *commands.Promote) (Decision, error) {
	pl, ok := st.Plans[c.Plan]
	if !ok {
		return Decision{}, commands.Errorf(commands.CodeNotFound, "plan", "unknown plan %q", c.Plan)
	}
	if err := policy.Supported(pl.Built.Policy); err != nil {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "plan", "plan %q: %v", c.Plan, err)
	}
	gen := st.Env(pl.Built.Env).Generation
	if pl.CatchUpOpen() {
		d := policy.Retry(st, pl.Built, *pl.CatchUp)
		// A cancelled plan's catch-up work will not be computed: its
		// retry is evaluated now, and reports what is missing.
		if left := Outstanding(st, *pl.CatchUp); len(left) > 0 && !d.Conflicting() && pl.Cancelled == nil {
			return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q is catching up (requested at seq %d): %s still to compute before the strict retry", c.Plan, pl.CatchUpSeq, describeWork(left))
		}
		return decided(st, d.Event(pl.Built, st.Seq, c.At, gen, pl.CatchUpSeq)), nil
	}
	d := policy.Evaluate(st, pl.Built)
	if d.NeedsCatchUp() {
		req := d.Request(pl.Built, st.Seq, c.At)
		payloads := []events.Payload{req}
		for _, w := range req.Work {
			if len(w.Recompute) > 0 {
				payloads = append(payloads, events.IntervalsInvalidated{Snapshot: w.Snapshot, Table: w.Table, Ranges: w.Recompute, Reason: events.PlanRunID(events.RunCatchUp, c.Plan)})
			}
		}
		return Decision{Events: payloads, Expect: events.ExpectStream(st.Seq), Reply: commands.Reply{CatchUp: &req}}, nil
	}
	return decided(st, d.Event(pl.Built, st.Seq, c.At, gen, 0)), nil
}

func decided(st *projections.State, ev events.PromotionDecided) Decision {
	return Decision{Events: []events.Payload{ev}, Expect: events.ExpectStream(st.Seq), Reply: commands.Reply{Decision: &ev}}
}

// Outstanding returns the catch-up work of req that is not computed yet:
// per model, what its table still misses of Ranges and Recompute; for a
// whole kind, anything missing is the whole object's work again (it is
// never computed in part: projections.State.WorkOf).
func Outstanding(st *projections.State, req events.CatchUpRequested) []events.CatchUpWork {
	var out []events.CatchUpWork
	for _, w := range req.Work {
		todo := interval.NewSet(w.Ranges...).AddSet(w.Recompute)
		var left interval.Set
		for _, r := range todo {
			left = left.AddSet(st.Table(w.Table).Missing(r))
		}
		if sn, ok := st.Snapshots[w.Snapshot]; ok && sn.Kind.Whole() && !left.Empty() {
			left = st.WorkOf(sn, todo)
		}
		if !left.Empty() {
			w.Ranges, w.Recompute = left, nil
			out = append(out, w)
		}
	}
	return out
}

func describeWork(ws []events.CatchUpWork) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%s %s", w.Snapshot, strings.Join(interval.Set(w.Ranges).Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}

// finalize marks an accepted plan's environment finalized, while the env
// is still at the generation the acceptance set.
func finalize(st *projections.State, c *commands.Finalize) (Decision, error) {
	pl, ok := st.Plans[c.Plan]
	if !ok {
		return Decision{}, commands.Errorf(commands.CodeNotFound, "plan", "unknown plan %q", c.Plan)
	}
	if !pl.Accepted() {
		return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q has not been promoted", c.Plan)
	}
	if pl.Finalized {
		return Decision{Reply: commands.Reply{Message: "already finalized"}}, nil
	}
	env := st.Env(pl.Built.Env)
	if env.Generation != pl.AcceptedGeneration {
		return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "environment %s moved to generation %d after plan %q was promoted", env.Name, env.Generation, c.Plan)
	}
	return single(st, events.EnvironmentFinalized{Env: pl.Built.Env, Plan: c.Plan, Generation: env.Generation}), nil
}

// cancelPlan ends a plan's outstanding work (PlanCancelled). Unknown: not
// found; promoted or cancelled already: conflict. Its promotion is not
// changed: evaluated as any plan's, it reports what the plan misses.
func cancelPlan(st *projections.State, c *commands.CancelPlan) (Decision, error) {
	pl, ok := st.Plans[c.Plan]
	switch {
	case !ok:
		return Decision{}, commands.Errorf(commands.CodeNotFound, "plan", "unknown plan %q", c.Plan)
	case pl.Accepted():
		return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q was promoted at seq %d: it has no outstanding work to cancel", c.Plan, pl.AcceptedSeq)
	case pl.Cancelled != nil:
		return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q was cancelled already, at seq %d", c.Plan, pl.CancelledSeq)
	}
	return single(st, events.PlanCancelled{Plan: c.Plan, Env: pl.Built.Env, Reason: c.Reason}), nil
}
