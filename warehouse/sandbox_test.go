package warehouse

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// victim is a snapshot table the attacks below try to rewrite.
func victim(t *testing.T, w *Warehouse) int64 {
	t.Helper()
	return write(t, w, hourly("hourly__victim"), full)
}

func victimIntact(t *testing.T, w *Warehouse, n int64) {
	t.Helper()
	if got := scalar(t, w, `SELECT count(*) FROM tidemark."hourly__victim"`); got != n {
		t.Fatalf("the victim table has %d rows, want %d: an attack rewrote it", got, n)
	}
}

// smuggle is model SQL that closes the query's parentheses and appends
// statements of its own: what runs if a driver runs every statement of a
// text (DuckDB's runs all but the last itself; pgx's simple protocol, used
// for a statement without arguments, runs them all).
func smuggle(stmt string) string {
	return `SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour
) q) q; ` + stmt + `; SELECT * FROM (SELECT * FROM (SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour`
}

// Model SQL runs as exactly one statement, in the sandbox, on both
// engines: a statement smuggled after it does not run (at the table's
// creation, EnsureTable, or at a write), nor does a read of the server's
// files.
func TestModelSQLSandboxed(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		n := victim(t, w)
		attacks := []string{
			smuggle(`DELETE FROM tidemark."hourly__victim"`),
			"SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour --\r) q) q; DELETE FROM tidemark.\"hourly__victim\"; SELECT * FROM (SELECT * FROM (SELECT CAST(NULL AS TIMESTAMP) AS hour",
		}
		if w.Engine() == "duckdb" {
			attacks = append(attacks,
				`SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, content FROM read_text('/etc/passwd')`,
				`SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, * FROM read_csv('/etc/passwd')`,
				`SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, file FROM glob('/*')`,
				smuggle(`COPY (SELECT 42) TO '`+t.TempDir()+`/out.csv'`),
				smuggle(`ATTACH '`+t.TempDir()+`/other.duckdb' AS other`),
				smuggle(`INSTALL httpfs`),
				smuggle(`LOAD httpfs`),
				smuggle(`SET enable_external_access = true`),
			)
		} else {
			attacks = append(attacks,
				`SELECT CAST(now() AS TIMESTAMP) AS hour, pg_read_file('/etc/passwd') AS x`,
				`SELECT CAST(now() AS TIMESTAMP) AS hour, set_config('role', 'postgres', true) AS r, pg_read_file('/etc/passwd') AS x`,
				`SELECT CAST(now() AS TIMESTAMP) AS hour, * FROM pg_ls_dir('/') AS x`,
				smuggle(`COPY (SELECT 42) TO PROGRAM 'true'`),
				smuggle(`COPY (SELECT 42) TO '/tmp/tidemark-attack.csv'`),
				smuggle(`CREATE TABLE tidemark."planted" AS SELECT 1 AS a`),
			)
		}
		for i, sql := range attacks {
			m := Model{Name: "attack", Table: "attack__" + string(rune('a'+i)), TimeColumn: "hour", SQL: sql}
			if err := w.EnsureTable(t.Context(), m); err == nil {
				t.Errorf("EnsureTable of %q succeeded", sql)
			}
			m.Table += "_w"
			if _, err := w.WriteInterval(t.Context(), m, day(0), day(1)); err == nil {
				t.Errorf("WriteInterval of %q succeeded", sql)
			}
			victimIntact(t, w, n)
		}
	})
}

