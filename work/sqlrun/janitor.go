package sqlrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
)

// The warehouse side of issue 17's janitor. A TableRetired event (decided
// by decide.Retirable's rule, sent by scheduler.Janitor) says a snapshot
// table is no longer used; the Janitor here drops its warehouse table
// (TableName of the tidemark table id), as a projection of the stream:
// every table the live state marks retired is dropped, idempotently
// (DROP TABLE IF EXISTS), and again after a restart. warehouse.DropTable
// refuses a table a view reads (ErrInUse: the views syncer has not
// swapped yet, or something outside tidemark reads it): the drop is
// logged and retried, never forced. A table a later plan takes back is
// no longer retired, so it is not dropped.

// Janitor drops the warehouse tables of retired snapshot tables. It runs
// where the Runner and the Syncer do (one process owns a DuckDB file).
type Janitor struct {
	WH   *warehouse.Warehouse
	Proj *live.Projection
	Log  *slog.Logger
	// Retry is how long a refused or failed drop waits before it is tried
	// again (default 10s); any change of the projection retries sooner.
	Retry time.Duration
}

// Run drops every retired table now and after every change of the
// projection, until ctx ends.
func (j *Janitor) Run(ctx context.Context) error {
	retry := j.Retry
	if retry <= 0 {
		retry = 10 * time.Second
	}
	dropped := map[string]uint64{} // table id → the retirement seq dropped
	for {
		changed, err := j.Proj.Watch()
		if err != nil {
			return err
		}
		errs := dropRetired(ctx, j.WH, j.Proj, dropped, j.Log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var again <-chan time.Time
		if len(errs) > 0 {
			again = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-again:
		}
	}
}

// DropRetired drops the warehouse table of every retired table now and
// returns when done: what a Janitor does after a change, synchronously.
// Dropping a table already gone changes nothing.
func DropRetired(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection) error {
	return errors.Join(dropRetired(ctx, wh, proj, map[string]uint64{}, nil)...)
}

// dropRetired drops, in table order, the retired tables not in dropped
// at their retirement's sequence, records those it dropped, and returns
// the drops that failed.
func dropRetired(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection, dropped map[string]uint64, log *slog.Logger) []error {
	want := map[string]uint64{}
	proj.Read(func(st *projections.State) {
		for t, r := range st.Retired {
			if dropped[t] != r.Seq {
				want[t] = r.Seq
			}
		}
	})
	var errs []error
	for _, t := range slices.Sorted(maps.Keys(want)) {
		// A plan may have taken the table back since: look again.
		still := false
		proj.Read(func(st *projections.State) { r, ok := st.Retired[t]; still = ok && r.Seq == want[t] })
		if !still {
			continue
		}
		name := TableName(t)
		if err := wh.DropTable(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("sqlrun: dropping retired table %s (%s): %w", t, name, err))
			if log != nil && ctx.Err() == nil {
				if errors.Is(err, warehouse.ErrInUse) {
					log.Warn("retired table still read by a view: kept, retrying", "table", t, "name", name, "err", err)
				} else {
					log.Warn("dropping retired table", "table", t, "name", name, "err", err)
				}
			}
			continue
		}
		dropped[t] = want[t]
		if log != nil {
			log.Info("retired table dropped", "table", t, "name", name)
		}
	}
	return errs
}
