package warehouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// A table diff compares two snapshot tables of one model (a plan's
// candidate and the incumbent it replaces) over the ranges both cover, as
// bags of rows (duplicates count, NULLs equal NULLs: what EXCEPT ALL
// both ways gives). It runs as one read-only statement in the sandbox
// (and a second for the samples, over the earliest hours that differ),
// within the caller's time bound:
//
//  1. each side's rows in the ranges (by its own time column) are cut into
//     hour buckets of that column (backend.hourBucket), and each bucket
//     summarized by its row count and the sum of its rows' hashes
//     (backend.rowHash);
//  2. only the buckets whose summaries differ are compared row by row: a
//     GROUP BY over both sides' rows there, counting each distinct row on
//     each side; a row counted n times on one side and m < n times on the
//     other is n-m rows only in that side;
//  3. with a grain (the model's key columns), the rows only in the
//     candidate are joined with those only in the incumbent on the key:
//     each pair is a changed row, and every non-key column counts the
//     pairs whose values differ in it (IS DISTINCT FROM: NULL equals
//     NULL).
//
// Step 1 is what makes a year of hourly rows quick to diff when few hours
// differ; a bucket whose two summaries agree by chance (a 64-bit sum of
// 64-bit hashes, and the count) is taken as equal.

// DiffSide is one side of a table diff: a snapshot table (in schema
// Schema) and its time column.
type DiffSide struct {
	Table, TimeColumn string
}

// TableDiff is what DiffTables found. The JSON keys are what `tidemark
// diff -o json` prints per model (docs/events.md, "ModelDiff").
type TableDiff struct {
	// Columns are the columns compared: the candidate's columns the
	// incumbent also has, in the candidate's order.
	Columns []string `json:"columns"`
	// CandidateOnlyColumns and IncumbentOnlyColumns are the columns one
	// side has and the other lacks (not compared).
	CandidateOnlyColumns []string `json:"candidate_only_columns,omitempty"`
	IncumbentOnlyColumns []string `json:"incumbent_only_columns,omitempty"`
	// CandidateRows and IncumbentRows count each side's rows in the ranges.
	CandidateRows int64 `json:"candidate_rows"`
	IncumbentRows int64 `json:"incumbent_rows"`
	// OnlyInCandidate and OnlyInIncumbent count the rows of one side the
	// other lacks (candidate EXCEPT ALL incumbent, and the reverse).
	OnlyInCandidate int64 `json:"only_in_candidate"`
	OnlyInIncumbent int64 `json:"only_in_incumbent"`
	// Grain is the key the changed rows were matched on; empty: no key
	// (Changed, ChangedColumns and Samples are then empty too).
	Grain []string `json:"grain,omitempty"`
	// Changed counts the pairs of a row only in the candidate and a row
	// only in the incumbent with the same key (one per key where the key
	// is unique on each side): rows whose key matches but whose values
	// differ. A key with a NULL matches nothing.
	Changed int64 `json:"changed"`
	// ChangedColumns counts, per non-key column, the changed pairs whose
	// values differ in that column.
	ChangedColumns map[string]int64 `json:"changed_columns,omitempty"`
	// ValueColumns are the non-key compared columns, the order of a
	// sample's values.
	ValueColumns []string `json:"value_columns,omitempty"`
	// Samples are at most DiffSamples changed pairs, in key order.
	Samples []ChangedRow `json:"samples,omitempty"`
	// Note says why the key was not used (a grain column missing from a
	// side), or is empty.
	Note string `json:"note,omitempty"`
}

// ChangedRow is one changed pair: its key (Grain's order) and both sides'
// values (ValueColumns' order), each value cut to DiffValueBytes.
type ChangedRow struct {
	Key       []any `json:"key"`
	Candidate []any `json:"candidate"`
	Incumbent []any `json:"incumbent"`
}

// Empty reports whether the two sides hold the same rows.
func (d TableDiff) Empty() bool { return d.OnlyInCandidate == 0 && d.OnlyInIncumbent == 0 }

