package projections

import (
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// Restatement is what restating ranges of model in env at clock at
// affects, by the rules decide's restate states (docs/restatement.md for
// users): the work per model, the model first, then its transitively
// downstream models in dependency order, each with something to compute.
// The decision sets the rest (the view's sequence, run id and reason);
// replay decides it again with this same function. Pure.
func Restatement(st *State, env, model string, ranges []interval.Range, at time.Time) events.RestatementRequested {
	e := st.Env(env)
	req := events.RestatementRequested{Env: env, Model: model, Generation: e.Generation}
	root, ok := st.Snapshots[e.Incumbents[model]]
	if !ok {
		return req
	}
	req.Snapshot = root.Snapshot
	inScope := map[string]bool{model: true}
	for _, m := range st.Downstream(env, []string{model}) {
		inScope[m] = true
	}
	affected := map[string]interval.Set{}
	for _, m := range st.DependencyOrder(env) {
		sn, ok := st.Snapshots[e.Incumbents[m]]
		if !ok || !inScope[m] {
			continue
		}
		var from interval.Set
		if m == model {
			from = interval.NewSet(ranges...)
		} else {
			for _, d := range sn.DependsOn {
				from = from.AddSet(affected[d])
			}
		}
		a := clipToStart(sn, sn.Schedule.Work(from))
		affected[m] = a
		if m == model {
			req.Ranges = a
		}
		// A whole kind reads its upstream's tables whole: a restated
		// range of an upstream model recomputes it even where the range
		// lies outside its own window (before its start), invalidating
		// nothing there (docs/kinds.md).
		wholeUp := sn.Kind.Whole() && m != model && !from.Empty()
		if a.Empty() && !wholeUp {
			continue
		}
		cov := st.Table(sn.Table)
		covered := intersect(a, cov)
		todo := covered
		if ready := sn.Schedule.Ready(sn.Start, at); !ready.Empty() {
			todo = todo.AddSet(intersect(a, interval.NewSet(ready)))
		}
		if wholeUp && todo.Empty() {
			todo = cov // computed so far: recomputed whole up to its frontier
		}
		// A whole kind is recomputed whole, from its start (WorkOf); what
		// it invalidates stays the affected part its table covered.
		todo = clipToStart(sn, st.WorkOf(sn, todo))
		// Only intervals that have ended can be computed: one of a unit
		// coarser than the table's coverage (a forward-only version over
		// its predecessor's finer intervals) still running at the clock is
		// invalidated and left to the scheduler, which computes it whole
		// once it is ready.
		if u := sn.Schedule.Unit(); !sn.AllowPartials && !todo.Empty() {
			todo = todo.Clip(interval.R(todo.Start(), u.Floor(at)))
		}
		if todo.Empty() && covered.Empty() {
			continue
		}
		req.Work = append(req.Work, events.RestateWork{Model: m, Snapshot: sn.Snapshot, Table: sn.Table, Ranges: todo, Invalidated: covered})
	}
	return req
}

// clipToStart is set without what lies before the snapshot's start
// (floored to its unit) or after the latest time an event may carry.
func clipToStart(sn *Snapshot, set interval.Set) interval.Set {
	if set.Empty() {
		return nil
	}
	return set.Clip(interval.R(sn.Schedule.Unit().Floor(sn.Start), events.MaxTime))
}

// intersect is a ∩ b.
func intersect(a, b interval.Set) interval.Set {
	if a.Empty() || b.Empty() {
		return nil
	}
	return a.SubtractSet(a.SubtractSet(b))
}
