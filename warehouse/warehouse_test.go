package warehouse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// eachBackend runs fn against a fresh warehouse on every engine: a DuckDB
// file in t.TempDir() and a fresh database on the private Postgres. The
// warehouse holds the source table raw.page_views.
func eachBackend(t *testing.T, fn func(t *testing.T, w *Warehouse)) {
	backends := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"duckdb", func(t *testing.T) string { return filepath.Join(t.TempDir(), "w.duckdb") }},
		{"postgres", newPostgresDSN},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			w, err := Open(t.Context(), b.dsn(t), Options{Threads: 2, MemoryLimit: "512MB"})
			if errors.Is(err, ErrNoCgo) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			seed(t, w)
			fn(t, w)
		})
	}
}

// The source: 2,000 page views, one every 7 minutes from day0 (about 9.7
// days), 13 users, DECIMAL amounts.
var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	sourceRows = 2000
	days       = 10
)

func seed(t *testing.T, w *Warehouse) {
	t.Helper()
	mustExec(t, w, "CREATE SCHEMA raw")
	mustExec(t, w, `CREATE TABLE raw.page_views AS
		SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL '7 minutes' AS TIMESTAMP) AS ts,
		       CAST(i % 13 AS BIGINT) AS user_id,
		       CAST(i % 100 AS DECIMAL(10,2)) / 4 AS amount
		FROM generate_series(0, 1999) AS t(i)`)
	if w.Engine() == "postgres" {
		// The sandbox reads only what it is granted: an operator grants
		// the source schemas its models read.
		mustExec(t, w, "GRANT USAGE ON SCHEMA raw TO "+SandboxRole)
		mustExec(t, w, "GRANT SELECT ON ALL TABLES IN SCHEMA raw TO "+SandboxRole)
	}
}