// The bounds of a diff's answer.
const (
	// DiffSamples bounds the changed pairs a TableDiff shows.
	DiffSamples = 10
	// DiffValueBytes bounds each value of a sample (longer text is cut at
	// a UTF-8 boundary and marked "…").
	DiffValueBytes = 200
	// maxDiffRanges bounds the ranges one statement filters on (each is
	// two parameters); more are diffed in several statements, summed.
	maxDiffRanges = 256
)

// diffNames are the names the diff's statements give their own columns.
var diffNames = []string{"tidemark_bucket", "tidemark_hash", "tidemark_side", "tidemark_nc", "tidemark_ni"}

// ErrNoSharedColumns is returned by DiffTables when the two tables have
// no column in common: there is nothing to compare.
var ErrNoSharedColumns = errors.New("warehouse: the two tables share no column")

// DiffTables compares cand's rows with inc's over ranges (see TableDiff),
// matching changed rows on grain when it is set. It only reads: one
// read-only transaction per statement, in the sandbox, each statement
// bounded by ctx's deadline (or the model timeout, Options.ModelTimeout,
// when ctx has none); running out of it fails with ErrTimeout. Every
// table and column name is quoted, every bound bound.
func (w *Warehouse) DiffTables(ctx context.Context, cand, inc DiffSide, ranges []Range, grain []string) (TableDiff, error) {
	d, err := w.diffTables(ctx, cand, inc, ranges, grain)
	if err != nil {
		return TableDiff{}, fmt.Errorf("warehouse: diff %s against %s: %w", cand.Table, inc.Table, err)
	}
	return d, nil
}

func (w *Warehouse) diffTables(ctx context.Context, cand, inc DiffSide, ranges []Range, grain []string) (TableDiff, error) {
	d := TableDiff{Columns: []string{}}
	cc, err := w.tableColumns(ctx, cand.Table)
	if err != nil {
		return d, err
	}
	ic, err := w.tableColumns(ctx, inc.Table)
	if err != nil {
		return d, err
	}
	for _, c := range cc {
		if slices.Contains(ic, c) {
			d.Columns = append(d.Columns, c)
		} else {
			d.CandidateOnlyColumns = append(d.CandidateOnlyColumns, c)
		}
	}
	for _, c := range ic {
		if !slices.Contains(cc, c) {
			d.IncumbentOnlyColumns = append(d.IncumbentOnlyColumns, c)
		}
	}
	if len(d.Columns) == 0 {
		return d, ErrNoSharedColumns
	}
	for _, c := range d.Columns {
		if slices.Contains(diffNames, c) {
			return d, fmt.Errorf("column %q has a name the diff gives its own columns (%s): it cannot be compared", c, strings.Join(diffNames, ", "))
		}
	}
	grain = slices.Clone(grain)
	for i, g := range grain {
		// A column the SQL named unquoted in mixed case (userId) is
		// userid in a Postgres table (it folds unquoted names): the one
		// column equal to it but for case.
		if j := slices.IndexFunc(d.Columns, func(c string) bool { return strings.EqualFold(c, g) }); j >= 0 && !slices.Contains(d.Columns, g) &&
			!slices.ContainsFunc(d.Columns[j+1:], func(c string) bool { return strings.EqualFold(c, g) }) {
			grain[i], g = d.Columns[j], d.Columns[j]
		}
		if !slices.Contains(d.Columns, g) {
			d.Note = fmt.Sprintf("grain column %q is not a column of both tables: changed rows are not matched", g)
			grain = nil
			break
		}
	}
	if len(grain) > 0 {
		d.Grain = slices.Clone(grain)
		d.ChangedColumns = map[string]int64{}
		for _, c := range d.Columns {
			if !slices.Contains(grain, c) {
				d.ValueColumns = append(d.ValueColumns, c)
				d.ChangedColumns[c] = 0
			}
		}
	}
	if cand.TimeColumn == "" || inc.TimeColumn == "" {
		// A side computed whole: the whole tables, in one bucket.
		return d, w.diffChunk(ctx, &d, cand, inc, nil, true)
	}
	for chunk := range slices.Chunk(ranges, maxDiffRanges) {
		if err := w.diffChunk(ctx, &d, cand, inc, chunk, false); err != nil {
			return d, err
		}
	}
	return d, nil
}

