package warehouse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// totals is a full model: each user's views before the computation's end.
func totals(table string) Model {
	return Model{Name: "totals", Table: table, Kind: KindFull, Snapshot: "totals@v1",
		SQL: `SELECT user_id, CAST(count(*) AS BIGINT) AS views FROM raw.page_views WHERE ts < @end_ts GROUP BY 1`}
}

func TestFullReplacedWhole(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := totals("totals__1")
		sum := func() int64 {
			return scalar(t, w, `SELECT CAST(coalesce(sum(views), 0) AS BIGINT) FROM tidemark.totals__1`)
		}
		before := func(i int) int64 {
			return scalar(t, w, "SELECT count(*) FROM raw.page_views WHERE ts < CAST($1 AS TIMESTAMP)", day(i))
		}
		if n := write(t, w, m, Range{day(0), day(1)}); n != 13 {
			t.Fatalf("first computation inserted %d rows, want 13 (one per user)", n)
		}
		if got, want := sum(), before(1); got != want {
			t.Fatalf("after [0, 1): %d views, want %d", got, want)
		}
		if n := write(t, w, m, Range{day(0), day(3)}); n != 13 {
			t.Fatalf("second computation inserted %d rows, want 13", n)
		}
		// Replaced whole: the first computation's rows are gone.
		if got, want := scalar(t, w, "SELECT count(*) FROM tidemark.totals__1"), int64(13); got != want {
			t.Fatalf("the table holds %d rows, want %d: a computation must replace them all", got, want)
		}
		if got, want := sum(), before(3); got != want {
			t.Fatalf("after [0, 3): %d views, want %d", got, want)
		}
		// A stale computation (an older end) writes nothing and succeeds.
		if n := write(t, w, m, Range{day(0), day(2)}); n != 0 {
			t.Fatalf("computation ending day 2 inserted %d rows, want none (older than the table's)", n)
		}
		if got, want := sum(), before(3); got != want {
			t.Fatalf("after a stale computation: %d views, want %d", got, want)
		}
		// A computation as of the same end recomputes the object: that is
		// a restatement's or a catch-up's recompute (the upstream's rows
		// changed), which must not keep the old rows.
		mustExec(t, w, "INSERT INTO raw.page_views SELECT * FROM raw.page_views WHERE ts < CAST($1 AS TIMESTAMP) LIMIT 5", day(1))
		if n := write(t, w, m, Range{day(0), day(3)}); n != 13 {
			t.Fatalf("a recomputation as of the same end inserted %d rows, want 13", n)
		}
		if got, want := sum(), before(3); got != want {
			t.Fatalf("after a recomputation as of the same end: %d views, want %d (the source's rows now)", got, want)
		}
		recs, err := w.Writers(t.Context(), m.Table)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Snapshot != "totals@v1" || !recs[0].Query.End.Equal(day(3)) || recs[0].Rows != 13 {
			t.Fatalf("writers = %+v, want one record of totals@v1 over [0, 3) with 13 rows", recs)
		}
		st, err := w.Stats(t.Context(), m.Table, "")
		if err != nil || st.Rows != 13 {
			t.Fatalf("Stats = %+v, %v", st, err)
		}
	})
}

