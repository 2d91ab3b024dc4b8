package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/transport"
)

// pageViews writes a model file with page_views at version, perHour rows
// an hour, in the SQL of the backend (DuckDB's range or Postgres's
// generate_series).
func pageViews(t *testing.T, start time.Time, version string, perHour int, postgres bool) string {
	t.Helper()
	sql := "SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id\n" +
		"      FROM range(0, " + strconv.Itoa(perHour) + ") r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
	if postgres {
		sql = "SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id\n" +
			"      FROM generate_series(0, " + strconv.Itoa(perHour-1) + ") AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)"
	}
	body := "models:\n  - name: page_views\n    version: " + version + "\n    cron: \"@hourly\"\n    start: " + start.Format(time.RFC3339) +
		"\n    time_column: ts\n    sql: |\n      " + sql + "\n"
	p := filepath.Join(t.TempDir(), version+".yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRollbackForReal: a real serve with the built-in worker, on DuckDB
// and on Postgres. prod serves page_views v1 (60 rows an hour), then v2
// (30 rows an hour); `tidemark rollback --env prod` puts v1 back in one
// view swap: prod's view reads v1's rows again, the env's generation
// moves on, a scheduler advance that read v2's generation is fenced
// (stale_generation), and replay --verify reproduces the rollback.
func TestRollbackForReal(t *testing.T) {
	for _, backend := range []string{"duckdb", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"--builtin-worker"}
			if backend == "postgres" {
				args = append(args, "--warehouse", pgtest.DSN(t))
			}
			s := startServe(t, args...)
			start := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
			rows := func() int {
				out, _, code := runCLI(t, "query", "SELECT count(*) AS n FROM prod.page_views", "--nats-url", s.nats, "-o", "csv")
				n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(out, "n\n")))
				if code != 0 || err != nil {
					return -1
				}
				return n
			}
			hours := func() int { return int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour) }
			deploy := func(version string, perHour int) {
				t.Helper()
				if out, stderr, code := runCLI(t, "apply", "-f", pageViews(t, start, version, perHour, backend == "postgres"), "--nats-url", s.nats); code != 0 {
					t.Fatalf("apply %s: exit %d %s %s", version, code, out, stderr)
				}
				plan := "d-" + version
				if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", plan, "--set", "page_views="+version, "--nats-url", s.nats); code != 0 {
					t.Fatalf("plan %s: exit %d %s %s", plan, code, out, stderr)
				}
				eventually(t, plan+" is backfilled and accepted", time.Minute, func() bool {
					out, _, code := runCLI(t, "promote", plan, "--nats-url", s.nats)
					return code == 0 && strings.Contains(out, "ACCEPTED")
				})
				eventually(t, "prod's view reads "+version+"'s rows", time.Minute, func() bool { return rows() == perHour*hours() })
			}
			deploy("v1", 60)
			deploy("v2", 30)

			out, stderr, code := runCLI(t, "rollback", "--env", "prod", "--nats-url", s.nats, "-o", "json")
			var rb events.EnvironmentRolledBack
			if err := json.Unmarshal([]byte(out), &rb); code != 0 || err != nil {
				t.Fatalf("rollback: exit %d %v %s %s", code, err, out, stderr)
			}
			want := events.RolledBackModel{Model: "page_views", Restored: "page_views@v1", Table: "page_views@v1", Demoted: "page_views@v2"}
			if rb.FromGeneration != 2 || rb.ToGeneration != 1 || rb.Generation != 3 || len(rb.Models) != 1 || rb.Models[0] != want {
				t.Fatalf("rollback: %+v", rb)
			}
			eventually(t, "prod's view reads v1's rows again", time.Minute, func() bool { return rows() == 60*hours() })

			// The scheduler that read generation 2 (serving v2) is fenced.
			nc, err := connect(s.nats)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			r, err := transport.NewClient(nc).Do(ctx, &commands.AdvanceScheduler{Meta: commands.Meta{ID: commands.NewID()}, Env: "prod", Generation: 2})
			if err != nil || r.Code != commands.CodeStaleGeneration || r.Field != "generation" || r.Events != 0 {
				t.Fatalf("a stale advance after the rollback: %+v %v", r, err)
			}
			if n := rows(); n != 60*hours() {
				t.Fatalf("prod.page_views after the stale advance: %d rows", n)
			}

			// Refusals: exit 1 naming the field, exit 3 for an unknown env.
			if _, stderr, code := runCLI(t, "rollback", "--env", "prod", "--to", "7", "--nats-url", s.nats); code != exitFailed || !strings.Contains(stderr, "to_generation") {
				t.Fatalf("rollback --to 7: exit %d %s", code, stderr)
			}
			if _, stderr, code := runCLI(t, "rollback", "--env", "nope", "--nats-url", s.nats); code != exitNotFound || !strings.Contains(stderr, "env") {
				t.Fatalf("rollback of an unknown env: exit %d %s", code, stderr)
			}
			// The table form; then the default target is generation 2 again.
			out, stderr, code = runCLI(t, "rollback", "--env", "prod", "--nats-url", s.nats)
			if code != 0 || !strings.Contains(out, "prod: ROLLED BACK from generation 3 to generation 2's incumbents, now generation 4") ||
				!strings.Contains(out, "page_views: page_views@v2 restored (table page_views@v2), page_views@v1 demoted") {
				t.Fatalf("rollback (table): exit %d %s %s", code, out, stderr)
			}
			eventually(t, "prod's view reads v2's rows again", time.Minute, func() bool { return rows() == 30*hours() })

			out, stderr, code = runCLI(t, "replay", "--verify", "--nats-url", s.nats)
			if code != 0 || !strings.Contains(out, "0 divergence(s)") {
				t.Fatalf("replay --verify: exit %d %s %s", code, out, stderr)
			}
			out, _, _ = runCLI(t, "audit", "--nats-url", s.nats, "--env", "prod")
			if strings.Count(out, "EnvironmentRolledBack") != 2 {
				t.Fatalf("audit lacks the rollbacks:\n%s", out)
			}
		})
	}
}
