package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/sqlcheck"
	"github.com/tidemark/tidemark/transport"
)

// TestHostileModelSQL: register_snapshot sent over NATS straight to the
// engine's service (no CLI in the way), with SQL that smuggles a
// statement, reads the server's files or other envs' tables, or cannot
// bind, is refused (invalid, field sql or time_column) by the engine's SQL
// check as serve wires it, and the stream does not move; a sound
// downstream model is accepted.
func TestHostileModelSQL(t *testing.T) {
	if !sqlcheck.Available() {
		t.Skip("no DuckDB in this build (cgo off): every SQL model is refused, TestNoParserRefusesSQL")
	}
	var e *engine.Engine
	e = open(t, engine.Config{Check: sqlcheck.ForEngine(func(fn func(*projections.State)) { e.Projection().Read(fn) })})
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc := connect(t, e)
	must(t, e.Handle(t.Context(), &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0, TimeColumn: "ts",
		SQL: "SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 7 AS BIGINT) AS user_id FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"}))
	must(t, e.Handle(t.Context(), &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "clicks", Version: "v1", Cron: "@hourly", Start: t0}))

	send := func(id, sql, timeColumn string) commands.Reply {
		t.Helper()
		body, err := json.Marshal(map[string]any{"id": id, "model": "rollup", "version": id, "cron": "@hourly", "start": t0,
			"depends_on": []string{"events"}, "sql": sql, "time_column": timeColumn})
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(commands.Subject(commands.KindRegisterSnapshot))
		m.Header.Set(commands.HeaderContentType, commands.ContentJSON)
		m.Data = body
		resp, err := nc.RequestMsg(m, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := commands.DecodeReply(resp.Data, true)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const copyTo = "COPY (SELECT 1) TO '/tmp/tidemark-pwned'"
	cases := []struct{ name, sql, timeColumn, field string }{
		{"CR ends the comment", "SELECT ts FROM events --\r; " + copyTo, "ts", "sql"},
		{"U+2028 after --", "SELECT ts FROM events --\u2028; " + copyTo, "ts", "sql"},
		{"U+0085 after --", "SELECT ts FROM events --\u0085; " + copyTo, "ts", "sql"},
		{"nested comments", "SELECT ts FROM events /* /* */ -- */ ; " + copyTo, "ts", "sql"},
		{"dollar quotes", "SELECT $$ -- $$ AS s, ts FROM events; " + copyTo, "ts", "sql"},
		{"two statements", "SELECT ts FROM events; SELECT ts FROM events", "ts", "sql"},
		{"COPY", copyTo, "ts", "sql"},
		{"ATTACH", "ATTACH '/tmp/x.db' AS x", "ts", "sql"},
		{"INSTALL", "INSTALL httpfs", "ts", "sql"},
		{"LOAD", "LOAD httpfs", "ts", "sql"},
		{"PRAGMA", "PRAGMA version", "ts", "sql"},
		{"SET", "SET enable_external_access = true", "ts", "sql"},
		{"CALL", "CALL duckdb_settings()", "ts", "sql"},
		{"read_text", "SELECT @start_ts AS ts, content FROM read_text('/etc/passwd')", "ts", "sql"},
		{"read_csv", "SELECT @start_ts AS ts, * FROM read_csv('/etc/passwd')", "ts", "sql"},
		{"read_parquet", "SELECT @start_ts AS ts, * FROM read_parquet('/x.parquet')", "ts", "sql"},
		{"glob", "SELECT @start_ts AS ts, file FROM glob('/*')", "ts", "sql"},
		{"a file as a table", "SELECT @start_ts AS ts, * FROM '/etc/passwd'", "ts", "sql"},
		{"duckdb_settings()", "SELECT @start_ts AS ts, * FROM duckdb_settings()", "ts", "sql"},
		{"tidemark's own table", `SELECT ts FROM tidemark."events__0123456789ab"`, "ts", "sql"},
		{"another env", "SELECT ts FROM prod.events", "ts", "sql"},
		{"information_schema", "SELECT @start_ts AS ts, table_name FROM information_schema.tables", "ts", "sql"},
		{"an undeclared model", "SELECT ts FROM events JOIN clicks USING (ts)", "ts", "sql"},
		{"misspelt column of the upstream", "SELECT ts, usr_id FROM events", "ts", "sql"},
		{"misspelt column of its own FROM", "SELECT @start_ts AS ts, g.i FROM range(3) AS g(n)", "ts", "sql"},
		{"wrong time column", "SELECT ts FROM events", "hour", "time_column"},
		{"a CTE reading itself: the catalog's table", "WITH duckdb_tables AS (SELECT * FROM duckdb_tables) SELECT @start_ts AS ts, sql FROM duckdb_tables", "ts", "sql"},
		{"a list past the memory limit", "SELECT ts, len(range(0, 600000000)) AS n FROM events", "ts", "sql"},
		{"CTEs doubling", "WITH c0 AS (SELECT ts FROM events), c1 AS (SELECT * FROM c0 a, c0 b), c2 AS (SELECT * FROM c1 a, c1 b), c3 AS (SELECT * FROM c2 a, c2 b), c4 AS (SELECT * FROM c3 a, c3 b), c5 AS (SELECT * FROM c4 a, c4 b), c6 AS (SELECT * FROM c5 a, c5 b), c7 AS (SELECT * FROM c6 a, c6 b), c8 AS (SELECT * FROM c7 a, c7 b), c9 AS (SELECT * FROM c8 a, c8 b), c10 AS (SELECT * FROM c9 a, c9 b) SELECT a.ts FROM c10 a", "ts", "sql"},
		{"a CTE reading a later one", "WITH x AS (SELECT * FROM y), y AS (SELECT * FROM events) SELECT ts FROM x", "ts", "sql"},
	}
	before := lastSeq(t, e)
	for i, c := range cases {
		r := send(fmt.Sprintf("hostile-%d", i), c.sql, c.timeColumn) // each its own version
		if r.Accepted || r.Code != commands.CodeInvalid || r.Field != c.field {
			t.Errorf("%s: got accepted=%v %s on %q (%s), want invalid on %q", c.name, r.Accepted, r.Code, r.Field, r.Message, c.field)
		}
	}
	if after := lastSeq(t, e); after != before {
		t.Fatalf("refused registrations appended %d events", after-before)
	}
	r := send("sound", "SELECT date_trunc('day', ts) AS day, count(*) AS views FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1", "day")
	if !r.Accepted || r.Events != 1 {
		t.Fatalf("a sound model: %+v", r)
	}
}
