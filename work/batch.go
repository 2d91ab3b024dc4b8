package work

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tidemark/tidemark/events/interval"
)

// Batches of published work. A work item as Of derives it is one message
// per event: a plan's whole backfill set, a tick's advances. Published to
// workers, it is cut into batches (Split), each a message of its own that
// any worker may take: one step of the item with one range, the step's
// SQL batch_size intervals at most (Batches). A batch's reports name the
// item (work = Item.ID), so the engine checks them against the item as
// before, and record it done batch by batch (projections.Work.Done). A
// batch of a step that reads what an earlier step of the same item writes
// (a child after its parent, Tables) waits for the parent's batches that
// overlap its range: the publisher holds it until they are done (DoneOf),
// then publishes it. A worker that dies mid-batch acks nothing, so the
// batch alone is redelivered and written again (one transaction, interval
// idempotent).

// Key is the item's name on the work stream (its Nats-Msg-Id) and the
// base of its reports' command ids: the ID, and for a batch
// "<id>/<step>/<batch>".
func (it Item) Key() string {
	if it.Batch == "" {
		return it.ID
	}
	return it.ID + "/" + it.Batch
}

// BatchName names batch n of step i of an item (Item.Batch): the
// published messages' and the built-in worker's command ids derive from
// it.
func BatchName(i, n int) string { return strconv.Itoa(i) + "/" + strconv.Itoa(n) }

// Part is one batch of an item as Split cuts it: the message (one step,
// one range, Batch set) and what it waits for.
type Part struct {
	Item Item
	// Step is the index of its step in the item Split cut.
	Step int
	// Needs is, per snapshot of an earlier step of the same item that this
	// step reads, the ranges of that step that must be done before this
	// batch is computed: its batches overlapping this batch's range.
	Needs map[string]interval.Set
}

// Split cuts a described item (its steps' SQL filled, when they have
// SQL) into its batches, in order: each step's ranges by its SQL's
// batch_size and unit (Batches; a step without SQL, without a
// batch_size, or of a whole kind (SQL.Batch): each range one batch). tables[i] is what step i writes and
// reads (nil: each step writes the table of its snapshot and reads
// none). An item of one step and one batch is still cut (a Part with
// Batch "0/0"), so every published message is a batch.
func Split(item Item, tables []Tables) []Part {
	batches := make([][]interval.Range, len(item.Steps))
	for i, st := range item.Steps {
		var unit interval.Unit
		size := 0
		if st.SQL != nil && st.SQL.Unit.Valid() {
			unit, size = st.SQL.Unit, st.SQL.Batch() // a whole kind: one batch
		}
		batches[i] = interval.Batches(unit, size, st.Ranges)
	}
	var out []Part
	for i, st := range item.Steps {
		for n, b := range batches[i] {
			msg := item
			one := st
			one.Ranges = []interval.Range{b}
			msg.Steps = []Step{one}
			msg.Batch = BatchName(i, n)
			p := Part{Item: msg, Step: i}
			for j := range i {
				if !reads(tables, i, j) {
					continue
				}
				var need interval.Set
				for _, pb := range batches[j] {
					if pb.Start.Before(b.End) && b.Start.Before(pb.End) {
						need = need.Add(pb)
					}
				}
				if !need.Empty() {
					if p.Needs == nil {
						p.Needs = map[string]interval.Set{}
					}
					p.Needs[item.Steps[j].Snapshot] = p.Needs[item.Steps[j].Snapshot].AddSet(need)
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// reads reports whether step i reads the table step j writes.
func reads(tables []Tables, i, j int) bool {
	if i >= len(tables) || j >= len(tables) {
		return false
	}
	for _, t := range tables[i].Reads {
		if t == tables[j].Writes {
			return true
		}
	}
	return false
}

// DoneOf gives what the completions naming work item id have recorded of
// snapshot's step (projections.Work.Done), as known to a state that has
// applied at least event sequence seq. An error (the context ended)
// stops the publisher.
type DoneOf func(ctx context.Context, seq uint64, id, snapshot string) (interval.Set, error)

// ready reports whether every batch p needs is done, asking done.
func (p Part) ready(ctx context.Context, done DoneOf, seq uint64) (bool, error) {
	for snap, need := range p.Needs {
		got, err := done(ctx, seq, p.Item.ID, snap)
		if err != nil {
			return false, err
		}
		if !need.SubtractSet(got).Empty() {
			return false, nil
		}
	}
	return true, nil
}

// isDone reports whether p's own batch is done already (a restart
// re-deriving an item whose batches were computed).
func (p Part) isDone(ctx context.Context, done DoneOf, seq uint64) (bool, error) {
	st := p.Item.Steps[0]
	got, err := done(ctx, seq, p.Item.ID, st.Snapshot)
	if err != nil {
		return false, err
	}
	return got.Covers(st.Ranges[0]), nil
}

func (p Part) String() string {
	return fmt.Sprintf("%s (%s %s)", p.Item.Key(), p.Item.Steps[0].Snapshot, p.Item.Steps[0].Ranges[0])
}
