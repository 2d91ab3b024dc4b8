package work

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// SQL is what any worker needs to compute a step of an SQL model in the
// warehouse, whatever its language: the model's query, the column that
// places its rows in an interval, the snapshot table to write, the
// snapshot tables its upstream model names read, the unit its ranges
// are in, and how they are batched (one statement and one transaction
// per batch of BatchSize intervals of that unit). A step of
// a model without SQL carries none (Step.SQL is nil; omitted on the wire).
//
// Computing one batch [start, end) of the step, as `tidemark worker
// --warehouse` does (warehouse.WriteInterval): in one transaction, delete
// the rows of Table in schema "tidemark" whose TimeColumn is in
// [start, end), then insert the rows of
//
//	WITH <upstream model> AS (SELECT * FROM tidemark."<upstream table>"), …
//	SELECT * FROM (<Query with @start_ts, @end_ts bound to start, end>) q
//	WHERE q.<TimeColumn> >= start AND q.<TimeColumn> < end
//
// and commit before reporting the range with complete_work. Then run each
// of Audits over the range's rows of Table (warehouse.Warehouse.Audit)
// and report their outcomes in that complete_work.
//
// A model computed whole (Kind full, view or seed) has no TimeColumn: its
// step's range [start, end) is computed as one batch that recomputes all
// of it (full: replace every row of Table by the query's over [start,
// end); view: CREATE OR REPLACE VIEW Table over the query; seed: load
// Table from Seed), and its audits read the whole object.
type SQL struct {
	// Query is one SELECT over sources and upstream model names; it names
	// the interval's bounds @start_ts and @end_ts (UTC TIMESTAMPs).
	Query string `msgpack:"query" json:"query"`
	// TimeColumn is the column of the query's rows that places them in an
	// interval.
	TimeColumn string `msgpack:"time_column" json:"time_column"`
	// Table is the snapshot table in schema "tidemark".
	Table string `msgpack:"table" json:"table"`
	// Upstream maps each upstream model name the query reads to the
	// snapshot table (schema "tidemark") it reads it from: the upstream
	// snapshot the step's snapshot was planned against, never an
	// environment's view.
	Upstream map[string]string `msgpack:"upstream,omitempty" json:"upstream,omitempty"`
	// Unit is the snapshot's interval unit: a range is computed in
	// batches of BatchSize intervals of this unit.
	Unit interval.Unit `msgpack:"unit" json:"unit"`
	// BatchSize is how many intervals of Unit one batch spans: a range is
	// split at every BatchSize-th interval boundary from its start, and
	// each batch is computed as one interval [batch start, batch end) is
	// above (one statement, one transaction); 0 (omitted): each range is
	// one batch. BatchConcurrency is how many batches of the step a
	// worker may compute at once; 0 (omitted): the warehouse's default
	// (1 on DuckDB, 4 on Postgres).
	BatchSize        int `msgpack:"batch_size,omitempty" json:"batch_size,omitempty"`
	BatchConcurrency int `msgpack:"batch_concurrency,omitempty" json:"batch_concurrency,omitempty"`
	// Kind is the snapshot's kind when it is a whole kind; omitted for the
	// interval kinds (incremental, forward_only). A whole kind
	// (events.Kind.Whole: full, view, seed) is computed whole, each range
	// in one batch, whatever BatchSize says (Batch; docs/kinds.md).
	Kind events.Kind `msgpack:"kind,omitempty" json:"kind,omitempty"`
	// Audits are the snapshot's audits (events.SnapshotRegistered.Audits):
	// a worker that computes the step in the warehouse runs each over
	// every batch it commits, that batch's rows of Table, and reports
	// their outcomes with the batch's completion (complete_work's audits);
	// omitted: none.
	Audits []events.Audit `msgpack:"audits,omitempty" json:"audits,omitempty"`
	// Macros is the vocabulary of Query's macros and of its custom
	// audits' (events.SnapshotRegistered.Macros; warehouse.Model.Macros):
	// omitted, tidemark's @start_ts and @end_ts; "sqlmesh", SQLMesh's,
	// each computed from the batch's bounds
	// (warehouse.SubstituteMacrosIn).
	Macros string `msgpack:"macros,omitempty" json:"macros,omitempty"`
	// Seed is a seed model's CSV content (Kind "seed", which has no
	// Query); omitted otherwise.
	Seed string `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// Error is set when the model has SQL but the engine could not resolve
	// what it reads (an upstream snapshot that was never planned); a
	// worker reports the step's ranges failed with it instead of computing.
	Error string `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Batch is how many intervals of Unit one batch of the step spans: 0 (each
// range one batch) for a whole kind, which is never computed in part,
// else BatchSize.
func (s *SQL) Batch() int {
	if s.Kind.Whole() {
		return 0
	}
	return s.BatchSize
}

// SQLOf gives the SQL of a snapshot's steps (nil: the model has none),
// as known to a state that has applied at least event sequence seq (the
// item's event). The publisher calls it before publishing an item to
// workers; an error (the context ended) makes it try again.
type SQLOf func(ctx context.Context, seq uint64, snapshot string) (*SQL, error)

// describe fills each step's SQL with sqlOf.
func describe(ctx context.Context, sqlOf SQLOf, item Item) (Item, error) {
	if sqlOf == nil {
		return item, nil
	}
	steps := make([]Step, len(item.Steps))
	for i, st := range item.Steps {
		s, err := sqlOf(ctx, item.EventSeq, st.Snapshot)
		if err != nil {
			return item, err
		}
		st.SQL = s
		steps[i] = st
	}
	item.Steps = steps
	return item, nil
}

// encode is item's JSON. An item that does not fit in maxPayload bytes
// (when > 0) with its steps' SQL is encoded with each SQL step's query
// replaced by an error saying so (trimmed): published as it is, the
// publish would fail again and again and hold up all later work; this way
// the SQL workers report the steps failed, visibly.
func encode(item Item, maxPayload int64) (b []byte, trimmed bool, err error) {
	b, err = json.Marshal(item)
	if err != nil || maxPayload <= 0 || int64(len(b)) <= maxPayload {
		return b, false, err
	}
	steps := make([]Step, len(item.Steps))
	for i, st := range item.Steps {
		if st.SQL != nil {
			st.SQL = &SQL{Error: fmt.Sprintf("work item %s is %d bytes with its steps' SQL, more than the server's max payload of %d", item.ID, len(b), maxPayload)}
			trimmed = true
		}
		steps[i] = st
	}
	item.Steps = steps
	b, err = json.Marshal(item)
	return b, trimmed, err
}
