//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"
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