// A write of a table that exists runs its model SQL the same way
// (backend.writeRange; on Postgres in a batch of the extended protocol):
// one statement, as SandboxRole on Postgres, so a smuggled statement does
// not run and the server's files stay out of reach.
func TestWriteSandboxed(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		n := victim(t, w)
		hour := `CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour`
		attacks := []string{smuggle(`DELETE FROM tidemark."hourly__victim"`), smuggle(`DROP TABLE tidemark."hourly__victim"`)}
		if w.Engine() == "duckdb" {
			attacks = append(attacks, `SELECT `+hour+`, content AS x FROM read_text('/etc/passwd')`)
		} else {
			attacks = append(attacks,
				`SELECT `+hour+`, pg_read_file('/etc/passwd') AS x`,
				`SELECT `+hour+`, set_config('role', 'postgres', true) AS x`,
				smuggle(`COPY (SELECT 42) TO PROGRAM 'true'`),
				smuggle(`CREATE TABLE tidemark."planted" AS SELECT 1 AS a`),
			)
		}
		for i, sql := range attacks {
			// The table is made by a harmless query of the same columns.
			cols := "CAST(@start_ts AS TIMESTAMP) AS hour"
			if !strings.Contains(sql, ") q) q;") {
				cols += ", CAST('' AS TEXT) AS x"
			}
			table := "attackw__" + string(rune('a'+i))
			if err := w.EnsureTable(t.Context(), Model{Name: "attack", Table: table, TimeColumn: "hour", SQL: "SELECT " + cols}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.WriteInterval(t.Context(), Model{Name: "attack", Table: table, TimeColumn: "hour", SQL: sql}, day(0), day(1)); err == nil {
				t.Errorf("WriteInterval of %q succeeded", sql)
			}
			victimIntact(t, w, n)
		}
		if w.Engine() != "postgres" {
			return
		}
		who := Model{Name: "who", Table: "who__x", TimeColumn: "hour", SQL: "SELECT CAST(@start_ts AS TIMESTAMP) AS hour, CAST(current_user AS TEXT) AS who"}
		write(t, w, who, Range{day(0), day(1)})
		var user string
		if err := w.DB().QueryRowContext(t.Context(), `SELECT who FROM tidemark."who__x"`).Scan(&user); err != nil || user != SandboxRole {
			t.Fatalf("the model's INSERT ran as %q (%v), want %s", user, err, SandboxRole)
		}
	})
}