// tableColumns lists a snapshot table's columns in order.
func (w *Warehouse) tableColumns(ctx context.Context, table string) ([]string, error) {
	rows, err := w.db.QueryContext(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position", Schema, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("snapshot table %s.%s does not exist", Schema, table)
	}
	return cols, nil
}

// diffChunk adds the diff over ranges (at most maxDiffRanges; whole: all
// rows, in one bucket) to d.
func (w *Warehouse) diffChunk(ctx context.Context, d *TableDiff, cand, inc DiffSide, ranges []Range, whole bool) error {
	if len(ranges) == 0 && !whole {
		return nil
	}
	with, args, join := diffWith(d, w.b, cand, inc, ranges, whole)
	count := func(expr string) string { return "CAST(coalesce(" + expr + ", 0) AS BIGINT)" }
	sel := []string{
		"(SELECT " + count("sum(n)") + " FROM ca)",
		"(SELECT " + count("sum(n)") + " FROM ia)",
		"(SELECT " + count("sum(tidemark_nc - tidemark_ni)") + " FROM oc)",
		"(SELECT " + count("sum(tidemark_ni - tidemark_nc)") + " FROM oi)",
		// The first differing hour and the last of the first DiffSamples:
		// where the samples are looked for.
		"(SELECT min(tidemark_bucket) FROM db)",
		fmt.Sprintf("(SELECT max(tidemark_bucket) FROM (SELECT tidemark_bucket FROM db ORDER BY tidemark_bucket LIMIT %d) x)", DiffSamples),
	}
	const counts = 4
	from := ""
	if len(d.Grain) > 0 {
		per := []string{"CAST(count(*) AS BIGINT)"}
		for _, v := range d.ValueColumns {
			per = append(per, fmt.Sprintf("CAST(count(*) FILTER (WHERE oc.%s IS DISTINCT FROM oi.%s) AS BIGINT)", quoteIdent(v), quoteIdent(v)))
		}
		sel = append(sel, "p.*")
		with += ",\np AS (SELECT " + strings.Join(per, ", ") + join + ")"
		from = " FROM p"
	}
	row, err := w.diffQuery(ctx, with+"\nSELECT "+strings.Join(sel, ", ")+from, args, 1)
	if err != nil {
		return err
	}
	want := counts + 2
	if len(d.Grain) > 0 {
		want += 1 + len(d.ValueColumns)
	}
	if len(row) != 1 || len(row[0]) != want {
		return fmt.Errorf("the diff's counts came back as %v", row)
	}
	r := row[0]
	n := make([]int64, len(r))
	for i, v := range r {
		if i == counts || i == counts+1 {
			continue // the hours
		}
		if n[i], err = asInt64(v); err != nil {
			return err
		}
	}
	d.CandidateRows += n[0]
	d.IncumbentRows += n[1]
	d.OnlyInCandidate += n[2]
	d.OnlyInIncumbent += n[3]
	if len(d.Grain) == 0 {
		return nil
	}
	changed := n[counts+2]
	d.Changed += changed
	for i, v := range d.ValueColumns {
		d.ChangedColumns[v] += n[counts+3+i]
	}
	need := DiffSamples - len(d.Samples)
	if changed == 0 || need <= 0 {
		return nil
	}
	// The samples: the first changed keys of the earliest hours that
	// differ (a second pass over those hours only), or, when they hold
	// fewer than asked, of all the ranges.
	var samples []ChangedRow
	if whole {
		samples, err = w.diffSamples(ctx, d, cand, inc, nil, true, need)
	} else {
		samples, err = w.diffSamples(ctx, d, cand, inc, clipRanges(ranges, r[counts], r[counts+1]), false, need)
		if err == nil && int64(len(samples)) < min(int64(need), changed) {
			samples, err = w.diffSamples(ctx, d, cand, inc, ranges, false, need)
		}
	}
	if err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	d.Samples = append(d.Samples, samples...)
	return nil
}

