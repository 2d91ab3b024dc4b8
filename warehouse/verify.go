package warehouse

import (
	"context"
	"fmt"
)

// Diff is what Verify found: rows the environment's view shows that a
// recompute does not give, and the reverse (counted as bags: duplicates
// count), with a few samples of each.
type Diff struct {
	OnlyInView      int64     `json:"only_in_view"`
	OnlyInRecompute int64     `json:"only_in_recompute"`
	Columns         []string  `json:"columns"`
	Samples         []DiffRow `json:"samples,omitempty"`
	// Writers counts, per snapshot, the writes (an interval or a batch of
	// intervals each: one record of Writers) recomputed with that
	// snapshot's query because it wrote them, when the caller
	// verified by writer (sqlrun.VerifyEnv).
	Writers map[string]int `json:"writers,omitempty"`
	// Unrecorded counts the intervals that had no usable writer record (a
	// table written before writers were recorded, or a record whose
	// snapshot or query the caller does not know): sqlrun.VerifyEnv
	// recomputes them with the incumbent's query.
	Unrecorded int `json:"unrecorded,omitempty"`
	// Unverifiable counts the recorded intervals sqlrun.VerifyEnv could
	// not recompute: their writer read an upstream table the janitor has
	// retired since. They are not compared.
	Unverifiable int `json:"unverifiable,omitempty"`
}

// DiffRow is one sample row of a Diff.
type DiffRow struct {
	Side   string `json:"side"` // "view" or "recompute"
	Values []any  `json:"values"`
}

// Empty reports whether the view equals the recompute.
func (d Diff) Empty() bool { return d.OnlyInView == 0 && d.OnlyInRecompute == 0 }

// verifySamples is how many sample rows of each side a Diff keeps.
const verifySamples = 5

// Check is one slice of a verification: the rows of env's view of
// Model.Name whose time falls in Rows, against Model's query computed over
// Query (its @start_ts and @end_ts) and filtered to Rows. Rows is usually
// Query; it is smaller where a later write replaced part of Query's rows.
// A model computed whole (Model.Whole) is checked whole: every row of the
// view against its query computed over Query (Rows is not used).
type Check struct {
	Model Model
	Query Range
	Rows  Range
}

// Verify recomputes m over each range (from m's upstream snapshot tables)
// and compares the result with env's view of m restricted to that range.
func (w *Warehouse) Verify(ctx context.Context, env string, m Model, ranges []Range) (Diff, error) {
	checks := make([]Check, len(ranges))
	for i, rg := range ranges {
		checks[i] = Check{Model: m, Query: rg, Rows: rg}
	}
	return w.VerifyChecks(ctx, env, checks)
}

// VerifyChecks runs every check against env's view of its model and sums
// what they find (the checks normally concern one model).
func (w *Warehouse) VerifyChecks(ctx context.Context, env string, checks []Check) (Diff, error) {
	var d Diff
	withs := map[string]string{} // rendered query → its WITH clause
	for _, c := range checks {
		m := c.Model
		if m.Kind == KindSeed {
			return Diff{}, fmt.Errorf("%w: model %q is a seed: it has no query to recompute", ErrKind, m.Name)
		}
		q, err := render(m, paramStart, paramEnd)
		if err != nil {
			return Diff{}, fmt.Errorf("warehouse: %w", err)
		}
		args := []any{c.Query.Start.UTC(), c.Query.End.UTC(), c.Rows.Start.UTC(), c.Rows.End.UTC()}
		with, ok := withs[q]
		if m.Whole() {
			// The whole recompute against the whole view: the bounds are
			// the computation's (Query), Rows does not apply.
			args = args[:2]
			if !ok {
				with = fmt.Sprintf("WITH r AS (SELECT * FROM (%s) q WHERE %s), v AS (SELECT * FROM %s)", q, boundsUsed, qualified(ViewOf(env, m.Name)))
				withs[q] = with
			}
		} else if !ok {
			tc := quoteIdent(m.TimeColumn)
			// The recompute keeps the rows a write of Query keeps (its outer
			// filter), then those in Rows; the view's rows in Rows.
			with = fmt.Sprintf("WITH r AS (SELECT * FROM (%s) q WHERE q.%s >= $1 AND q.%s < $2 AND q.%s >= $3 AND q.%s < $4), v AS (SELECT * FROM %s WHERE %s >= $3 AND %s < $4)",
				q, tc, tc, tc, tc, qualified(ViewOf(env, m.Name)), tc, tc)
			withs[q] = with
		}
		count := with + " SELECT (SELECT count(*) FROM (SELECT * FROM v EXCEPT ALL SELECT * FROM r) a), (SELECT count(*) FROM (SELECT * FROM r EXCEPT ALL SELECT * FROM v) b)"
		_, counts, err := w.queryAll(ctx, m, count, args...)
		if err == nil && (len(counts) != 1 || len(counts[0]) != 2) {
			err = fmt.Errorf("counting the differences gave %v", counts)
		}
		var inView, inRe int64
		if err == nil {
			inView, err = asInt64(counts[0][0])
		}
		if err == nil {
			inRe, err = asInt64(counts[0][1])
		}
		if err != nil {
			return Diff{}, fmt.Errorf("warehouse: verify %s.%s: %w", env, m.Name, err)
		}
		d.OnlyInView += inView
		d.OnlyInRecompute += inRe
		for _, side := range []struct {
			name, sql string
			n         int64
		}{
			{"view", "SELECT * FROM v EXCEPT ALL SELECT * FROM r", inView},
			{"recompute", "SELECT * FROM r EXCEPT ALL SELECT * FROM v", inRe},
		} {
			have := 0
			for _, r := range d.Samples {
				if r.Side == side.name {
					have++
				}
			}
			if side.n == 0 || have >= verifySamples {
				continue
			}
			cols, rows, err := w.queryAll(ctx, m, fmt.Sprintf("%s SELECT * FROM (%s) x LIMIT %d", with, side.sql, verifySamples-have), args...)
			if err != nil {
				return Diff{}, fmt.Errorf("warehouse: verify %s.%s: samples: %w", env, m.Name, err)
			}
			d.Columns = cols
			for _, r := range rows {
				d.Samples = append(d.Samples, DiffRow{Side: side.name, Values: r})
			}
		}
	}
	return d, nil
}

// asInt64 is a count the driver returned.
func asInt64(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int32:
		return int64(n), nil
	case int:
		return int64(n), nil
	}
	return 0, fmt.Errorf("a count of type %T", v)
}
