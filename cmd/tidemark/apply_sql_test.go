//go:build cgo

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
)

const applySQLFile = `models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    time_column: ts
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts,
        CAST(r.range % 7 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
  - name: rollup
    cron: "@daily"
    start: 2026-12-01T00:00:00Z
    depends_on: [events]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day,
        count(DISTINCT usr_id) AS users
      FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
`

// TestApplyChecksSQL: apply -f checks the file's SQL locally before it
// sends anything (no server here: the port is closed), naming the file's
// line, the model's field, and DuckDB's reason.
func TestApplyChecksSQL(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"binder", "", "", `models.yaml:17: models[1].sql: does not bind: Binder Error: Referenced column "usr_id" not found in FROM clause!`},
		{"file read", "FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)", "FROM read_text('/etc/passwd')", "models.yaml:9: models[0].sql: calls the table function read_text"},
		{"smuggled statement", "GROUP BY 1", "GROUP BY 1 /* /* */ -- */ ; COPY (SELECT 1) TO '/tmp/x'", "models.yaml:15: models[1].sql: is not one SELECT statement"},
		{"time column", "time_column: day", "time_column: hour", `models.yaml:14: models[1].time_column: "hour" is not a column of the query's result`},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := applySQLFile
			if c.from != "" {
				text = strings.Replace(strings.Replace(text, "usr_id", "user_id", 1), c.from, c.to, 1)
			}
			path := filepath.Join(t.TempDir(), "models.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runCLI(t, "apply", "-f", path, "--nats-url", "nats://127.0.0.1:1")
			if code != 2 || !strings.Contains(stderr, filepath.Dir(path)+"/"+c.want) {
				t.Fatalf("exit %d: %s\nwant %q", code, stderr, c.want)
			}
		})
	}
}

// TestCheckSQLMacros: apply's local check renders each model in its own
// macro vocabulary (the registration's macros), upstream models too, and
// places a refusal at its file line.
func TestCheckSQLMacros(t *testing.T) {
	const file = "m.yaml"
	src := modelfile.Model{Index: 0, SQLLine: 3, Register: commands.RegisterSnapshot{Model: "src", TimeColumn: "ts", Macros: models.MacrosSQLMesh,
		SQL: "SELECT @start_dt AS ts, @end_ds AS ds"}}
	down := modelfile.Model{Index: 1, SQLLine: 9, Register: commands.RegisterSnapshot{Model: "down", TimeColumn: "ts", DependsOn: []string{"src"}, Macros: models.MacrosSQLMesh,
		SQL: "SELECT ts FROM src WHERE ds BETWEEN @start_ds AND @end_ds"}}
	if err := checkSQL(t.Context(), file, []modelfile.Model{src, down}); err != nil {
		t.Fatalf("SQLMesh's vocabulary: %v", err)
	}
	down.Register.SQL = "SELECT ts FROM src WHERE ds > @start_hour"
	err := checkSQL(t.Context(), file, []modelfile.Model{src, down})
	var me *modelfile.Error
	if !errors.As(err, &me) || me.Line != 9 || me.Path != "models[1].sql" || !strings.Contains(me.Msg, "@start_hour") {
		t.Fatalf("an unknown macro: %v, want models[1].sql at line 9 naming @start_hour", err)
	}
}