// clipRanges is ranges cut to [first, last+1h) (hours since the epoch,
// backend.hourBucket), the hours where the samples are looked for; nil
// when first or last is not an hour.
func clipRanges(ranges []Range, first, last any) []Range {
	fh, err1 := asInt64(first)
	lh, err2 := asInt64(last)
	if err1 != nil || err2 != nil {
		return nil
	}
	f, end := time.Unix(fh*3600, 0).UTC(), time.Unix((lh+1)*3600, 0).UTC()
	var out []Range
	for _, r := range ranges {
		s, e := r.Start, r.End
		if s.Before(f) {
			s = f
		}
		if e.After(end) {
			e = end
		}
		if s.Before(e) {
			out = append(out, Range{s, e})
		}
	}
	return out
}

// diffSamples reads at most n changed pairs over ranges (whole: all
// rows), in key order.
func (w *Warehouse) diffSamples(ctx context.Context, d *TableDiff, cand, inc DiffSide, ranges []Range, whole bool, n int) ([]ChangedRow, error) {
	if len(ranges) == 0 && !whole {
		return nil, nil
	}
	with, args, join := diffWith(d, w.b, cand, inc, ranges, whole)
	var pick, order []string
	for _, k := range d.Grain {
		pick = append(pick, "oc."+quoteIdent(k))
		order = append(order, "oc."+quoteIdent(k))
	}
	for _, s := range []string{"oc", "oi"} {
		for _, v := range d.ValueColumns {
			pick = append(pick, s+"."+quoteIdent(v))
		}
	}
	if len(d.ValueColumns) == 0 {
		pick = append(pick, "1") // a key of every column: nothing else to show
	}
	rows, err := w.diffQuery(ctx, fmt.Sprintf("%s\nSELECT %s%s ORDER BY %s LIMIT %d", with, strings.Join(pick, ", "), join, strings.Join(order, ", "), n), args, n)
	if err != nil {
		return nil, err
	}
	var out []ChangedRow
	k, v := len(d.Grain), len(d.ValueColumns)
	for _, r := range rows {
		if len(r) < k+2*v {
			return nil, fmt.Errorf("a sample came back as %v", r)
		}
		out = append(out, ChangedRow{Key: cutValues(r[:k]), Candidate: cutValues(r[k : k+v]), Incumbent: cutValues(r[k+v : k+2*v])})
	}
	return out, nil
}

