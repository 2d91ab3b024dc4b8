//go:build cgo

package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A chain a → b → c: c declares only b.
var (
	chainA = Model{Name: "a", TimeColumn: "ts", SQL: `SELECT CAST(@start_ts AS TIMESTAMP) AS ts, 'secret' AS s`}
	chainB = Model{Name: "b", TimeColumn: "ts", DependsOn: []string{"a"}, SQL: `SELECT ts FROM a`}
)

func refused(t *testing.T, m Model, up Lookup, want string) {
	t.Helper()
	err := Check(t.Context(), m, up)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want a refusal (%q)", err, want)
	}
	if !strings.Contains(e.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	t.Log(err)
}

// TestHostileCTEScope: a CTE's body does not see itself nor a later CTE of
// its WITH (in both engines it reads the catalog's table of that name
// instead: pg_statistic, duckdb_tables, …), and the check binds a model
// against its direct upstream models only, not their upstream models.
func TestHostileCTEScope(t *testing.T) {
	up := lookup(chainA, chainB)
	c := func(sql string) Model { return Model{Name: "c", TimeColumn: "ts", DependsOn: []string{"b"}, SQL: sql} }
	for _, tc := range []struct{ name, sql, want string }{
		{"self", `WITH a AS (SELECT * FROM a) SELECT ts FROM a`, `reads "a"`},
		{"self in a subquery", `WITH a AS (SELECT * FROM b WHERE ts IN (SELECT ts FROM a)) SELECT ts FROM a`, `reads "a"`},
		{"a later CTE", `WITH x AS (SELECT * FROM a), a AS (SELECT * FROM b) SELECT ts FROM x`, `reads "a"`},
		{"recursive, in the non-recursive term", `WITH RECURSIVE a AS (SELECT * FROM a UNION ALL SELECT * FROM b) SELECT ts FROM a`, `reads "a"`},
		{"recursive, no UNION", `WITH RECURSIVE a AS (SELECT * FROM a) SELECT ts FROM a`, `reads "a"`},
		{"an upstream's upstream", `SELECT ts FROM a`, `reads "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, c(tc.sql), up, tc.want) })
	}
	for _, tc := range []struct{ name, sql string }{
		{"earlier CTEs", `WITH x AS (SELECT * FROM b), y AS (SELECT * FROM x), z AS (SELECT y.ts FROM y JOIN x USING (ts)) SELECT ts FROM z`},
		{"a CTE shadowing its upstream", `WITH b AS (SELECT * FROM b WHERE ts >= @start_ts) SELECT ts FROM b`},
		{"a subquery in a CTE sees the earlier ones", `WITH x AS (SELECT * FROM b), y AS (SELECT * FROM b WHERE ts IN (SELECT ts FROM x)) SELECT ts FROM y`},
		{"a nested WITH sees the outer CTEs", `WITH x AS (SELECT * FROM b) SELECT ts FROM (WITH y AS (SELECT * FROM x) SELECT * FROM y)`},
		{"recursive", `WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT ts FROM b, r`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(t.Context(), c(tc.sql), up); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
	// The binding sandbox holds the direct upstream models only: c, which
	// declares b, cannot bind a name of b's upstream model a.
	cols := map[string][]column{"b": {{"ts", "TIMESTAMP"}}}
	if _, err := bind(t.Context(), c(`SELECT ts FROM a`), cols); err == nil || !strings.Contains(err.Error(), "a does not exist") {
		t.Fatalf("bound a, b's upstream, in c's sandbox: %v", err)
	}
}

// TestHostileReservedNames: no table of a catalog's name is read, even as a
// declared upstream model or a CTE of the model's own.
func TestHostileReservedNames(t *testing.T) {
	pgStat := Model{Name: "pg_statistic", TimeColumn: "ts", SQL: `SELECT CAST(@start_ts AS TIMESTAMP) AS ts, 'x' AS stavalues1`}
	ev := lookup(eventsModel, pgStat)
	for _, tc := range []struct{ name, want string }{
		{`WITH duckdb_tables AS (SELECT * FROM duckdb_tables) SELECT @start_ts AS ts, * FROM duckdb_tables`, `CTE "duckdb_tables", a reserved name`},
		{`WITH pg_class AS (SELECT * FROM events) SELECT ts FROM pg_class`, `CTE "pg_class", a reserved name`},
		{`SELECT @start_ts AS ts, * FROM "PG_CLASS"`, `reads "PG_CLASS", a reserved name`},
		{`SELECT @start_ts AS ts, * FROM pragma_database_list`, `reads "pragma_database_list", a reserved name`},
		{`SELECT @start_ts AS ts, * FROM sqlite_master`, `reads "sqlite_master", a reserved name`},
		{`SELECT @start_ts AS ts, * FROM information_schema`, `reads "information_schema", a reserved name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused(t, Model{Name: "m", TimeColumn: "ts", DependsOn: []string{"events"}, SQL: tc.name}, ev, tc.want)
		})
	}
	t.Run("a declared upstream of a reserved name", func(t *testing.T) {
		refused(t, Model{Name: "m", TimeColumn: "ts", DependsOn: []string{"pg_statistic"}, SQL: `SELECT ts FROM pg_statistic`}, ev, `depends on "pg_statistic", a reserved name`)
	})
	for _, n := range []string{"pg_authid", "Duckdb_Tables", "sqlite_schema", "pragma_x", "main", "TEMP", "system", "information_schema", "memory"} {
		if !Reserved(n) {
			t.Errorf("%s is not reserved", n)
		}
	}
	for _, n := range []string{"events", "hourly_views", "pgx", "maintenance", "systems"} {
		if Reserved(n) {
			t.Errorf("%s is reserved", n)
		}
	}
}

