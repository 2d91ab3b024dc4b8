// Package inproc is the built-in worker: it "computes" work by recording
// it complete, in-process. Scenarios, the demo and `serve --builtin-worker`
// use it.
// Importers: server (serve --builtin-worker), scenario, bench.
package inproc

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

// Worker is the built-in worker: it "computes" work by recording it
// complete. Scenarios and the demo use it; real deployments run `tidemark
// worker` processes that execute model commands.
type Worker struct {
	Handler commands.Handler
	Actor   string
}

// ActorName is the actor the worker records its work as (the work
// publisher logs it).
func (w *Worker) ActorName() string { return w.Actor }

// Complete records ranges of a snapshot as computed.
func (w *Worker) Complete(ctx context.Context, snapshot string, ranges []interval.Range, kind events.RunKind, runID string, at time.Time) error {
	return w.complete(ctx, "", "", snapshot, ranges, kind, runID, work.Result{}, at)
}

// complete records ranges as computed under command id id (a new one when
// empty), as part of work item item (none when empty), with what
// computing them gave (the rows written, the audits' outcomes).
func (w *Worker) complete(ctx context.Context, id, item, snapshot string, ranges []interval.Range, kind events.RunKind, runID string, res work.Result, at time.Time) error {
	if len(ranges) == 0 {
		return nil
	}
	if id == "" {
		id = commands.InternalID("work", commands.NewID())
	}
	model, version, _ := events.ParseSnapshotID(snapshot)
	r := w.Handler.Handle(ctx, &commands.CompleteIntervals{
		Meta:  commands.Meta{ID: id, Actor: w.Actor, At: at, Correlation: runID},
		Model: model, Version: version, Ranges: ranges, RunKind: kind, RunID: runID, Work: item, Rows: res.Rows, Audits: res.Audits,
	})
	if err := r.Err(); err != nil {
		return fmt.Errorf("worker: complete %s %v: %w", snapshot, interval.Set(ranges), err)
	}
	return nil
}

// Run computes a work item's steps, in order, with the item's run kind.
// When the item has an id (work.Of gives one), each step's completion names
// the item (the engine checks it against the item) and its command id
// derives from it ("$work:<item id>/<step>", in the engine's reserved
// namespace: no client can claim it), so running the item again records
// nothing twice. A step of more than commands.MaxRanges ranges (more than
// one command may carry) is completed in chunks of at most MaxRanges, in
// order; chunk c > 0 has the id "$work:<item id>/<step>.<c>", so every id
// stays deterministic and a step that fits in one command keeps its id.
// The Worker is in-process: its Handler is the engine, which alone accepts
// reserved ids.
//
// A batch (Item.Batch set) derives its ids from its key:
// "$work:<item id>/<step>/<batch>/0".
func (w *Worker) Run(ctx context.Context, item work.Item, at time.Time) error {
	return w.run(ctx, item, work.Result{}, at)
}

// RecordBatch records a batch of an item (one step, one range, Batch
// set) computed, with what computing it gave: the rows it wrote and its
// audits' outcomes (sqlrun.BatchRecorder).
func (w *Worker) RecordBatch(ctx context.Context, batch work.Item, res work.Result, at time.Time) error {
	return w.run(ctx, batch, res, at)
}

// run records item's steps computed, each with res (the audits' outcomes
// with a step's first chunk only: they are the outcomes over the whole
// batch, which RecordBatch's one range is).
func (w *Worker) run(ctx context.Context, item work.Item, res work.Result, at time.Time) error {
	for i, st := range item.Steps {
		for c, start := 0, 0; start < len(st.Ranges); c, start = c+1, start+commands.MaxRanges {
			chunk := st.Ranges[start:min(start+commands.MaxRanges, len(st.Ranges))]
			id := ""
			if item.ID != "" {
				id = chunkID(item.Key(), i, c)
			}
			r := res
			if c > 0 {
				r.Audits = nil
			}
			if err := w.complete(ctx, id, item.ID, st.Snapshot, chunk, item.RunKind, st.RunID, r, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunkID is the command id of chunk c of step i of item: the step's own
// id for its first chunk, which is the whole step when it fits in one
// command.
func chunkID(item string, i, c int) string {
	if c == 0 {
		return commands.InternalID("work", fmt.Sprintf("%s/%d", item, i))
	}
	return commands.InternalID("work", fmt.Sprintf("%s/%d.%d", item, i, c))
}

// RunAdvances completes the work of one tick's scheduler advances, in
// their order (dependency order); open repair debt is computed first.
func (w *Worker) RunAdvances(ctx context.Context, advs []events.SchedulerAdvanced, at time.Time) error {
	return w.Run(ctx, work.Scheduled(advs), at)
}

// CatchUp computes a catch-up request's work, in its order (dependency
// order): each candidate's suffix, and the downstream intervals the request
// invalidated, after the upstream suffix they read.
func (w *Worker) CatchUp(ctx context.Context, req events.CatchUpRequested, at time.Time) error {
	return w.Run(ctx, work.CatchUp(req), at)
}

// Backfill completes a plan's backfill set (fixed at build), in dependency
// order.
func (w *Worker) Backfill(ctx context.Context, plan events.PlanBuilt, at time.Time) error {
	return w.Run(ctx, work.Backfill(plan), at)
}
