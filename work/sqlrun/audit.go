package sqlrun

import (
	"context"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/warehouse"
)

// Audit runs every audit of a snapshot (its registration's Audits) over
// the rows of m's table in r, a range just committed (warehouse.
// Warehouse.Audit: each in the sandbox, within m's timeout), and returns
// their outcomes in the audits' order, for the completion that reports r
// (nil when there are none). An audit that cannot run is a failed
// outcome saying why; a ctx that ended gives outcomes that say so, which
// the caller does not report (it reports nothing once ctx ended).
func Audit(ctx context.Context, wh *warehouse.Warehouse, m warehouse.Model, audits []events.Audit, r interval.Range) []events.AuditOutcome {
	if len(audits) == 0 {
		return nil
	}
	as := make([]warehouse.Audit, len(audits))
	for i, a := range audits {
		as[i] = warehouse.Audit{Name: a.Name, Kind: a.Kind, Columns: a.Columns, Column: a.Column, Threshold: a.Threshold,
			IsIn: a.IsIn, Min: a.Min, Max: a.Max, SQL: a.SQL}
	}
	res := wh.Audit(ctx, m, as, r.Start, r.End)
	out := make([]events.AuditOutcome, len(res))
	for i, x := range res {
		out[i] = events.AuditOutcome{Audit: x.Name, Passed: x.Passed, Count: x.Count, Columns: x.Columns, Sample: x.Sample, Error: x.Error}
	}
	return out
}
