package work

import (
	"context"
	"slices"
	"sort"

	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
)

// What the publisher reads of the engine's live state, as serve gives it:
// the tables a step writes and reads, each item's progress, whether a
// step's work is still wanted. Each waits until the state has applied the
// item's event.

// TablesFrom is serve's Publisher.Tables: the snapshot table a step
// writes and the upstream snapshot tables it reads (tidemark table ids),
// as proj knows them once it has applied the item's event.
func TablesFrom(proj *live.Projection) TablesOf {
	return func(ctx context.Context, seq uint64, snapshot string) (Tables, error) {
		if err := proj.WaitFor(ctx, seq); err != nil {
			return Tables{}, err
		}
		t := Tables{Writes: snapshot}
		proj.Read(func(st *projections.State) {
			sn := st.Snapshots[snapshot]
			if sn == nil {
				return
			}
			t.Writes = sn.Table
			up, _ := st.UpstreamOf(snapshot)
			for _, id := range up {
				if usn := st.Snapshots[id]; usn != nil {
					t.Reads = append(t.Reads, usn.Table)
				}
			}
			sort.Strings(t.Reads)
		})
		return t, nil
	}
}

// ProgressFrom is serve's Publisher.Progress: what the completions
// naming a work item have recorded of a snapshot's step
// (projections.Work.Done), as proj knows it once it has applied seq.
func ProgressFrom(proj *live.Projection) DoneOf {
	return func(ctx context.Context, seq uint64, id, snapshot string) (interval.Set, error) {
		if err := proj.WaitFor(ctx, seq); err != nil {
			return nil, err
		}
		var done interval.Set
		proj.Read(func(st *projections.State) {
			if w := st.Work[id]; w != nil && w.Done[snapshot] != nil {
				done = slices.Clone(w.Done[snapshot].Ranges)
			}
		})
		return done, nil
	}
}

// GoneFrom is serve's Publisher.Gone: a cancelled plan's backfill and
// catch-up work is no longer wanted (decide.CancelledWork), nor a
// restatement's work once its environment moved to another generation
// (decide.StaleRestatement: the item made due at seq), as proj knows it
// once it has applied seq.
func GoneFrom(proj *live.Projection) GoneOf {
	return func(ctx context.Context, seq uint64, kind events.RunKind, runID string) (string, error) {
		if err := proj.WaitFor(ctx, seq); err != nil {
			return "", err
		}
		var why string
		proj.Read(func(st *projections.State) {
			if plan := decide.CancelledWork(st, kind, runID); plan != "" {
				why = "plan " + plan + " was cancelled"
			}
			if kind == events.RunRestate {
				why = decide.StaleRestatement(st, events.WorkID(seq, kind))
			}
		})
		return why, nil
	}
}
