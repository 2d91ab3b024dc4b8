//go:build cgo

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
