package sqlrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
)

// StepSQL is serve's work.Publisher.SQL: the SQL of a snapshot's steps
// (ModelOf) as proj knows it once it has applied the item's event. A
// snapshot whose upstream cannot be resolved gets work.SQL.Error, so a
// worker reports the failure rather than record the step computed.
func StepSQL(proj *live.Projection) work.SQLOf {
	return func(ctx context.Context, seq uint64, snapshot string) (*work.SQL, error) {
		if err := proj.WaitFor(ctx, seq); err != nil {
			return nil, err
		}
		var out *work.SQL
		proj.Read(func(st *projections.State) {
			m, ok, err := ModelOf(st, snapshot)
			var retired bool
			if sn := st.Snapshots[snapshot]; sn != nil {
				_, retired = st.Retired[sn.Table]
			}
			switch {
			case err != nil:
				out = &work.SQL{Error: err.Error()}
			case ok && retired:
				out = &work.SQL{Error: fmt.Sprintf("table %s of %s was retired by the janitor: plan the version again to recompute it", st.Snapshots[snapshot].Table, snapshot)}
			case ok:
				sn := st.Snapshots[snapshot]
				out = &work.SQL{Query: m.SQL, TimeColumn: m.TimeColumn, Table: m.Table, Upstream: m.Upstream, Unit: sn.Unit, Macros: m.Macros,
					BatchSize: sn.BatchSize, BatchConcurrency: sn.BatchConcurrency, Audits: slices.Clone(sn.Audits),
					Kind: events.Kind(m.Kind), Seed: m.Seed}
				if len(out.Upstream) == 0 {
					out.Upstream = nil
				}
			}
		})
		return out, nil
	}
}

// Computer computes the batches of `tidemark worker --warehouse`: each
// range of a step that carries SQL (work.Step.SQL) is written into the
// warehouse in batches of the model's batch_size intervals
// (warehouse.WriteInterval: one statement and one transaction per batch,
// idempotent), and Compute returns only after the last batch is
// committed, so the worker reports the batch complete only then, with the
// outcomes of the step's audits (work.SQL.Audits) over the range it
// computed, run once its rows are committed (Audit). A step without SQL (a
// model that has none) is computed by doing nothing: the worker records it
// complete, as the built-in worker does.
type Computer struct {
	WH  *warehouse.Warehouse
	Log *slog.Logger
}

// ErrBadStep marks a step whose SQL cannot be computed as sent (a field
// missing or invalid, or the engine's work.SQL.Error); retrying it will
// not help: it wraps work.ErrPermanent.
var ErrBadStep = fmt.Errorf("sqlrun: step cannot be computed (%w)", work.ErrPermanent)

// Compute implements work.Computer.
func (c *Computer) Compute(ctx context.Context, b work.Batch) (work.Result, error) {
	if b.Step < 0 || b.Step >= len(b.Item.Steps) {
		return work.Result{}, fmt.Errorf("%w: item %s has no step %d", ErrBadStep, b.Item.ID, b.Step)
	}
	st := b.Item.Steps[b.Step]
	s := st.SQL
	if s == nil {
		return work.Result{}, nil
	}
	m, err := modelOfStep(st)
	if err != nil {
		return work.Result{}, err
	}
	batching := Batching{Size: s.BatchSize, Concurrency: s.BatchConcurrency}
	if m.Whole() {
		batching = Batching{} // the range is one batch
	}
	rows, err := writeStep(ctx, c.WH, c.Log, b.Item.Key(), st.Snapshot, m, s.Unit, batching, []interval.Range{b.Range}, nil)
	if err != nil {
		return work.Result{Rows: rows}, err
	}
	res := work.Result{Rows: rows, Audits: Audit(ctx, c.WH, m, s.Audits, b.Range)}
	if err := ctx.Err(); err != nil {
		// The audits were cut short: the range is reported again, and
		// audited then.
		return work.Result{Rows: rows}, err
	}
	logAudits(c.Log, st.Snapshot, b.Range, res.Audits)
	return res, nil
}

// logAudits logs the audits that failed over r.
func logAudits(log *slog.Logger, snapshot string, r interval.Range, outs []events.AuditOutcome) {
	if log == nil {
		return
	}
	for _, o := range outs {
		switch {
		case o.Error != "":
			log.Warn("audit could not run", "snapshot", snapshot, "range", r.String(), "audit", o.Audit, "err", o.Error)
		case o.Failed():
			log.Warn("audit failed", "snapshot", snapshot, "range", r.String(), "audit", o.Audit, "count", o.Count)
		}
	}
}

// Batching is how a step's ranges are computed: Size intervals of the
// unit per batch (0: each range one batch), Concurrency batches at once
// (0: the warehouse's default, warehouse.Warehouse.BatchConcurrency).
type Batching struct {
	Size, Concurrency int
	// Timeout, when > 0, bounds each batch: one that runs longer is
	// cancelled and fails wrapping work.ErrTimedOut.
	Timeout time.Duration
}

