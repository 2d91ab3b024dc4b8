package warehouse

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// reopen is another Warehouse on w's database, as another process (or
// this one restarted) would open it; a DuckDB w is closed first (one
// process owns the file).
func reopen(t *testing.T, w *Warehouse) *Warehouse {
	t.Helper()
	if w.Engine() == "duckdb" {
		w.Close()
	}
	w2, err := Open(t.Context(), w.dsn, Options{Threads: 2, MemoryLimit: "512MB"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w2.Close() })
	return w2
}

func hour(n int) time.Time { return day0.Add(time.Duration(n) * time.Hour) }

// writeGrid writes [hour(from), hour(to)) of m in batches of size hours.
func writeGrid(t *testing.T, w *Warehouse, m Model, from, to, size int) {
	t.Helper()
	for h := from; h < to; h += size {
		write(t, w, m, Range{hour(h), hour(min(h+size, to))})
	}
}

// A write leaves out its DELETE only where nothing was written: a range
// written before in part, by batches of another grid, or by another
// Warehouse (another process, or this one restarted between a commit and
// its completion report) is replaced, and the rows are one full write's.
func TestRewriteAcrossGrids(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		write(t, w, hourly("hourly__full"), full)
		m := hourly("hourly__g")
		writeGrid(t, w, m, 48, 120, 5)
		writeGrid(t, w, m, 60, 61, 1) // inside a batch
		w2 := reopen(t, w)
		writeGrid(t, w2, m, 27, days*24, 7) // another grid over all of it
		writeGrid(t, w2, m, 0, 27, 27)
		sameRows(t, w2, "hourly__g", "hourly__full")
		writeGrid(t, w2, m, 0, days*24, 24)
		write(t, w2, m, full)
		sameRows(t, w2, "hourly__g", "hourly__full")
	})
}

// A table written before writers were recorded holds rows no record
// names: every write of it deletes its range first, in this process and
// after a restart, and it is never marked recorded.
func TestRewriteUnrecordedTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		write(t, w, hourly("hourly__full"), full)
		mustExec(t, w, `CREATE TABLE tidemark."hourly__old" AS SELECT * FROM tidemark."hourly__full"`)
		writeGrid(t, w, hourly("hourly__old"), 0, days*24, 24)
		sameRows(t, w, "hourly__old", "hourly__full")
		w2 := reopen(t, w)
		writeGrid(t, w2, hourly("hourly__old"), 5, 100, 30)
		sameRows(t, w2, "hourly__old", "hourly__full")
		if c, err := w2.b.tableComment(t.Context(), w2.db, "hourly__old"); err != nil || c != "" {
			t.Fatalf("the unrecorded table's comment: %q %v", c, err)
		}
	})
}

// What a write assumes of its range: a new table is marked recorded, and
// a range of it that nothing was written to holds nothing (DuckDB knows
// its own writes; Postgres looks the records up in the write's
// transaction); a range written before, or any range of an unrecorded
// table, may hold rows.
func TestClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		m := hourly("hourly__c")
		if err := w.EnsureTable(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		if c, err := w.b.tableComment(t.Context(), w.db, m.Table); err != nil || c != recordedComment {
			t.Fatalf("a new table's comment: %q %v", c, err)
		}
		fresh, again := holdsNothing, holdsRows
		if w.Engine() == "postgres" {
			fresh, again = holdsIfRecorded, holdsIfRecorded
		}
		if h := w.claim(m.Table, Range{hour(0), hour(5)}); h != fresh {
			t.Fatalf("a fresh range: %v, want %v", h, fresh)
		}
		if h := w.claim(m.Table, Range{hour(4), hour(6)}); h != again {
			t.Fatalf("a claimed range: %v, want %v", h, again)
		}
		if h := w.claim(m.Table, Range{hour(6), hour(8)}); h != fresh {
			t.Fatalf("the next range: %v, want %v", h, fresh)
		}
		if h := w.claim("unknown", Range{hour(0), hour(5)}); h != holdsRows {
			t.Fatalf("a table not ensured: %v", h)
		}
	})
}

func TestRangeSet(t *testing.T) {
	var rs []Range
	for _, r := range [][2]int{{10, 12}, {0, 2}, {5, 6}, {2, 3}, {20, 30}, {6, 10}} {
		rs = addRange(rs, Range{hour(r[0]), hour(r[1])})
	}
	want := []Range{{hour(0), hour(3)}, {hour(5), hour(12)}, {hour(20), hour(30)}}
	if len(rs) != len(want) {
		t.Fatalf("%v, want %v", rs, want)
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Fatalf("%v, want %v", rs, want)
		}
	}
	for _, c := range []struct {
		a, b int
		want bool
	}{{3, 5, false}, {2, 4, true}, {12, 20, false}, {11, 13, true}, {29, 31, true}, {30, 40, false}, {-5, 0, false}, {-5, 50, true}} {
		if got := overlapsAny(rs, Range{hour(c.a), hour(c.b)}); got != c.want {
			t.Errorf("[%d, %d) overlaps: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A DuckDB warehouse computes in UTC whatever the process's zone: under
// TZ=America/New_York a time.Time bound as a batch's bound was read as
// local time when cast to TIMESTAMP, and a day's write held 19 of its 24
// hours. (ICU reads TZ once per process: run alone, this fails without
// the warehouse's TimeZone=UTC.)
func TestDuckDBIgnoresLocalZone(t *testing.T) {
	t.Setenv("TZ", "America/New_York")
	w, err := Open(t.Context(), filepath.Join(t.TempDir(), "tz.duckdb"), Options{Threads: 2, MemoryLimit: "512MB"})
	if errors.Is(err, ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m := Model{Name: "gen", Table: "gen__tz", TimeColumn: "ts",
		SQL: `SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts FROM range(@start_ts, @end_ts, INTERVAL 1 HOUR) AS h(h), generate_series(0, 59) AS g(i)`}
	if n := write(t, w, m, Range{day0, day0.Add(24 * time.Hour)}); n != 24*60 {
		t.Fatalf("a day's write in zone %s: %d rows, want %d", os.Getenv("TZ"), n, 24*60)
	}
}
