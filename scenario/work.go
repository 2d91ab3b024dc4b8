package scenario

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

// The runner learns what work a command made due the way a serving
// process's work publisher does: it reads the events the command appended
// from the stream and derives the work with work.Of. The built-in
// worker runs those items, and a step's `scheduled` lists them.

// tail reads the engine's stream in order with one ordered consumer, each
// record once.
type tail struct {
	it   jetstream.MessagesContext
	next uint64 // the sequence of the next record to read
}

// tailTimeout bounds the wait for a record the projection has already
// applied (so the stream holds it).
const tailTimeout = 30 * time.Second

func openTail(ctx context.Context, js jetstream.JetStream) (*tail, error) {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("scenario: stream consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("scenario: stream consumer: %w", err)
	}
	return &tail{it: it, next: 1}, nil
}

func (t *tail) stop() { t.it.Stop() }

// readTo returns the records after those already read, through sequence to.
func (t *tail) readTo(ctx context.Context, to uint64) ([]events.Record, error) {
	var out []events.Record
	for t.next <= to {
		nctx, cancel := context.WithTimeout(ctx, tailTimeout)
		msg, err := t.it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			return out, fmt.Errorf("scenario: reading the stream at seq %d: %w", t.next, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return out, fmt.Errorf("scenario: reading the stream: %w", err)
		}
		ev, derr := events.Decode(msg.Data())
		out = append(out, events.Record{Seq: md.Sequence.Stream, Subject: msg.Subject(), Event: ev, Err: derr})
		t.next = md.Sequence.Stream + 1
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