func mustExec(t *testing.T, w *Warehouse, sql string, args ...any) {
	t.Helper()
	if _, err := w.DB().ExecContext(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func scalar(t *testing.T, w *Warehouse, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := w.DB().QueryRowContext(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func day(i int) time.Time { return day0.AddDate(0, 0, i) }

func dayRanges() []Range {
	rs := make([]Range, days)
	for i := range rs {
		rs[i] = Range{day(i), day(i + 1)}
	}
	return rs
}

var full = Range{day(0), day(days)}

func hourly(table string) Model {
	return Model{
		Name: "hourly", Table: table, TimeColumn: "hour",
		SQL: `SELECT CAST(date_trunc('hour', ts) AS TIMESTAMP) AS hour, user_id,
			CAST(count(*) AS BIGINT) AS views, sum(amount) AS amount
			FROM raw.page_views WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`,
	}
}

// daily rolls hourly up; it reads the upstream snapshot table through the
// CTE binding, and has its own WITH.
func daily(table, hourlyTable string) Model {
	return Model{
		Name: "daily", Table: table, TimeColumn: "day",
		Upstream: map[string]string{"hourly": hourlyTable},
		SQL: `WITH h AS (SELECT * FROM hourly WHERE hour >= @start_ts AND hour < @end_ts)
			SELECT CAST(date_trunc('day', hour) AS TIMESTAMP) AS day,
			CAST(count(DISTINCT user_id) AS BIGINT) AS users,
			CAST(sum(views) AS BIGINT) AS views, sum(amount) AS amount
			FROM h GROUP BY 1`,
	}
}

func write(t *testing.T, w *Warehouse, m Model, r Range) int64 {
	t.Helper()
	n, err := w.WriteInterval(t.Context(), m, r.Start, r.End)
	if err != nil {
		t.Fatalf("WriteInterval(%s, %s): %v", m.Table, r.Start.Format(time.DateOnly), err)
	}
	return n
}

// writeDays writes the given days of m, one interval each, and returns the
// rows inserted.
func writeDays(t *testing.T, w *Warehouse, m Model, order ...int) int64 {
	t.Helper()
	var n int64
	for _, i := range order {
		n += write(t, w, m, Range{day(i), day(i + 1)})
	}
	return n
}

// sameRows fails unless the two snapshot tables hold the same bag of rows
// (and some).
func sameRows(t *testing.T, w *Warehouse, a, b string) {
	t.Helper()
	ta, tb := qualified(Schema, a), qualified(Schema, b)
	diff := scalar(t, w, fmt.Sprintf(`SELECT (SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s) x)
		+ (SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s) y)`, ta, tb, tb, ta))
	na, nb := scalar(t, w, "SELECT count(*) FROM "+ta), scalar(t, w, "SELECT count(*) FROM "+tb)
	if diff != 0 || na != nb || na == 0 {
		t.Fatalf("%s (%d rows) and %s (%d rows) differ in %d rows", a, na, b, nb, diff)
	}
}

func TestWriteIntervalsIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ref := write(t, w, hourly("hourly__full"), full)
		if n := writeDays(t, w, hourly("hourly__a"), 3, 0, 7, 1, 9, 2, 5, 8, 4, 6); n != ref {
			t.Fatalf("day by day inserted %d rows, one full write %d", n, ref)
		}
		writeDays(t, w, hourly("hourly__a"), 2, 5, 0, 9)
		sameRows(t, w, "hourly__a", "hourly__full")

		// The rollup reads its upstream snapshot, not an environment.
		write(t, w, daily("daily__full", "hourly__full"), full)
		writeDays(t, w, daily("daily__a", "hourly__a"), 9, 8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 9)
		sameRows(t, w, "daily__a", "daily__full")
		if n := scalar(t, w, `SELECT sum(views) FROM tidemark."daily__a"`); n != sourceRows {
			t.Fatalf("daily views sum to %d, want %d", n, sourceRows)
		}

		if err := w.Promote(t.Context(), "prod", map[string]string{"hourly": "hourly__a", "daily": "daily__a"}); err != nil {
			t.Fatal(err)
		}
		for _, m := range []Model{hourly("hourly__a"), daily("daily__a", "hourly__a")} {
			d, err := w.Verify(t.Context(), "prod", m, dayRanges())
			if err != nil {
				t.Fatal(err)
			}
			if !d.Empty() {
				t.Fatalf("Verify %s: %+v", m.Name, d)
			}
		}

		st, err := w.Stats(t.Context(), "hourly__a", "hour")
		if err != nil {
			t.Fatal(err)
		}
		last := day0.Add(time.Duration(sourceRows-1) * 7 * time.Minute).Truncate(time.Hour)
		if st.Rows != ref || !st.MaxTime.Equal(last) {
			t.Fatalf("Stats = %+v, want %d rows up to %s", st, ref, last)
		}
		st, err = w.Stats(t.Context(), "hourly__full", "hour")
		if err != nil || st.Rows != ref {
			t.Fatalf("Stats(full) = %+v, %v", st, err)
		}
	})
}

func TestLeakyQuery(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		write(t, w, hourly("hourly__full"), full)
		leaky := hourly("hourly__leaky")
		leaky.SQL = `SELECT CAST(date_trunc('hour', ts) AS TIMESTAMP) AS hour, user_id,
			CAST(count(*) AS BIGINT) AS views, sum(amount) AS amount
			FROM raw.page_views GROUP BY 1, 2` // ignores its interval
		for range 2 {
			for _, i := range []int{4, 1, 0, 9, 2, 3, 8, 5, 7, 6} {
				want := scalar(t, w, `SELECT count(*) FROM tidemark."hourly__full" WHERE hour >= $1 AND hour < $2`, day(i), day(i+1))
				if n := write(t, w, leaky, Range{day(i), day(i + 1)}); n != want {
					t.Fatalf("day %d: inserted %d rows, want %d", i, n, want)
				}
			}
		}
		sameRows(t, w, "hourly__leaky", "hourly__full")
	})
}

