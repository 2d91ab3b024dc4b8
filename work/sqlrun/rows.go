package sqlrun

import (
	"context"
	"time"

	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
)

// Rows reports what wh holds of snapshot: its table's rows and the newest
// row's time (zero for a model computed whole; ok false for a snapshot
// with no SQL, a view model, or a table not written yet). For the
// dashboard (web.Server.Rows).
func Rows(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection, snapshot string) (rows int64, newest time.Time, ok bool) {
	var m warehouse.Model
	var err error
	proj.Read(func(st *projections.State) { m, ok, err = ModelOf(st, snapshot) })
	if err != nil || !ok || m.Kind == warehouse.KindView {
		// A view model writes no rows (counting them would run its query).
		return 0, time.Time{}, false
	}
	s, err := wh.Stats(ctx, m.Table, m.TimeColumn)
	if err != nil {
		return 0, time.Time{}, false
	}
	return s.Rows, s.MaxTime, true
}

// LastWritten reports the interval wh wrote last into snapshot's table
// (warehouse.Written, recorded with the rows): its end and when it
// committed (ok false for a snapshot with no SQL, or no recorded write).
// For the dashboard (web.Server.Written).
func LastWritten(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection, snapshot string) (end, at time.Time, ok bool) {
	var m warehouse.Model
	var err error
	proj.Read(func(st *projections.State) { m, ok, err = ModelOf(st, snapshot) })
	if err != nil || !ok {
		return time.Time{}, time.Time{}, false
	}
	wr, ok, err := wh.LastWritten(ctx, m.Table)
	if err != nil || !ok {
		return time.Time{}, time.Time{}, false
	}
	return wr.Query.End, wr.At, true
}