func TestViewModel(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		up := hourly("hourly__1")
		writeDays(t, w, up, 0, 1)
		v := Model{Name: "per_user", Table: "per_user__1", Kind: KindView, Snapshot: "per_user@v1",
			Upstream: map[string]string{"hourly": "hourly__1"},
			SQL:      `SELECT user_id, CAST(sum(views) AS BIGINT) AS views FROM hourly WHERE hour < @end_ts GROUP BY 1`}
		if n := write(t, w, v, Range{day(0), day(2)}); n != 0 {
			t.Fatalf("a view's computation inserted %d rows", n)
		}
		if view, err := w.isView(t.Context(), v.Table); err != nil || !view {
			t.Fatalf("tidemark.%s is not a view (%v)", v.Table, err)
		}
		if err := w.Promote(t.Context(), "dev", map[string]string{"per_user": v.Table}); err != nil {
			t.Fatal(err)
		}
		viewed := func() int64 {
			_, rows, err := w.Query(t.Context(), "SELECT CAST(sum(views) AS BIGINT) FROM dev.per_user")
			if err != nil {
				t.Fatal(err)
			}
			n, err := asInt64(rows[0][0])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		want := scalar(t, w, "SELECT count(*) FROM raw.page_views WHERE ts < CAST($1 AS TIMESTAMP)", day(2))
		if got := viewed(); got != want {
			t.Fatalf("dev.per_user sums %d views, want %d", got, want)
		}
		// A view reads its upstream as it is now (within its own bounds).
		writeDays(t, w, up, 2)
		if got := viewed(); got != want {
			t.Fatalf("after day 2 was written: %d views, want %d (@end_ts is day 2)", got, want)
		}
		write(t, w, v, Range{day(0), day(3)})
		if got, want := viewed(), scalar(t, w, "SELECT count(*) FROM raw.page_views WHERE ts < CAST($1 AS TIMESTAMP)", day(3)); got != want {
			t.Fatalf("after the view's computation as of day 3: %d views, want %d", got, want)
		}
		// The view reads its upstream table, which the janitor must keep.
		readers, err := w.ViewsReading(t.Context(), "hourly__1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(readers, "tidemark.per_user__1") {
			t.Fatalf("ViewsReading(hourly__1) = %v, want the view model's view", readers)
		}
		if d, err := w.Verify(t.Context(), "dev", v, []Range{{day(0), day(3)}}); err != nil || !d.Empty() {
			t.Fatalf("Verify = %+v, %v", d, err)
		}
		// The env's view reads it: kept. Once unread, it is dropped as a
		// view.
		if err := w.DropTable(t.Context(), v.Table); !errors.Is(err, ErrInUse) {
			t.Fatalf("DropTable of a viewed view model = %v, want ErrInUse", err)
		}
		mustExec(t, w, "DROP VIEW dev.per_user")
		if err := w.DropTable(t.Context(), v.Table); err != nil {
			t.Fatal(err)
		}
		if n := scalar(t, w, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'tidemark' AND table_name = 'per_user__1'"); n != 0 {
			t.Fatalf("the view model's view is still there after DropTable")
		}
	})
}

const seedCSV = `id,name,day,score,ok
1,a,2024-01-01,1.5,true
2,b,2024-01-02,,false
3,"c,d",2024-01-03,2.25,true
4,'); DROP TABLE raw.page_views; --,2024-01-04,3,false
`

func TestSeedLoaded(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := Model{Name: "people", Table: "people__1", Kind: KindSeed, Snapshot: "people@v1", Seed: seedCSV}
		if n := write(t, w, m, Range{day(0), day(1)}); n != 4 {
			t.Fatalf("seed load inserted %d rows, want 4", n)
		}
		rows, err := w.DB().QueryContext(t.Context(), "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'tidemark' AND table_name = 'people__1' ORDER BY ordinal_position")
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for rows.Next() {
			var c, ty string
			if err := rows.Scan(&c, &ty); err != nil {
				t.Fatal(err)
			}
			types = append(types, c+" "+strings.ToUpper(ty))
		}
		rows.Close()
		want := map[string][]string{
			"duckdb":   {"id BIGINT", "name VARCHAR", "day DATE", "score DOUBLE", "ok BOOLEAN"},
			"postgres": {"id BIGINT", "name TEXT", "day DATE", "score DOUBLE PRECISION", "ok BOOLEAN"},
		}[w.Engine()]
		if !slices.Equal(types, want) {
			t.Fatalf("seed columns = %v, want %v", types, want)
		}
		if n := scalar(t, w, `SELECT count(*) FROM tidemark.people__1 WHERE id = 3 AND name = 'c,d' AND day = DATE '2024-01-03' AND score = 2.25 AND ok`); n != 1 {
			t.Fatal("row 3 is not loaded as written")
		}
		if n := scalar(t, w, `SELECT count(*) FROM tidemark.people__1 WHERE id = 2 AND score IS NULL AND NOT ok`); n != 1 {
			t.Fatal("row 2's empty score is not NULL")
		}
		if n := scalar(t, w, `SELECT count(*) FROM tidemark.people__1 WHERE name = '''); DROP TABLE raw.page_views; --'`); n != 1 {
			t.Fatal("row 4's text is not loaded as a value")
		}
		// Reloading the same seed (a later computation) writes nothing.
		mustExec(t, w, "UPDATE tidemark.people__1 SET name = 'changed' WHERE id = 1")
		if n := write(t, w, m, Range{day(0), day(2)}); n != 0 {
			t.Fatalf("a second load inserted %d rows, want none", n)
		}
		if n := scalar(t, w, `SELECT count(*) FROM tidemark.people__1 WHERE name = 'changed'`); n != 1 {
			t.Fatal("a second load of the same seed rewrote the table")
		}
		if n := scalar(t, w, "SELECT count(*) FROM raw.page_views"); n != sourceRows {
			t.Fatalf("raw.page_views holds %d rows", n)
		}
	})
}

