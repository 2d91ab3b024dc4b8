package sqlrun

import (
	"context"
	"fmt"
	"log/slog"

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
				out = &work.SQL{Query: m.SQL, TimeColumn: m.TimeColumn, Table: m.Table, Upstream: m.Upstream, Unit: st.Snapshots[snapshot].Unit}
				if len(out.Upstream) == 0 {
					out.Upstream = nil
				}
			}
		})
		return out, nil
	}
}

// Computer computes the batches of `tidemark worker --warehouse`: each
// batch of a step that carries SQL (work.Step.SQL) is written into the
// warehouse one interval of the step's unit at a time
// (warehouse.WriteInterval: one transaction per interval, idempotent), and
// Compute returns only after the last interval is committed, so the
// worker reports the batch complete only then. A step without SQL (a
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
func (c *Computer) Compute(ctx context.Context, b work.Batch) error {
	if b.Step < 0 || b.Step >= len(b.Item.Steps) {
		return fmt.Errorf("%w: item %s has no step %d", ErrBadStep, b.Item.ID, b.Step)
	}
	st := b.Item.Steps[b.Step]
	s := st.SQL
	if s == nil {
		return nil
	}
	m, err := modelOfStep(st)
	if err != nil {
		return err
	}
	return writeStep(ctx, c.WH, c.Log, b.Item.ID, st.Snapshot, m, s.Unit, []interval.Range{b.Range})
}

// writeStep writes ranges of snapshot's model one interval of unit at a
// time (warehouse.WriteInterval: one transaction each) and logs the rows.
func writeStep(ctx context.Context, wh *warehouse.Warehouse, log *slog.Logger, item, snapshot string, m warehouse.Model, unit interval.Unit, ranges []interval.Range) error {
	var rows int64
	ivs := Intervals(unit, ranges)
	for _, iv := range ivs {
		n, err := wh.WriteInterval(ctx, m, iv.Start, iv.End)
		if err != nil {
			return fmt.Errorf("sqlrun: %s %s: %w", snapshot, iv, err)
		}
		rows += n
	}
	if log != nil {
		log.Debug("computed", "snapshot", snapshot, "intervals", len(ivs), "rows", rows, "item", item)
	}
	return nil
}

// modelOfStep is the warehouse model of a step's SQL, checked field by
// field.
func modelOfStep(st work.Step) (warehouse.Model, error) {
	s := st.SQL
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: steps[].sql.%s: %s", ErrBadStep, st.Snapshot, field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Error != "":
		return warehouse.Model{}, bad("error", "%s", s.Error)
	case s.Query == "":
		return warehouse.Model{}, bad("query", "required")
	case s.TimeColumn == "":
		return warehouse.Model{}, bad("time_column", "required")
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
	return warehouse.Model{Name: st.Model, Table: s.Table, SQL: s.Query, TimeColumn: s.TimeColumn, Upstream: s.Upstream, Snapshot: st.Snapshot}, nil
}