// writeStep writes ranges of snapshot's model in batches (work.Batches):
// each batch is one warehouse.WriteInterval over the batch's range (one
// DELETE, one INSERT … SELECT with @start_ts and @end_ts the batch's
// bounds, one transaction), up to b.Concurrency of them at once, each
// handed to committed (when set) once it is committed. It returns the
// rows inserted once every batch is committed, or with the first batch's
// error (the batches not yet started are not; a failed batch's
// transaction leaves none of its rows); it logs the rows.
func writeStep(ctx context.Context, wh *warehouse.Warehouse, log *slog.Logger, item, snapshot string, m warehouse.Model, unit interval.Unit, b Batching, ranges []interval.Range, committed Committed) (int64, error) {
	rows, batches, err := WriteStep(ctx, wh, m, unit, b, ranges, committed)
	if err != nil {
		return rows, fmt.Errorf("sqlrun: %s: %w", snapshot, err)
	}
	if log != nil {
		log.Debug("computed", "snapshot", snapshot, "batches", batches, "rows", rows, "item", item)
	}
	return rows, nil
}

// Committed is told of each batch WriteStep has committed, with its rows,
// from the goroutine that wrote it; an error fails the step.
type Committed func(ctx context.Context, batch interval.Range, rows int64) error

// WriteStep is what the Runner and the Computer do to compute a step's
// ranges of m (writeStep, without the log): it returns the rows inserted
// and the batches written.
func WriteStep(ctx context.Context, wh *warehouse.Warehouse, m warehouse.Model, unit interval.Unit, b Batching, ranges []interval.Range, committed Committed) (rows int64, n int, err error) {
	batches := interval.Batches(unit, b.Size, ranges)
	limit := b.Concurrency
	if limit <= 0 {
		limit = wh.BatchConcurrency()
	}
	var total, written atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	var yielded atomic.Bool
	for _, bt := range batches {
		if gctx.Err() != nil || yielded.Load() {
			break // a batch failed, or ctx ended, or the pool wants the worker back: start no more
		}
		g.Go(func() error {
			if work.Yielding(ctx) {
				yielded.Store(true) // asked once this batch had its turn: not started
				return nil
			}
			bctx, cancel := gctx, context.CancelFunc(func() {})
			if b.Timeout > 0 {
				bctx, cancel = context.WithTimeout(gctx, b.Timeout)
			}
			defer cancel()
			n, err := wh.WriteInterval(bctx, m, bt.Start, bt.End)
			if err != nil && gctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("batch %s: timed out after %s: %w: %w", bt, b.Timeout, work.ErrTimedOut, err)
			}
			if err != nil {
				return fmt.Errorf("batch %s: %w", bt, err)
			}
			total.Add(n)
			written.Add(1)
			if committed != nil {
				return committed(gctx, bt, n)
			}
			return nil
		})
	}
	if err = g.Wait(); err == nil && yielded.Load() && int(written.Load()) != len(batches) {
		err = fmt.Errorf("%d of %d batches computed: %w", written.Load(), len(batches), work.ErrYielded)
	} else if err == nil && int(written.Load()) != len(batches) {
		// The loop stopped before a batch started (ctx ended): the step
		// is not computed, and must not be recorded so.
		err = fmt.Errorf("%d of %d batches computed: %w", written.Load(), len(batches), cmp.Or(ctx.Err(), context.Canceled))
	}
	return total.Load(), len(batches), err
}

// modelOfStep is the warehouse model of a step's SQL, checked field by
// field.
func modelOfStep(st work.Step) (warehouse.Model, error) {
	s := st.SQL
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: steps[].sql.%s: %s", ErrBadStep, st.Snapshot, field, fmt.Sprintf(format, args...))
	}
	whole := s.Kind != warehouse.KindInterval
	switch {
	case s.Error != "":
		return warehouse.Model{}, bad("error", "%s", s.Error)
	case whole && s.Kind != warehouse.KindFull && s.Kind != warehouse.KindView && s.Kind != warehouse.KindSeed:
		return warehouse.Model{}, bad("kind", "%q is not a kind computed whole (full, view, seed)", s.Kind)
	case s.Kind == warehouse.KindSeed && s.Seed == "":
		return warehouse.Model{}, bad("seed", "required for kind seed")
	case s.Kind == warehouse.KindSeed && s.Query != "":
		return warehouse.Model{}, bad("query", "a seed has none")
	case s.Kind != warehouse.KindSeed && s.Seed != "":
		return warehouse.Model{}, bad("seed", "only for kind seed")
	case s.Query == "" && s.Kind != warehouse.KindSeed:
		return warehouse.Model{}, bad("query", "required")
	case s.TimeColumn == "" && !whole:
		return warehouse.Model{}, bad("time_column", "required")
	case s.TimeColumn != "" && whole:
		return warehouse.Model{}, bad("time_column", "a %s model has none", s.Kind)
	case s.Table == "":
		return warehouse.Model{}, bad("table", "required")
	case !s.Unit.Valid():
		return warehouse.Model{}, bad("unit", "%q is not an interval unit", s.Unit)
	}
	for model, table := range s.Upstream {
		if model == "" || table == "" {
			return warehouse.Model{}, bad("upstream", "%q: %q: want a model name and its table", model, table)
		}
	}
	return warehouse.Model{Name: st.Model, Table: s.Table, SQL: s.Query, TimeColumn: s.TimeColumn, Upstream: s.Upstream, Snapshot: st.Snapshot,
		Macros: s.Macros, Kind: string(s.Kind), Seed: s.Seed}, nil
}
