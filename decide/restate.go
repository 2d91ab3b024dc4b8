package decide

import (
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// restate decides a restatement (docs/restatement.md states the rules for
// users):
//
//   - The environment must exist and serve the model (else not_found on
//     env or model); a generation given must be the environment's (else
//     stale_generation, as for a scheduler advance).
//   - The ranges asked are widened to whole intervals of the incumbent's
//     unit (SQLMesh restates whole intervals: a start is floored, an end
//     ceiled) and clipped to its start. Its table must cover some of
//     them: restating nothing covered is invalid on ranges (a typo, most
//     likely), and appends nothing.
//   - Every model of the environment downstream of it, transitively, is
//     affected where its own unit's whole intervals overlap an affected
//     range of one of its parents, clipped to its start. The affected
//     ranges flow down whether or not a table covers them: a child of a
//     child is affected through the hole of its parent too.
//   - Per model, the work recomputes its affected intervals that its table
//     covers (invalidated now, with the request) or that are ready and
//     missing (a scheduled computation of them may be reading the data the
//     restatement replaces), as whole intervals of its snapshot's own unit
//     that have ended (a coarser forward-only version's interval still
//     running is invalidated and left to the scheduler).
//     A forward_only incumbent is restated like any other: its intervals
//     are recomputed with its own logic (a restatement is the way to
//     rewrite history on purpose).
//   - A whole kind (full, view, seed; docs/kinds.md) is recomputed whole:
//     its work spans from its start to the end of its affected work or
//     its frontier, whichever is later (projections.State.WorkOf); it
//     invalidates only the affected part its table covered, and that
//     part flows down as for any model.
//
// The events (the request, then one IntervalsInvalidated per table with a
// covered part) are one atomic batch under the whole view's sequence: a
// promotion in between makes the restatement be decided again on the new
// incumbents.
func restate(st *projections.State, c *commands.Restate) (Decision, error) {
	env, ok := st.Envs[c.Env]
	if !ok {
		return Decision{}, commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", c.Env)
	}
	if c.Generation != 0 && c.Generation != env.Generation {
		return Decision{}, commands.Errorf(commands.CodeStaleGeneration, "generation",
			"environment %s is at generation %d, the restatement read generation %d: re-read its incumbents and restate again", c.Env, env.Generation, c.Generation)
	}
	root, ok := st.Snapshots[env.Incumbents[c.Model]]
	if !ok {
		return Decision{}, commands.Errorf(commands.CodeNotFound, "model", "environment %s serves no model %q", c.Env, c.Model)
	}
	req := projections.Restatement(st, c.Env, c.Model, c.Ranges, c.At)
	if len(req.Work) == 0 || req.Work[0].Snapshot != root.Snapshot || len(req.Work[0].Invalidated) == 0 {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "ranges",
			"%s (the incumbent of %s in %s, unit %s) covers nothing of %s: nothing to restate (%s)",
			root.Snapshot, c.Model, c.Env, root.Schedule.Unit(), describeRanges(req.Ranges), describeCoverage(st.Table(root.Table)))
	}
	req.EvaluatedAtSeq = st.Seq
	req.Run = events.RestateRunID(c.ID)
	req.Reason = c.Reason
	payloads := []events.Payload{req}
	for _, w := range req.Work {
		if len(w.Invalidated) > 0 {
			payloads = append(payloads, events.IntervalsInvalidated{Snapshot: w.Snapshot, Table: w.Table, Ranges: w.Invalidated, Reason: req.Run})
		}
	}
	n := 0
	for _, w := range req.Work {
		n += len(w.Ranges)
	}
	msg := fmt.Sprintf("restating %s in %s: %d model(s), %d range(s) to recompute as restate work", c.Model, c.Env, len(req.Work), n)
	return Decision{Events: payloads, Expect: events.ExpectStream(st.Seq), Reply: commands.Reply{Restatement: &req, Message: msg}}, nil
}

// StaleRestatement says why the work of restate item id is no longer
// recorded: the environment moved to another generation since the
// restatement read it (a promotion replaced incumbents whose tables it
// writes, as a scheduler advance of an older generation is fenced); ""
// when it is wanted, or id is no restatement's. A worker checks it before
// writing (sqlrun.Runner), the engine before recording the completion.
func StaleRestatement(st *projections.State, id string) string {
	r := st.Restatements[id]
	if r == nil {
		return ""
	}
	if g := st.Env(r.Env).Generation; g != r.Generation {
		return fmt.Sprintf("restate work %s read environment %s at generation %d; it is at generation %d now: restate again on its incumbents", id, r.Env, r.Generation, g)
	}
	return ""
}

// notStale refuses a completion of stale restate work (StaleRestatement):
// stale_generation, which a worker does not retry (work.Transient).
func notStale(st *projections.State, work string) error {
	if why := StaleRestatement(st, work); why != "" {
		return commands.Errorf(commands.CodeStaleGeneration, "work", "%s", why)
	}
	return nil
}

// describeRanges is s for a message, at most 10 of its ranges.
func describeRanges(s interval.Set) string {
	if s.Empty() {
		return "nothing"
	}
	if len(s) > 10 {
		return strings.Join(s[:10].Strings(), ", ") + fmt.Sprintf(" and %d more range(s)", len(s)-10)
	}
	return strings.Join(s.Strings(), ", ")
}

// describeCoverage says what a table covers, in one bounded phrase.
func describeCoverage(cov interval.Set) string {
	if cov.Empty() {
		return "its table covers nothing yet"
	}
	return fmt.Sprintf("its table covers %d range(s) within %s", len(cov), interval.R(cov.Start(), cov.Frontier()))
}