// TestHostileSizes: a scalar function whose result's size an argument
// gives (DuckDB allocates it outside memory_limit, uninterruptibly: the
// list form of range took 21 GB past a 256 MB limit) takes only a small
// literal size.
func TestHostileSizes(t *testing.T) {
	ev := lookup(eventsModel)
	m := func(sql string) Model {
		return Model{Name: "m", TimeColumn: "ts", DependsOn: []string{"events"}, SQL: sql}
	}
	for _, tc := range []struct{ sql, want string }{
		{`SELECT CAST(@start_ts AS TIMESTAMP) AS ts, len(range(0, 600000000)) AS n`, "calls range with the size 600000000"},
		{`SELECT CAST(@start_ts AS TIMESTAMP) AS ts, len(generate_series(600000000)) AS n`, "calls generate_series with the size"},
		{`SELECT ts, len(range(user_id)) AS n FROM events`, "calls range as a list with a computed"},
		{`SELECT ts, unnest(range(@start_ts, @end_ts, INTERVAL 1 second)) AS n FROM events`, "calls range as a list"},
		{`SELECT CAST(@start_ts AS TIMESTAMP) AS ts, length(repeat('x', 4000000000)) AS n`, "calls repeat with the size 4000000000"},
		{`SELECT ts, repeat([1], user_id * 1000000) AS n FROM events`, "calls repeat with a computed size"},
		{`SELECT ts, lpad('x', 100000, ' ') AS n FROM events`, "calls lpad with the size 100000"},
		{`SELECT ts, rpad('x', CAST(user_id AS INTEGER), ' ') AS n FROM events`, "calls rpad with a computed size"},
		{`SELECT ts, list_resize([1], 1000000000) AS n FROM events`, "calls list_resize"},
		{`SELECT ts, array_resize([1], 1000000000) AS n FROM events`, "calls array_resize"},
		{`SELECT ts, to_base(1, 2, 1000000000) AS n FROM events`, "calls to_base"},
		{`SELECT ts, bitstring('1', 1000000000) AS n FROM events`, "calls bitstring"},
		{`SELECT ts, format('{:>{}}', 'x', 1000000000) AS n FROM events`, "nested {}"},
		{`SELECT ts, format('{:>1000000000}', 'x') AS n FROM events`, "width above 10000"},
		{`SELECT ts, printf('%*d', 1000000000, 1) AS n FROM events`, "('*')"},
		{`SELECT ts, list_reduce([1, 2, 3], (a, b) -> a || a, 'x') AS n FROM events`, "calls list_reduce"},
		{`SELECT ts, sleep_ms(100000) AS n FROM events`, "calls sleep_ms"},
		{`SELECT ts FROM events WHERE user_id IN (SELECT unnest(range(1000000000)))`, "calls range with the size"},
		{`SELECT ts FROM events, unnest(range(1000000000)) u(x)`, "calls range with the size"},
	} {
		t.Run(tc.sql, func(t *testing.T) { refused(t, m(tc.sql), ev, tc.want) })
	}
	for _, sql := range []string{
		`SELECT ts, len(range(0, 100)) AS n, repeat('-', 20) AS r, lpad(CAST(user_id AS VARCHAR), 8, '0') AS p, format('{:>8}', user_id) AS f, printf('%08d', user_id) AS g FROM events`,
		`SELECT @start_ts + to_minutes(CAST(r.range AS BIGINT)) AS ts FROM range(0, 1000000000000) r WHERE r.range < 60`,
		`SELECT @start_ts AS ts, g.i FROM generate_series(@start_ts, @end_ts, INTERVAL 1 minute) AS g(i)`,
	} {
		t.Run(sql, func(t *testing.T) {
			if err := Check(t.Context(), m(sql), ev); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestHostileTableRangeStreams: range in FROM, which the size rule leaves
// alone, streams and stops at the timeout however large its bound.
func TestHostileTableRangeStreams(t *testing.T) {
	sb, err := openSandbox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	var n int64
	err = sb.conn.QueryRowContext(ctx, `SELECT count(*) FROM range(1000000000000) WHERE range % 7 = 3`).Scan(&n)
	if err == nil {
		t.Fatalf("counted %d", n)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s after a 500ms timeout", d)
	}
}

// doubling is n CTEs each reading the previous one twice: 2^n tables once
// expanded, in a few hundred bytes.
func doubling(n int) string {
	var b strings.Builder
	b.WriteString("WITH c0 AS (SELECT CAST(@start_ts AS TIMESTAMP) AS ts)")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, ", c%d AS (SELECT * FROM c%d a, c%d b)", i, i-1, i-1)
	}
	fmt.Fprintf(&b, " SELECT a.ts FROM c%d a", n-1)
	return b.String()
}

// TestHostileExpansion: a statement whose CTEs expand past MaxExpansion
// tables is refused before binding (binding took 38 s at n=21, doubling
// with each CTE, and DESCRIBE ignores the context).
func TestHostileExpansion(t *testing.T) {
	start := time.Now()
	refused(t, Model{Name: "m", TimeColumn: "ts", SQL: doubling(24)}, nil, "expands too much")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	// An unused CTE is bound too: its own weight is bounded.
	refused(t, Model{Name: "m", TimeColumn: "ts", SQL: strings.Replace(doubling(24), " SELECT a.ts FROM c23 a", " SELECT CAST(@start_ts AS TIMESTAMP) AS ts", 1)}, nil, "expands too much")
	// Under the bound, it binds.
	if err := Check(t.Context(), Model{Name: "m", TimeColumn: "ts", SQL: doubling(9)}, nil); err != nil {
		t.Fatalf("refused 2^8 tables: %v", err)
	}
}