// diffWith is the WITH clause of a diff over ranges and its arguments:
// each side's rows in the ranges with their hour and hash (c, i), the
// hours' summaries (ca, ia), the hours that differ (db), the rows there
// counted per side (g), the rows only in each side (oc, oi); and, with a
// grain, the join of oc and oi on it (" FROM oc JOIN oi ON …"). whole:
// every row of each side, all in bucket 0 (a side without a time
// column).
func diffWith(d *TableDiff, b backend, cand, inc DiffSide, ranges []Range, whole bool) (with string, args []any, join string) {
	var conds []string
	for _, r := range ranges {
		n := len(args)
		args = append(args, r.Start.UTC(), r.End.UTC())
		conds = append(conds, fmt.Sprintf("(%%[1]s >= CAST($%d AS TIMESTAMP) AND %%[1]s < CAST($%d AS TIMESTAMP))", n+1, n+2))
	}
	inRanges := "(" + strings.Join(conds, " OR ") + ")"

	quoted := make([]string, len(d.Columns))
	for i, c := range d.Columns {
		quoted[i] = quoteIdent(c)
	}
	cols := strings.Join(quoted, ", ")
	side := func(s DiffSide) string {
		tc := quoteIdent(s.TimeColumn)
		bucket, where := b.hourBucket(tc), fmt.Sprintf(inRanges, tc)
		if whole {
			bucket, where = "CAST(0 AS BIGINT)", "TRUE"
		}
		return fmt.Sprintf("SELECT %s, %s AS tidemark_bucket, %s AS tidemark_hash FROM %s WHERE %s",
			cols, bucket, b.rowHash(quoted), qualified(Schema, s.Table), where)
	}
	with = fmt.Sprintf(`WITH c AS NOT MATERIALIZED (%s), i AS NOT MATERIALIZED (%s),
ca AS (SELECT tidemark_bucket, count(*) AS n, sum(tidemark_hash) AS h FROM c GROUP BY tidemark_bucket),
ia AS (SELECT tidemark_bucket, count(*) AS n, sum(tidemark_hash) AS h FROM i GROUP BY tidemark_bucket),
db AS (SELECT coalesce(ca.tidemark_bucket, ia.tidemark_bucket) AS tidemark_bucket FROM ca FULL JOIN ia ON ca.tidemark_bucket = ia.tidemark_bucket
  WHERE ca.n IS DISTINCT FROM ia.n OR ca.h IS DISTINCT FROM ia.h),
g AS MATERIALIZED (SELECT %[3]s, count(*) FILTER (WHERE tidemark_side = 0) AS tidemark_nc, count(*) FILTER (WHERE tidemark_side = 1) AS tidemark_ni
  FROM (SELECT %[3]s, 0 AS tidemark_side FROM c WHERE tidemark_bucket IN (SELECT tidemark_bucket FROM db)
        UNION ALL SELECT %[3]s, 1 FROM i WHERE tidemark_bucket IN (SELECT tidemark_bucket FROM db)) u
  GROUP BY %[3]s),
oc AS (SELECT * FROM g WHERE tidemark_nc > tidemark_ni),
oi AS (SELECT * FROM g WHERE tidemark_ni > tidemark_nc)`, side(cand), side(inc), cols)
	if len(d.Grain) > 0 {
		var on []string
		for _, k := range d.Grain {
			on = append(on, fmt.Sprintf("oc.%s = oi.%s", quoteIdent(k), quoteIdent(k)))
		}
		join = " FROM oc JOIN oi ON " + strings.Join(on, " AND ")
	}
	return with, args, join
}

// diffQuery runs one statement of a diff in a read-only transaction in
// the sandbox, within ctx's deadline (the model timeout without one), and
// returns at most max rows.
func (w *Warehouse) diffQuery(ctx context.Context, q string, args []any, max int) ([][]any, error) {
	timeout := w.modelTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out [][]any
	err := w.inReadOnlyTx(tctx, func(c *sql.Conn) error {
		if err := w.b.sandbox(tctx, c, timeout); err != nil {
			return err
		}
		return w.b.queryOne(tctx, c, q, args, func(_ []string, row []any) (bool, error) {
			out = append(out, row)
			return len(out) < max, nil
		})
	})
	if err != nil && ctx.Err() == nil && (tctx.Err() != nil || isStatementTimeout(err)) {
		return nil, fmt.Errorf("%w (a diff, timeout %s): %w", ErrTimeout, timeout.Round(time.Millisecond), err)
	}
	return out, err
}

// cutValues bounds each value of a sample to DiffValueBytes: text is cut
// at a UTF-8 boundary and marked "…"; a value whose JSON is longer (a
// list, a struct) becomes its text, cut.
func cutValues(vs []any) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		switch x := v.(type) {
		case nil, bool, int64, int32, int16, int8, int, uint64, uint32, uint16, uint8, float64, float32, time.Time:
			out[i] = v
		case string:
			out[i] = cutText(x)
		case []byte:
			out[i] = cutText(string(x))
		default:
			if b, err := json.Marshal(v); err == nil && len(b) <= DiffValueBytes {
				out[i] = v
			} else {
				out[i] = cutText(fmt.Sprint(v))
			}
		}
	}
	return out
}

// cutText is s cut to DiffValueBytes at a UTF-8 boundary, marked "…".
func cutText(s string) string {
	if len(s) <= DiffValueBytes {
		return s
	}
	n := DiffValueBytes - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