// On Postgres the sandbox reads only what it is granted (the snapshot
// tables, the environments' views, the source schemas an operator
// grants): not a table of another schema, nor pg_authid's password
// hashes, which pg_read_all_data would give it.
func TestSandboxReadsOnlyWhatItIsGranted(t *testing.T) {
	w, err := Open(t.Context(), newPostgresDSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustExec(t, w, "CREATE TABLE public.secret AS SELECT 'top secret' AS s")
	for i, sql := range []string{
		`SELECT CAST(now() AS TIMESTAMP) AS hour, s FROM public.secret`,
		`SELECT CAST(now() AS TIMESTAMP) AS hour, rolpassword FROM pg_authid`,
	} {
		m := Model{Name: "reader", Table: "reader__" + string(rune('a'+i)), TimeColumn: "hour", SQL: sql}
		if _, err := w.WriteInterval(t.Context(), m, day(0), day(1)); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("WriteInterval of %q: %v, want permission denied", sql, err)
		}
		if _, err := w.QueryLimited(t.Context(), sql, Limits{}); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("query %q: %v, want permission denied", sql, err)
		}
	}
	// What it is granted it reads: a snapshot table, through a promoted
	// environment's view.
	up := Model{Name: "up", Table: "up__a", TimeColumn: "hour", SQL: `SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, 1 AS n`}
	if _, err := w.WriteInterval(t.Context(), up, day(0), day(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Promote(t.Context(), "prod", map[string]string{"up": "up__a"}); err != nil {
		t.Fatal(err)
	}
	if res, err := w.QueryLimited(t.Context(), `SELECT n FROM prod.up`, Limits{}); err != nil || len(res.Rows) != 1 {
		t.Fatalf("query of prod's view: %+v, %v", res, err)
	}
	down := Model{Name: "down", Table: "down__a", TimeColumn: "hour", SQL: `SELECT hour, n FROM up`, Upstream: map[string]string{"up": "up__a"}}
	if n, err := w.WriteInterval(t.Context(), down, day(0), day(1)); err != nil || n != 1 {
		t.Fatalf("a downstream model: %d rows, %v", n, err)
	}
}

// A query is one read-only statement in the sandbox: its text cannot end
// its read-only transaction (a comment ended by a carriage return hides
// the rest from tidemark's check, not from the engine) nor read the
// server's files.
func TestQuerySandboxed(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		n := victim(t, w)
		attacks := []string{
			"SELECT 1 --\r; ROLLBACK; DELETE FROM tidemark.\"hourly__victim\"",
			"SELECT 1 --\r; COMMIT; DELETE FROM tidemark.\"hourly__victim\"",
		}
		if w.Engine() == "duckdb" {
			attacks = append(attacks,
				`SELECT * FROM read_text('/etc/passwd')`,
				`SELECT * FROM read_csv('/etc/passwd')`,
				`SELECT * FROM glob('/*')`,
				"SELECT 1 --\r; ATTACH '"+t.TempDir()+"/x.duckdb' AS x",
				"SELECT 1 --\r; SET enable_external_access = true",
				"SELECT 1 --\r; INSTALL httpfs",
				"SELECT 1 --\r; LOAD httpfs",
			)
		} else {
			attacks = append(attacks,
				`SELECT pg_read_file('/etc/passwd')`,
				`SELECT set_config('role', 'postgres', true), pg_read_file('/etc/passwd')`,
				"SELECT 1 --\r; COPY (SELECT 1) TO PROGRAM 'true'",
			)
		}
		for _, q := range attacks {
			if _, _, err := w.Query(t.Context(), q); err == nil {
				t.Errorf("Query(%q) succeeded", q)
			}
			victimIntact(t, w, n)
		}
		if _, _, err := w.Query(t.Context(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	})
}

// DuckDB's least privilege holds for the whole database, tidemark's own
// connections included: no file is read or written, no database attached,
// no extension installed or loaded, no setting changed.
func TestDuckDBLockedDown(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		if w.Engine() != "duckdb" {
			t.Skip("DuckDB's settings")
		}
		dir := t.TempDir()
		for _, q := range []string{
			`SELECT * FROM read_text('/etc/passwd')`,
			`SELECT * FROM glob('/*')`,
			`COPY (SELECT 42) TO '` + dir + `/out.csv'`,
			`ATTACH '` + dir + `/other.duckdb' AS other`,
			`INSTALL httpfs`,
			`LOAD httpfs`,
			`SET enable_external_access = true`,
			`SET memory_limit = '100GB'`,
			`SET threads = 64`,
			`SET TimeZone = 'Asia/Tokyo'`,
			`SET GLOBAL lock_configuration = false`,
		} {
			if _, err := w.DB().ExecContext(t.Context(), q); err == nil {
				t.Errorf("%s succeeded", q)
			}
		}
		_, err := Open(t.Context(), dir+"/x.duckdb?enable_external_access=true", Options{})
		if err == nil || !strings.Contains(err.Error(), "enable_external_access") {
			t.Errorf("a DSN enabling external access: %v", err)
		}
	})
}

// A computation that outlives its model's timeout is cancelled through the
// driver and fails with ErrTimeout; the warehouse goes on working.
func TestModelTimeout(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		endless := Model{Name: "endless", Table: "endless__x", TimeColumn: "hour", Timeout: 300 * time.Millisecond,
			SQL: `SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, count(*) AS n
				FROM generate_series(1, 100000000) a, generate_series(1, 100000000) b WHERE @start_ts < @end_ts`}
		if err := w.EnsureTable(t.Context(), endless); err != nil {
			t.Fatal(err)
		}
		_, err := w.WriteInterval(t.Context(), endless, day(0), day(1))
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("the endless write: %v, want ErrTimeout", err)
		}
		if _, err := w.Verify(t.Context(), "prod", endless, dayRanges()[:1]); err == nil {
			t.Fatal("verify of the endless model succeeded")
		}
		if n := write(t, w, hourly("hourly__after"), full); n == 0 {
			t.Fatal("no rows after the timeout")
		}
	})
}

