package decide

import (
	"maps"
	"slices"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// ForeignTable names the incumbent of plan's environment, other than
// snapshot, that serves the table snapshot writes, while plan is not
// accepted; "" when there is none. Plan work (backfill, catch-up) for
// snapshot must not run then: a candidate of a plan not yet promoted never
// writes a table production serves. At build that holds by the rules (a
// forward-only candidate that writes its incumbent's table has no backfill
// and no catch-up), but the environment can move while the plan waits: a
// later plan promotes the same version and a forward-only successor takes
// its table over, and the old plan's backfill would then rewrite
// production's rows with the superseded logic.
func ForeignTable(st *projections.State, plan, snapshot string) string {
	pl, ok := st.Plans[plan]
	sn := st.Snapshots[snapshot]
	if !ok || pl.Accepted() || sn == nil {
		return ""
	}
	incs := st.Env(pl.Built.Env).Incumbents
	for _, model := range slices.Sorted(maps.Keys(incs)) {
		id := incs[model]
		if other := st.Snapshots[id]; id != snapshot && other != nil && other.Table == sn.Table {
			return id
		}
	}
	return ""
}

// ForeignWork is ForeignTable for a run: the incumbent serving the table
// that plan work for snapshot (kind and runID naming a plan's backfill or
// catch-up: events.PlanRunID) would write; "" for any other run. A worker
// checks it before writing (sqlrun.Runner), the engine before recording
// the completion.
func ForeignWork(st *projections.State, kind events.RunKind, runID, snapshot string) string {
	k, plan, ok := events.PlanOfRunID(runID)
	if !ok || k != kind {
		return ""
	}
	return ForeignTable(st, plan, snapshot)
}

// notForeign refuses plan work that would write a table production serves
// (ForeignWork). The refusal is invalid, not a conflict: the plan can
// never be promoted now, so a worker gives the work up rather than
// retrying it (work.Transient), as for a retired table.
func notForeign(st *projections.State, kind events.RunKind, runID string, sn *projections.Snapshot) error {
	if inc := ForeignWork(st, kind, runID, sn.Snapshot); inc != "" {
		_, plan, _ := events.PlanOfRunID(runID)
		return commands.Errorf(commands.CodeInvalid, "run_id", "%s work of plan %s for %s would write table %s, which incumbent %s serves in env %s; the plan was not promoted and can no longer be (the environment moved on)",
			kind, plan, sn.Snapshot, sn.Table, inc, st.Plans[plan].Built.Env)
	}
	return nil
}

// CancelledWork is the plan whose backfill or catch-up work a run is
// (kind and runID: events.PlanRunID), when that plan was cancelled
// (cancel_plan); "" for any other run. Workers do not compute it; the
// engine refuses its completions.
func CancelledWork(st *projections.State, kind events.RunKind, runID string) string {
	k, plan, ok := events.PlanOfRunID(runID)
	if !ok || k != kind {
		return ""
	}
	if pl, ok := st.Plans[plan]; ok && pl.Cancelled != nil {
		return plan
	}
	return ""
}

// notCancelled refuses work of a cancelled plan (CancelledWork): invalid,
// so a worker gives it up rather than retrying it.
func notCancelled(st *projections.State, kind events.RunKind, runID string, sn *projections.Snapshot) error {
	if plan := CancelledWork(st, kind, runID); plan != "" {
		return commands.Errorf(commands.CodeInvalid, "run_id", "%s work of plan %s for %s: the plan was cancelled at seq %d; its work is no longer recorded",
			kind, plan, sn.Snapshot, st.Plans[plan].CancelledSeq)
	}
	return nil
}
