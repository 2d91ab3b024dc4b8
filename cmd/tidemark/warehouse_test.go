package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deployPageViews applies page_views (60 rows an hour, from two days
// ago) and its daily rollup, named in schema (schema "": unqualified;
// "sushi": sushi.page_views, its rollup reading "sushi.page_views"), to
// the serve s, plans them into prod as plan and waits for the promotion.
// It returns the models' start.
func deployPageViews(t *testing.T, s *served, schema, plan string) time.Time {
	t.Helper()
	prefix, from := "", "page_views"
	if schema != "" {
		prefix = schema + "."
		from = `"` + prefix + `page_views"`
	}
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	models := filepath.Join(t.TempDir(), "models.yaml")
	body := `models:
  - name: ` + prefix + `page_views
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
  - name: ` + prefix + `rollup
    cron: "@daily"
    start: ` + start.Format(time.RFC3339) + `
    depends_on: [` + prefix + `page_views]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day, user_id, count(*) AS views
      FROM ` + from + ` WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2
`
	if err := os.WriteFile(models, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil || len(applied) != 2 {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	args := []string{"plan", "--env", "prod", "--id", plan, "--nats-url", s.nats}
	for _, a := range applied {
		if !strings.HasPrefix(a.Snapshot, prefix) {
			t.Fatalf("applied %s", a.Snapshot)
		}
		args = append(args, "--set", strings.Replace(a.Snapshot, "@", "=", 1))
	}
	if out, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the backfill is computed and the promotion accepted", time.Minute, func() bool {
		out, _, code := runCLI(t, "promote", plan, "--nats-url", s.nats)
		return code == 0 && strings.Contains(out, "ACCEPTED")
	})
	return start
}

// TestWarehouseForReal: serve with the built-in worker computes SQL models
// into its DuckDB warehouse; after the promotion, query shows prod's rows
// and verify finds none differing; a bad query and an unknown env fail.
func TestWarehouseForReal(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	start := deployPageViews(t, s, "", "d1")
	// 60 page views an hour since the start (two days and the hours of
	// today); the rollup has the two whole days × 5 users.
	hours := int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour)
	want := "n\n" + strconv.Itoa(60*hours) + "\n"
	eventually(t, "prod's views read the promoted tables", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT count(*) AS n FROM prod.page_views", "--nats-url", s.nats, "-o", "csv")
		if code == 0 && out != want {
			t.Logf("prod.page_views: %q, want %q", out, want)
		}
		return code == 0 && out == want
	})
	eventually(t, "the rollup is computed", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT sum(views) AS total, count(*) AS rows FROM prod.rollup", "--nats-url", s.nats, "-o", "json")
		return code == 0 && strings.Contains(out, `"total":2880`) && strings.Contains(out, `"rows":10`)
	})
	// The dashboard shows the rows next to coverage.
	eventually(t, "the dashboard shows prod.page_views' rows", time.Minute, func() bool {
		resp, err := http.Get(s.http + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(page), `<td class="rows">`+strconv.Itoa(60*hours)+`</td>`)
	})
	out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.page_views: ok") || !strings.Contains(out, "prod.rollup: ok") {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "query", "DELETE FROM prod.page_views", "--nats-url", s.nats); code != exitUsage {
		t.Fatalf("a write through query: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "verify", "--env", "nope", "--nats-url", s.nats); code != exitNotFound || !strings.Contains(stderr, "nope") {
		t.Fatalf("verify an unknown env: exit %d %s", code, stderr)
	}
}

// scenario run --warehouse computes the file's SQL models in a new DuckDB
// file and checks verify expectations; the same file again is refused (it
// holds the first run's tables), and without a warehouse the verify
// expectations fail, saying why.
func TestScenarioRunWarehouse(t *testing.T) {
	const file = "../../testdata/scenarios/warehouse/forward-only-logic-change.yaml"
	db := filepath.Join(t.TempDir(), "scenario.duckdb")
	out, stderr, code := runCLI(t, "scenario", "run", "--warehouse", db, file)
	if code == 2 && strings.Contains(stderr, "without cgo") {
		t.Skip(stderr)
	}
	if code != 0 || !strings.Contains(out, "VERIFY") || strings.Count(out, "0 diffs") != 6 || !strings.Contains(out, "6 steps, 11 expectations, 0 failed") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, stderr, out)
	}
	if _, stderr, code := runCLI(t, "scenario", "run", "--warehouse", db, file); code != 2 || !strings.Contains(stderr, "already holds") {
		t.Fatalf("a used warehouse: exit %d, stderr %q", code, stderr)
	}
	// Several files: one DuckDB file each.
	many := filepath.Join(t.TempDir(), "many.duckdb")
	if out, stderr, code := runCLI(t, "scenario", "run", "--warehouse", many, file, file); code != 0 || strings.Count(out, "0 failed") != 2 {
		t.Fatalf("two files: exit %d, stderr %q, out:\n%s", code, stderr, out)
	}
	if got, _ := filepath.Glob(filepath.Join(filepath.Dir(many), "many-0?-forward-only-logic-change.duckdb")); len(got) != 2 {
		t.Fatalf("two files' warehouses: %v", got)
	}
	if _, stderr, code := runCLI(t, "scenario", "run", "--warehouse", "postgres://127.0.0.1:1/x", file, file); code != 2 || !strings.Contains(stderr, "runs one scenario file") {
		t.Fatalf("postgres and two files: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "scenario", "run", file); code != 1 || !strings.Contains(stderr, "step 1: verify.diffs: want 0, got <no warehouse: run with --warehouse>") {
		t.Fatalf("without a warehouse: exit %d, stderr %q", code, stderr)
	}
}