// A query stops reading at its limits and says so: 3,000,000 rows answer
// with the first 10,000 (BenchmarkQueryLimited measures the time and the
// memory), wide rows stop at the byte limit.
func TestQueryLimited(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		res, err := w.QueryLimited(t.Context(), "SELECT i FROM generate_series(1, 3000000) AS t(i)", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || len(res.Rows) != DefaultLimits.Rows {
			t.Fatalf("3M rows: %d rows, truncated %v", len(res.Rows), res.Truncated)
		}
		res, err = w.QueryLimited(t.Context(), "SELECT repeat('x', 1000) AS s FROM generate_series(1, 100000) AS t(i)", Limits{Bytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.Size > 1<<20 || len(res.Rows) < 1000 || len(res.Rows) > 1100 {
			t.Fatalf("wide rows: %d rows, %d bytes, truncated %v", len(res.Rows), res.Size, res.Truncated)
		}
		res, err = w.QueryLimited(t.Context(), "SELECT 1 AS a", Limits{})
		if err != nil || res.Truncated || len(res.Rows) != 1 {
			t.Fatalf("one row: %+v, %v", res, err)
		}
		if _, _, err := w.Query(t.Context(), "SELECT i FROM generate_series(1, 3000000) AS t(i)"); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Query of 3M rows: %v, want ErrTruncated", err)
		}
	})
}

// TestQueryLimitedComputesOnlyTheLimit: DuckDB's driver materializes a
// result before its first row is read, so a SELECT is bounded inside the
// engine: three billion rows (far beyond the memory limit, were they
// computed) answer with the first 10,000, in order; a trailing ';' and a
// statement that is not a SELECT still run.
func TestQueryLimitedComputesOnlyTheLimit(t *testing.T) {
	w, err := Open(t.Context(), filepath.Join(t.TempDir(), "w.duckdb"), Options{Threads: 2, MemoryLimit: "512MB"})
	if errors.Is(err, ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The deadline only ends the undefended query (which runs for many
	// minutes); the bounded one answers at once.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := w.QueryLimited(ctx, "SELECT i, repeat('x', 100) AS s FROM range(3000000000) AS t(i);", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Rows) != DefaultLimits.Rows || res.Rows[9999][0] != int64(9999) {
		t.Fatalf("3 billion rows: %d rows, truncated %v", len(res.Rows), res.Truncated)
	}
	if res, err := w.QueryLimited(t.Context(), "EXPLAIN SELECT 1", Limits{}); err != nil || len(res.Rows) == 0 {
		t.Fatalf("EXPLAIN: %+v, %v", res, err)
	}
}

// On Postgres a snapshot table's time column is indexed once, whoever
// creates the table: a write's DELETE of its range finds its rows by the
// index instead of scanning the table (a backfill in batches was
// quadratic in the table's size).
func TestTimeColumnIndexed(t *testing.T) {
	w, err := Open(t.Context(), newPostgresDSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m := Model{Name: "ix", Table: "ix__a", TimeColumn: "hour", SQL: `SELECT CAST(TIMESTAMP '2026-01-01 00:00:00' AS TIMESTAMP) AS hour, 1 AS n`}
	if _, err := w.WriteInterval(t.Context(), m, day(0), day(1)); err != nil {
		t.Fatal(err)
	}
	// A second process adopting the same table adds no second index.
	w2, err := Open(t.Context(), w.dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.EnsureTable(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	n := scalar(t, w, `SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = to_regclass('tidemark."ix__a"') AND a.attname = 'hour'`)
	if n != 1 {
		t.Fatalf("%d indexes on the time column, want 1", n)
	}
}