func TestPromoteSwap(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		v2 := hourly("hourly__v2")
		v2.SQL = strings.Replace(v2.SQL, "CAST(count(*) AS BIGINT)", "CAST(2 * count(*) AS BIGINT)", 1)
		write(t, w, hourly("hourly__v1"), full)
		write(t, w, v2, full)
		write(t, w, daily("daily__v1", "hourly__v1"), full)
		write(t, w, daily("daily__v2", "hourly__v2"), full)
		sums := func() (h, d int64) {
			return scalar(t, w, "SELECT sum(views) FROM prod.hourly"), scalar(t, w, "SELECT sum(views) FROM prod.daily")
		}
		check := func(what string, h, d int64) {
			t.Helper()
			if gh, gd := sums(); gh != h || gd != d {
				t.Fatalf("%s: prod sums hourly %d daily %d, want %d %d", what, gh, gd, h, d)
			}
		}

		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v1", "daily": "daily__v1"}); err != nil {
			t.Fatal(err)
		}
		check("v1", sourceRows, sourceRows)
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v2", "daily": "daily__v2"}); err != nil {
			t.Fatal(err)
		}
		check("v2", 2*sourceRows, 2*sourceRows)

		// A reader during a promotion sees the old views or the new ones,
		// never a mix, and does not fail. It reads both views in one
		// statement while the promotion has swapped daily but not yet
		// hourly: DuckDB answers from its snapshot at once; on Postgres
		// the reader waits for daily's lock while holding hourly, the
		// promotion gives up waiting for hourly (lock_timeout) and starts
		// over after the reader.
		type sumPair struct {
			h, d int64
			err  error
		}
		read := make(chan sumPair, 1)
		var got *sumPair
		calls := 0
		testHookPromote = func(model string) error {
			if model != "daily" {
				return nil
			}
			if calls++; calls > 1 {
				return nil
			}
			go func() {
				var p sumPair
				p.err = w.DB().QueryRowContext(ctx, "SELECT (SELECT sum(views) FROM prod.hourly), (SELECT sum(views) FROM prod.daily)").Scan(&p.h, &p.d)
				read <- p
			}()
			select {
			case p := <-read:
				got = &p
			case <-time.After(300 * time.Millisecond): // the reader waits for locks
			}
			return nil
		}
		err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v1", "daily": "daily__v1"})
		testHookPromote = nil
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			p := <-read
			got = &p
		}
		switch {
		case got.err != nil:
			t.Fatalf("%s: the reader during the promotion failed: %v", w.Engine(), got.err)
		case got.h == 2*sourceRows && got.d == 2*sourceRows:
			t.Logf("%s: the reader during the promotion saw the old views", w.Engine())
		case got.h == sourceRows && got.d == sourceRows:
			t.Logf("%s: the reader during the promotion saw the new views", w.Engine())
		default:
			t.Fatalf("a reader during the promotion saw a mix: hourly %d daily %d", got.h, got.d)
		}
		check("v1 again", sourceRows, sourceRows)
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v2", "daily": "daily__v2"}); err != nil {
			t.Fatal(err)
		}

		// A promotion failing after its first swap (daily sorts first)
		// changes nothing.
		testHookPromote = func(model string) error {
			if model == "hourly" {
				return errors.New("injected failure")
			}
			return nil
		}
		err = w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v1", "daily": "daily__v1"})
		testHookPromote = nil
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("failing promotion: %v", err)
		}
		check("after the failed promotion", 2*sourceRows, 2*sourceRows)

		// A missing snapshot table fails the whole promotion too.
		err = w.Promote(ctx, "prod", map[string]string{"daily": "daily__v1", "hourly": "hourly__missing"})
		if err == nil || !strings.Contains(err.Error(), "hourly__missing") {
			t.Fatalf("promotion to a missing table: %v", err)
		}
		check("after the missing table", 2*sourceRows, 2*sourceRows)

		// A view whose columns change (Postgres refuses OR REPLACE there).
		v3 := hourly("hourly__v3")
		v3.SQL = `SELECT CAST(date_trunc('hour', ts) AS TIMESTAMP) AS hour, CAST(count(*) AS BIGINT) AS views
			FROM raw.page_views WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1`
		write(t, w, v3, full)
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__v3", "daily": "daily__v1"}); err != nil {
			t.Fatal(err)
		}
		check("v3", sourceRows, sourceRows)

		// Another environment is independent.
		if err := w.Promote(ctx, "dev", map[string]string{"hourly": "hourly__v2"}); err != nil {
			t.Fatal(err)
		}
		if n := scalar(t, w, "SELECT sum(views) FROM dev.hourly"); n != 2*sourceRows {
			t.Fatalf("dev.hourly sums %d", n)
		}
		check("prod after dev", sourceRows, sourceRows)
	})
}

func TestVerifyFindsTamperedRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		m := hourly("hourly__t")
		writeDays(t, w, m, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__t"}); err != nil {
			t.Fatal(err)
		}
		if d, err := w.Verify(ctx, "prod", m, dayRanges()); err != nil || !d.Empty() {
			t.Fatalf("Verify before tampering: %+v, %v", d, err)
		}
		mustExec(t, w, `DELETE FROM tidemark."hourly__t" WHERE hour = $1 AND user_id = (SELECT min(user_id) FROM tidemark."hourly__t" WHERE hour = $1)`, day(3).Add(5*time.Hour))
		d, err := w.Verify(ctx, "prod", m, dayRanges())
		if err != nil {
			t.Fatal(err)
		}
		if d.OnlyInView != 0 || d.OnlyInRecompute != 1 || len(d.Samples) != 1 || d.Samples[0].Side != "recompute" {
			t.Fatalf("after deleting a row: %+v", d)
		}
		if len(d.Columns) != 4 || d.Columns[0] != "hour" || len(d.Samples[0].Values) != 4 {
			t.Fatalf("sample: %v %v", d.Columns, d.Samples)
		}
		// A duplicated row shows on the view's side (bags, not sets).
		mustExec(t, w, `INSERT INTO tidemark."hourly__t" SELECT * FROM tidemark."hourly__t" WHERE hour = $1`, day(7))
		d, err = w.Verify(ctx, "prod", m, dayRanges())
		if err != nil {
			t.Fatal(err)
		}
		dup := scalar(t, w, `SELECT count(*) FROM tidemark."hourly__t" WHERE hour = $1`, day(7)) / 2
		if d.OnlyInView != dup || d.OnlyInRecompute != 1 {
			t.Fatalf("after duplicating %d rows: %+v", dup, d)
		}
		// Outside the checked ranges nothing is compared.
		if d, err := w.Verify(ctx, "prod", m, []Range{{day(0), day(3)}}); err != nil || !d.Empty() {
			t.Fatalf("Verify of untouched days: %+v, %v", d, err)
		}
		// Rewriting the tampered days repairs them.
		writeDays(t, w, m, 3, 7)
		if d, err := w.Verify(ctx, "prod", m, dayRanges()); err != nil || !d.Empty() {
			t.Fatalf("Verify after repair: %+v, %v", d, err)
		}
	})
}

func TestQueryIsReadOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		n := write(t, w, hourly("hourly__q"), full)
		cols, rows, err := w.Query(ctx, `SELECT count(*) AS n FROM tidemark."hourly__q"`)
		if err != nil {
			t.Fatal(err)
		}
		if len(cols) != 1 || cols[0] != "n" || len(rows) != 1 || fmt.Sprint(rows[0][0]) != fmt.Sprint(n) {
			t.Fatalf("Query = %v %v, want n=%d", cols, rows, n)
		}
		for _, q := range []string{
			`DELETE FROM tidemark."hourly__q"`,
			`SELECT 1; DELETE FROM tidemark."hourly__q"`,
			`DROP TABLE tidemark."hourly__q"`,
			`CREATE TABLE x AS SELECT 1 AS a`,
		} {
			if _, _, err := w.Query(ctx, q); !errors.Is(err, ErrNotReadOnly) {
				t.Errorf("Query(%q) = %v, want ErrNotReadOnly", q, err)
			}
		}
		// A write hidden in a WITH is stopped by the read-only transaction
		// (Postgres) or the parser (DuckDB).
		if _, _, err := w.Query(ctx, `WITH d AS (DELETE FROM tidemark."hourly__q" RETURNING *) SELECT count(*) FROM d`); err == nil {
			t.Error("a DELETE inside WITH ran")
		}
		if got := scalar(t, w, `SELECT count(*) FROM tidemark."hourly__q"`); got != n {
			t.Fatalf("the table has %d rows, want %d", got, n)
		}
		// The read-only transaction itself refuses writes.
		conn, err := w.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, w.b.beginReadOnly()); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM tidemark."hourly__q"`); err == nil {
			t.Error("a DELETE ran in a read-only transaction")
		}
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		if got := scalar(t, w, `SELECT count(*) FROM tidemark."hourly__q"`); got != n {
			t.Fatalf("the table has %d rows, want %d", got, n)
		}
		// The connection is usable afterwards (the read-only transaction
		// was ended).
		for range 5 {
			if _, _, err := w.Query(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
		}
		write(t, w, hourly("hourly__q"), Range{day(0), day(1)})
	})
}

func TestDropTableRefusesViewedTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		write(t, w, hourly("hourly__d"), full)
		write(t, w, hourly("hourly__d2"), full)
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__d"}); err != nil {
			t.Fatal(err)
		}
		err := w.DropTable(ctx, "hourly__d")
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "prod.hourly") {
			t.Fatalf("DropTable of a viewed table: %v", err)
		}
		if err := w.Promote(ctx, "prod", map[string]string{"hourly": "hourly__d2"}); err != nil {
			t.Fatal(err)
		}
		if err := w.DropTable(ctx, "hourly__d"); err != nil {
			t.Fatalf("DropTable after the view moved: %v", err)
		}
		if err := w.DropTable(ctx, "hourly__d2"); !errors.Is(err, ErrInUse) {
			t.Fatalf("DropTable of the newly viewed table: %v", err)
		}
		if n := scalar(t, w, "SELECT count(*) FROM prod.hourly"); n == 0 {
			t.Fatal("prod.hourly is empty")
		}
		// A dropped table is recreated by the next write.
		write(t, w, hourly("hourly__d"), Range{day(0), day(1)})
	})
}

func TestConcurrentWrites(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		write(t, w, hourly("hourly__full"), full)
		run := func(pick func(g, i int) bool) {
			var wg sync.WaitGroup
			errs := make(chan error, days*4)
			for g := range 4 {
				wg.Go(func() {
					for i := range days {
						if pick(g, i) {
							if _, err := w.WriteInterval(t.Context(), hourly("hourly__c"), day(i), day(i+1)); err != nil {
								errs <- err
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		}
		run(func(g, i int) bool { return i%4 == g }) // disjoint
		sameRows(t, w, "hourly__c", "hourly__full")
		run(func(g, i int) bool { return true }) // every day by all four at once
		sameRows(t, w, "hourly__c", "hourly__full")

		if w.Engine() != "postgres" {
			return // one process owns a DuckDB file
		}
		// Two warehouses (as two worker processes would) writing the same
		// days at once.
		w2, err := Open(t.Context(), w.dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		var wg sync.WaitGroup
		for _, wh := range []*Warehouse{w, w2, w, w2} {
			wg.Go(func() {
				for i := range days {
					if _, err := wh.WriteInterval(t.Context(), hourly("hourly__p"), day(i), day(i+1)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		sameRows(t, w, "hourly__p", "hourly__full")
	})
}

func TestUnknownMacroRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := hourly("hourly__m")
		m.SQL = "SELECT ts AS hour FROM raw.page_views WHERE ts >= @start_ts AND ts < @other"
		_, err := w.WriteInterval(t.Context(), m, day(0), day(1))
		if err == nil || !strings.Contains(err.Error(), "@other") {
			t.Fatalf("WriteInterval with @other: %v", err)
		}
		if _, err := w.Stats(t.Context(), "hourly__m", "hour"); err == nil {
			t.Fatal("the refused model's table was created")
		}
	})
}

// TestDuckDBOneOwner: a second opener of a DuckDB file, in this process or
// another, gets ErrLocked naming the file.
func TestDuckDBOneOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owned.duckdb")
	w, err := Open(t.Context(), path, Options{})
	if errors.Is(err, ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.DB().ExecContext(t.Context(), "CREATE TABLE x AS SELECT 1 AS a"); err != nil {
		t.Fatal(err)
	}

	_, err = Open(t.Context(), path, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Open in this process: %v", err)
	}

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDuckDBOwnerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "TIDEMARK_WAREHOUSE_OPEN="+path)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "OPEN-ERROR:") || !strings.Contains(string(out), "owned by another process") ||
		!strings.Contains(string(out), path) || !strings.Contains(string(out), "lock") {
		t.Fatalf("second process:\n%s", out)
	}
	t.Logf("second process: %s", strings.TrimSpace(string(out[strings.Index(string(out), "OPEN-ERROR:"):])))

	// After Close the file is free again.
	w.Close()
	w2, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer w2.Close()
	// A second Close of the first owner does not free w2's claim.
	w.Close()
	if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while w2 owns the file: %v", err)
	}
}

// TestDuckDBOwnerHelper is the second process of TestDuckDBOneOwner.
func TestDuckDBOwnerHelper(t *testing.T) {
	path := os.Getenv("TIDEMARK_WAREHOUSE_OPEN")
	if path == "" {
		t.Skip("helper process of TestDuckDBOneOwner")
	}
	w, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Printf("OPEN-ERROR: %v\n", err)
		return
	}
	w.Close()
	fmt.Println("OPENED")
}

// TestDuckDBResources: Options set threads and the memory limit, and a DSN
// that sets them itself wins.
func TestDuckDBResources(t *testing.T) {
	for _, c := range []struct {
		dsn     string
		opts    Options
		threads string
		memory  string
	}{
		{"", Options{}, "2", "1.8 GiB"},
		{"", Options{Threads: 1, MemoryLimit: "512MB"}, "1", "488.2 MiB"},
		{"?threads=3&memory_limit=256MB", Options{Threads: 1, MemoryLimit: "512MB"}, "3", "244.1 MiB"},
	} {
		w, err := Open(t.Context(), filepath.Join(t.TempDir(), "r.duckdb")+c.dsn, c.opts)
		if errors.Is(err, ErrNoCgo) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		var threads, memory string
		err = w.DB().QueryRowContext(t.Context(), "SELECT current_setting('threads')::VARCHAR, current_setting('memory_limit')").Scan(&threads, &memory)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if threads != c.threads || memory != c.memory {
			t.Errorf("Open(%q, %+v): threads %s, memory_limit %s; want %s, %s", c.dsn, c.opts, threads, memory, c.threads, c.memory)
		}
	}
}

// TestPostgresURLForms: both URL schemes open Postgres.
func TestPostgresURLForms(t *testing.T) {
	dsn := newPostgresDSN(t)
	for _, d := range []string{dsn, "postgresql" + strings.TrimPrefix(dsn, "postgres")} {
		w, err := Open(t.Context(), d, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if w.Engine() != "postgres" {
			t.Errorf("%s opened %s", d, w.Engine())
		}
		w.Close()
	}
}