// TestSeedSandbox: the CSV reader's sandbox reads its own file and nothing
// else, and cannot be reconfigured.
func TestSeedSandbox(t *testing.T) {
	dir := t.TempDir()
	mine, other := filepath.Join(dir, "seed.csv"), filepath.Join(dir, "other.csv")
	if err := os.WriteFile(mine, []byte("a\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("secret\n42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := openSeedSandbox(t.Context(), mine)
	if errors.Is(err, ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := scanSeed(t.Context(), db, mine)
	if err != nil || len(s.rows) != 1 || s.rows[0][0] != "1" {
		t.Fatalf("reading its own file: %+v, %v", s, err)
	}
	for _, path := range []string{other, "/etc/passwd"} {
		if _, err := scanSeed(t.Context(), db, path); err == nil {
			t.Errorf("the sandbox read %s", path)
		}
		var n int64
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM read_text("+sqlString(path)+")").Scan(&n); err == nil {
			t.Errorf("the sandbox read %s with read_text", path)
		}
	}
	for _, q := range []string{
		"SET enable_external_access = true",
		"SET GLOBAL allowed_paths = ['/etc/passwd']",
		"SET GLOBAL allowed_directories = ['/']",
		"COPY (SELECT 1) TO " + sqlString(filepath.Join(dir, "out.csv")),
	} {
		if _, err := db.ExecContext(t.Context(), q); err == nil {
			t.Errorf("the sandbox ran %s", q)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.csv")); err == nil {
		t.Error("the sandbox wrote a file")
	}
	// A seed's content is data: content naming another file reads
	// nothing of it, and leaves no file behind.
	got, err := readSeed(t.Context(), "path\n"+other+"\n/etc/passwd\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.cols) != 1 || got.cols[0].Name != "path" || len(got.rows) != 2 || got.rows[0][0] != other || got.rows[1][0] != "/etc/passwd" {
		t.Fatalf("content naming files was read as %+v", got)
	}
	// The dialect is CSV's, not sniffed: a row longer than the header is
	// refused (a sniffer takes it for the header, skipping the rows
	// before it).
	if got, err := readSeed(t.Context(), "a,b\n1,2\n3,4,5,6\n", 0); err == nil || strings.Contains(err.Error(), "tidemark-seed-") {
		t.Fatalf("a ragged seed was read as %+v (%v): want an error naming no file", got, err)
	}
}

// TestWholeAuditsVerifyDiff: audits, verify and diff of a full model
// read its whole table (it has no time column).
func TestWholeAuditsVerifyDiff(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		m := totals("totals__1")
		r := Range{day(0), day(3)}
		write(t, w, m, r)
		res := w.Audit(ctx, m, []Audit{
			{Kind: AuditNotNull, Columns: []string{"user_id"}},
			{Kind: AuditUniqueValues, Columns: []string{"user_id"}},
			{Name: "thirteen", Kind: AuditNumberOfRows, Threshold: 13},
			{Name: "fourteen", Kind: AuditNumberOfRows, Threshold: 14},
			{Name: "bounded", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE views > (SELECT count(*) FROM raw.page_views WHERE ts < @end_ts)"},
			{Name: "busy", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE views > 40"},
		}, r.Start, r.End)
		want := []struct {
			passed bool
			count  int64
		}{{true, 0}, {true, 0}, {true, 13}, {false, 13}, {true, 0}, {false, 13}}
		for i, x := range res {
			if x.Error != "" || x.Passed != want[i].passed || x.Count != want[i].count {
				t.Errorf("audit %s = %+v, want passed %v, count %d", x.Name, x, want[i].passed, want[i].count)
			}
		}

		if err := w.Promote(ctx, "prod", map[string]string{"totals": m.Table}); err != nil {
			t.Fatal(err)
		}
		if d, err := w.Verify(ctx, "prod", m, []Range{r}); err != nil || !d.Empty() {
			t.Fatalf("Verify of an untouched full model = %+v, %v", d, err)
		}
		inc := totals("totals__2")
		write(t, w, inc, r)
		same, err := w.DiffTables(ctx, DiffSide{Table: m.Table}, DiffSide{Table: inc.Table}, nil, []string{"user_id"})
		if err != nil || !same.Empty() || same.CandidateRows != 13 || same.IncumbentRows != 13 {
			t.Fatalf("DiffTables of two equal full tables = %+v, %v", same, err)
		}

		mustExec(t, w, "UPDATE tidemark.totals__1 SET views = views + 1 WHERE user_id = 0")
		d, err := w.Verify(ctx, "prod", m, []Range{r})
		if err != nil || d.OnlyInView != 1 || d.OnlyInRecompute != 1 {
			t.Fatalf("Verify of a tampered full model = %+v, %v; want one row on each side", d, err)
		}
		diff, err := w.DiffTables(ctx, DiffSide{Table: m.Table}, DiffSide{Table: inc.Table}, nil, []string{"user_id"})
		if err != nil || diff.OnlyInCandidate != 1 || diff.OnlyInIncumbent != 1 || diff.Changed != 1 || diff.ChangedColumns["views"] != 1 || len(diff.Samples) != 1 {
			t.Fatalf("DiffTables of a tampered full table = %+v, %v; want one changed row", diff, err)
		}
	})
}

// TestSeedColumnNames: a seed's column names are identifiers both engines
// keep whole: one longer than 63 bytes (Postgres would cut it, and two
// such names could become one) is refused, naming it, as are more columns
// than a Postgres table holds.
func TestSeedColumnNames(t *testing.T) {
	long := strings.Repeat("x", 64)
	if _, err := SeedColumns(t.Context(), "a,"+long+"\n1,2\n", 0); errors.Is(err, ErrNoCgo) {
		t.Skip(err)
	} else if err == nil || !strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "63") {
		t.Fatalf("a 64-byte column name: %v", err)
	}
	if _, err := SeedColumns(t.Context(), "a,"+long[:63]+"\n1,2\n", 0); err != nil {
		t.Fatalf("a 63-byte column name: %v", err)
	}
	header := make([]string, 1601)
	row := make([]string, len(header))
	for i := range header {
		header[i], row[i] = fmt.Sprintf("c%d", i), "1"
	}
	if _, err := SeedColumns(t.Context(), strings.Join(header, ",")+"\n"+strings.Join(row, ",")+"\n", 0); err == nil || !strings.Contains(err.Error(), "1601 columns") {
		t.Fatalf("1601 columns: %v", err)
	}
}

// TestSeedMixedCaseHeader: a seed's header names its columns as an
// unquoted identifier would (lower case, as SQLMesh normalizes DuckDB's),
// so a model reading them unquoted, as written in the CSV, computes on
// both engines (Postgres folds an unquoted OrderID to orderid).
func TestSeedMixedCaseHeader(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		s := Model{Name: "people", Table: "people__1", Kind: KindSeed, Snapshot: "people@v1", Seed: "OrderID,Name\n1,x\n2,y\n"}
		write(t, w, s, Range{day(0), day(1)})
		m := Model{Name: "ids", Table: "ids__1", Kind: KindFull, Snapshot: "ids@v1", Upstream: map[string]string{"people": "people__1"},
			SQL: "SELECT OrderID AS id, Name FROM people"}
		if n, err := w.WriteInterval(t.Context(), m, day(0), day(1)); err != nil || n != 2 {
			t.Fatalf("a model reading the seed's OrderID: %d rows, %v", n, err)
		}
	})
}
