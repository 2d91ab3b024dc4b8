package scenario

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

// The runner learns what work a command made due the way a serving
// process's work publisher does: it reads the events the command appended
// from the stream and derives the work with work.Of. The built-in
// worker runs those items, and a step's `scheduled` lists them.

// tail reads the engine's stream in order with the log's Tail, each
// record once.
type tail struct {
	recs   chan events.Record
	done   chan struct{} // closed when the Tail returned; err says why
	err    error
	cancel context.CancelFunc
	next   uint64 // the sequence of the next record to read
}

// tailTimeout bounds the wait for a record the projection has already
// applied (so the stream holds it).
const tailTimeout = 30 * time.Second

func openTail(ctx context.Context, r *eventlog.Reader) *tail {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &tail{recs: make(chan events.Record), done: make(chan struct{}), cancel: cancel, next: 1}
	go func() {
		defer close(t.done)
		t.err = r.Tail(ctx, 1, func(e eventlog.Entry) error {
			select {
			case t.recs <- e.Record:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return t
}

func (t *tail) stop() {
	t.cancel()
	<-t.done
}

// readTo returns the records after those already read, through sequence to.
func (t *tail) readTo(ctx context.Context, to uint64) ([]events.Record, error) {
	var out []events.Record
	timer := time.NewTimer(tailTimeout)
	defer timer.Stop()
	for t.next <= to {
		timer.Reset(tailTimeout)
		select {
		case rec := <-t.recs:
			out = append(out, rec)
			if rec.Index == rec.Count-1 || rec.Count == 0 {
				t.next = rec.Seq + 1 // past a group message at its last event
			}
		case <-t.done:
			return out, fmt.Errorf("scenario: reading the stream at seq %d: %w", t.next, t.err)
		case <-timer.C:
			return out, fmt.Errorf("scenario: reading the stream at seq %d: nothing for %s", t.next, tailTimeout)
		case <-ctx.Done():
			return out, fmt.Errorf("scenario: reading the stream at seq %d: %w", t.next, ctx.Err())
		}
	}
	return out, nil
}

// workOf splits records into commands (consecutive records with the same
// causation) and returns the work each makes due, in order, with
// work.Of.
func workOf(recs []events.Record) []work.Item {
	var out []work.Item
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Event.Causation == recs[i].Event.Causation {
			j++
		}
		out = append(out, work.Of(recs[i:j])...)
		i = j
	}
	return out
}

// scheduled merges, per model, the ranges of the work items that are not a
// plan's backfill: what a step asked the worker to compute. Models with
// nothing are left out.
func scheduled(items []work.Item) map[string]interval.Set {
	sets := map[string]interval.Set{}
	for _, it := range items {
		if it.RunKind == events.RunBackfill {
			continue
		}
		for _, st := range it.Steps {
			if set := sets[st.Model].AddSet(interval.NewSet(st.Ranges...)); !set.Empty() {
				sets[st.Model] = set
			}
		}
	}
	return sets
}

// rangeStrings writes sets as START/END strings; nil when there are none.
func rangeStrings(sets map[string]interval.Set) map[string][]string {
	if len(sets) == 0 {
		return nil
	}
	out := map[string][]string{}
	for _, m := range slices.Sorted(maps.Keys(sets)) {
		out[m] = sets[m].Strings()
	}
	return out
}

// repairQueue holds the repair work acceptances issued that the built-in
// worker has not run yet. A scenario's worker runs it at the start of the
// next run_scheduler step whose worker is not paused, before any tick.
type repairQueue struct {
	items []work.Item
}

// issued queues the repair items among items.
func (q *repairQueue) issued(items []work.Item) {
	for _, it := range items {
		if it.RunKind == events.RunRepair {
			q.items = append(q.items, it)
		}
	}
}

// due returns, in issue order, what a step runs now and empties the
// queue; a paused worker runs nothing and the queue keeps it.
func (q *repairQueue) due(paused bool) []work.Item {
	if paused {
		return nil
	}
	out := q.items
	q.items = nil
	return out
}
