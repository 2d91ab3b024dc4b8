//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"
)

// The models of cmd/tidemark/demo.go and testdata/scenarios/warehouse.
var (
	eventsModel = Model{Name: "events", TimeColumn: "ts", SQL: `SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 7 AS BIGINT) AS user_id
FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
`}
	eventsSeries = Model{Name: "events", TimeColumn: "ts", SQL: `SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts,
  CAST(g.i % 5 AS BIGINT) AS user_id,
  CAST(g.i % 7 AS DECIMAL(12,2)) + 0.25 AS amount
FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)
`}
)

func lookup(ms ...Model) Lookup {
	return func(name string) (Model, bool) {
		for _, m := range ms {
			if m.Name == name {
				return m, true
			}
		}
		return Model{}, false
	}
}

// rollup reads events (the demo's downstream model) with sql.
func rollup(sql string) Model {
	return Model{Name: "rollup", TimeColumn: "day", DependsOn: []string{"events"}, SQL: sql}
}

const rollupSQL = `SELECT date_trunc('day', ts) AS day, count(*) AS views, count(DISTINCT user_id) AS users
FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
`

// TestAccepts: the SQL real models use passes.
func TestAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Model
		up   Lookup
	}{
		{"demo events", eventsModel, nil},
		{"a grain of its columns", Model{Name: "events", TimeColumn: "ts", SQL: eventsModel.SQL, Grain: []string{"ts", "user_id"}}, nil},
		{"scenario events", eventsSeries, nil},
		{"demo rollup", rollup(rollupSQL), lookup(eventsModel)},
		{"scenario hourly_views", Model{Name: "hourly_views", TimeColumn: "hour", DependsOn: []string{"events"}, SQL: `SELECT date_trunc('hour', ts) AS hour, user_id, 2 * count(*) AS views, sum(amount) AS amount
FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`}, lookup(eventsSeries)},
		{"CTE, join, union, VALUES, unnest, subquery", rollup(`WITH h AS (SELECT * FROM events WHERE ts >= @start_ts AND ts < @end_ts),
  k(n) AS (VALUES (1), (2))
SELECT date_trunc('day', h.ts) AS day, count(*) AS views, 0 AS users FROM h JOIN k ON k.n = h.user_id
  WHERE h.user_id IN (SELECT x FROM unnest([1, 2, 3]) AS u(x)) GROUP BY 1
UNION ALL SELECT @start_ts, 0, 0 -- a comment; with a ';'
/* and /* a nested */ one */`), lookup(eventsModel)},
		{"macros in literals and comments", rollup(`SELECT date_trunc('day', ts) AS day, '@not_a_macro' AS s, "user_id" -- @comment
FROM events WHERE ts >= @start_ts AND ts < @END_TS`), lookup(eventsModel)},
		{"a line comment at the end", Model{Name: "m", TimeColumn: "t", SQL: "SELECT @start_ts AS t -- done"}, nil},
		{"CRLF", Model{Name: "m", TimeColumn: "t", SQL: "SELECT @start_ts AS t,\r\n 1 AS n\r\n"}, nil},
		{"two levels of upstream", Model{Name: "top", TimeColumn: "day", DependsOn: []string{"rollup"}, SQL: "SELECT day, views FROM rollup"}, lookup(eventsModel, rollup(rollupSQL))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Check(t.Context(), c.m, c.up); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestRefuses: each attack and each mistake is refused, with the field and
// a message naming what (and, where the parser says, the line).
func TestRefuses(t *testing.T) {
	ev := lookup(eventsModel)
	m := func(sql string) Model {
		return Model{Name: "m", TimeColumn: "ts", SQL: sql, DependsOn: []string{"events"}}
	}
	for _, c := range []struct {
		name, field, want string
		m                 Model
		line              int
	}{
		{"CR ends a comment", "sql", "statement other than a SELECT", m("SELECT ts FROM events --\r; COPY (SELECT 1) TO '/tmp/x'"), 0},
		{"CR, closing the wrapper", "sql", "does not parse", m("SELECT ts FROM events --\r) q; COPY (SELECT 1) TO '/tmp/x'; SELECT * FROM (SELECT 1"), 0},
		{"U+2028 after --", "sql", "line separator U+2028", m("SELECT ts FROM events --\u2028; COPY (SELECT 1) TO '/tmp/x'"), 1},
		{"U+0085 after --", "sql", "line separator U+0085", m("SELECT ts\nFROM events --\u0085; COPY (SELECT 1) TO '/tmp/x'"), 2},
		{"nested comment", "sql", "statement other than a SELECT", m("SELECT ts FROM events /* /* */ -- */ ; COPY (SELECT 1) TO '/tmp/x'"), 0},
		{"nested comment hiding a DROP", "sql", "statement other than a SELECT", m("SELECT ts FROM events /* /* */ ; DROP TABLE x; */ ; DROP TABLE y"), 0},
		{"dollar quotes", "sql", "statement other than a SELECT", m("SELECT $$ -- $$ AS s, ts FROM events; COPY (SELECT 1) TO '/tmp/x'"), 0},
		{"two SELECTs", "sql", "has 2 statements", m("SELECT ts FROM events; SELECT ts FROM events"), 0},
		{"trailing ;", "sql", "without ';'", m("SELECT ts FROM events;"), 0},
		{"COPY", "sql", "statement other than a SELECT", m("COPY (SELECT 1) TO '/tmp/x'"), 0},
		{"ATTACH", "sql", "statement other than a SELECT", m("ATTACH '/tmp/x.db' AS x"), 0},
		{"INSTALL", "sql", "statement other than a SELECT", m("INSTALL httpfs"), 0},
		{"LOAD", "sql", "statement other than a SELECT", m("LOAD httpfs"), 0},
		{"PRAGMA", "sql", "statement other than a SELECT", m("PRAGMA version"), 0},
		{"SET", "sql", "statement other than a SELECT", m("SET enable_external_access = true"), 0},
		{"CALL", "sql", "statement other than a SELECT", m("CALL duckdb_settings()"), 0},
		{"read_text", "sql", "table function read_text", m("SELECT content AS ts FROM read_text('/etc/passwd')"), 1},
		{"read_csv", "sql", "table function read_csv", m("SELECT *\nFROM read_csv('/etc/passwd')"), 2},
		{"read_parquet", "sql", "table function read_parquet", m("SELECT * FROM read_parquet('/x.parquet')"), 1},
		{"glob", "sql", "table function glob", m("SELECT * FROM glob('/*')"), 1},
		{"duckdb_settings()", "sql", "table function duckdb_settings", m("SELECT * FROM duckdb_settings()"), 1},
		{"a file as a table", "sql", `reads "/etc/passwd"`, m("SELECT * FROM '/etc/passwd'"), 1},
		{"in a subquery", "sql", "table function read_text", m("SELECT ts FROM events WHERE ts IN (SELECT content FROM read_text('/etc/passwd'))"), 1},
		{"in a CTE", "sql", "table function glob", m("WITH g AS (SELECT * FROM glob('/*')) SELECT ts FROM events, g"), 1},
		{"tidemark's table", "sql", `tidemark.x__abc`, m(`SELECT ts FROM tidemark."x__abc"`), 1},
		{"another env", "sql", "prod.events", m("SELECT ts FROM prod.events"), 1},
		{"information_schema", "sql", "information_schema.tables", m("SELECT * FROM information_schema.tables"), 1},
		{"a catalog", "sql", "system.main.duckdb_tables", m("SELECT * FROM system.main.duckdb_tables"), 1},
		{"an undeclared model", "sql", `reads "clicks"`, m("SELECT ts FROM events JOIN clicks USING (ts)"), 1},
		{"a CTE out of scope", "sql", `reads "c"`, m("SELECT ts FROM (WITH c AS (SELECT 1) SELECT * FROM c) a, c"), 1},
		{"DESCRIBE in FROM", "sql", "show_ref", m("SELECT * FROM (DESCRIBE events)"), 0},
		{"current_setting", "sql", "calls current_setting", m("SELECT current_setting('threads') AS s, ts FROM events"), 1},
		{"qualified function", "sql", "calls tidemark.f", m("SELECT tidemark.f(1) AS s, ts FROM events"), 1},
		{"catalog-qualified function", "sql", "calls system.main.abs", m("SELECT system.main.abs(1) AS s, ts FROM events"), 1},
		{"pg_read_file", "sql", "calls pg_read_file", m("SELECT pg_read_file('/etc/passwd') AS s, ts FROM events"), 1},
		{"named parameter", "sql", "parameter $x", m("SELECT $x AS s, ts FROM events"), 0},
		{"positional parameter", "sql", "positional parameter", m("SELECT ts FROM events WHERE ts > $1"), 1},
		{"unknown macro", "sql", "macro @stop", m("SELECT ts FROM events\nWHERE ts < @stop"), 2},
		{"syntax error", "sql", "does not parse", m("SELECT ts FROM events\nWHERE ts >"), 2},
		{"misspelt column of the upstream", "sql", `"usr_id" not found`, m("SELECT ts,\n  usr_id FROM events"), 2},
		{"misspelt column of its own FROM", "sql", `column named "i"`, Model{Name: "m", TimeColumn: "ts", SQL: "SELECT @start_ts AS ts, g.i FROM range(3) AS g(n)"}, 1},
		{"unknown function", "sql", "does not exist", m("SELECT ts, to_char(ts, 'YYYY') AS y FROM events"), 1},
		{"wrong time column", "time_column", `"hour" is not a column`, Model{Name: "m", TimeColumn: "hour", SQL: "SELECT @start_ts AS ts"}, 0},
		{"time column not a time", "time_column", "is a BIGINT column", Model{Name: "m", TimeColumn: "ts", SQL: "SELECT user_id AS ts FROM events", DependsOn: []string{"events"}}, 0},
		{"grain column not in the result", "grain[1]", `"uid" is not a column of the query's result (its columns: ts, id)`, Model{Name: "m", TimeColumn: "ts", SQL: "SELECT @start_ts AS ts, 1 AS id", Grain: []string{"id", "uid"}}, 0},
		{"upstream not registered", "sql", "clicks, which is not registered", Model{Name: "m", TimeColumn: "ts", SQL: "SELECT ts FROM clicks", DependsOn: []string{"clicks"}}, 0},
		{"upstream's own SQL refused", "sql", "upstream model events: ", m("SELECT ts FROM events"), 0},
		{"NUL", "sql", "control character", m("SELECT ts FROM events\x00"), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := ev
			if c.name == "upstream's own SQL refused" {
				up = lookup(Model{Name: "events", TimeColumn: "ts", SQL: "SELECT * FROM read_text('/etc/passwd')"})
			}
			err := Check(t.Context(), c.m, up)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if e.Field != c.field || !strings.Contains(e.Error(), c.want) {
				t.Fatalf("got field %q: %v; want field %q and %q", e.Field, err, c.field, c.want)
			}
			t.Log(err)
			if c.line != 0 && e.Line != c.line {
				t.Fatalf("got line %d (%v), want %d", e.Line, err, c.line)
			}
		})
	}
}
