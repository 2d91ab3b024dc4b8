package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeShowsAFailingModel: `serve --builtin-worker` (its pool, on
// DuckDB) gives a model whose SQL fails at compute time up after
// --work-max-attempts, and the failure's text is visible everywhere:
// `plan --wait` exits 1 naming the model and the error, `status` shows
// it with the plan, the dashboard on the plan's row, and /metrics counts
// the stream's RunFailed events. Meanwhile prod's plan of a healthy model
// completes. Before, the built-in worker retried the item for ever
// (plan --wait timed out asking whether a worker runs, /metrics said
// tidemark_worker_failures 0).
func TestServeShowsAFailingModel(t *testing.T) {
	s := startServe(t, "--builtin-worker", "--work-max-attempts", "2")
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	models := filepath.Join(t.TempDir(), "models.yaml")
	body := `models:
  - name: pv
    version: v1
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    sql: |
      SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id
      FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)
  - name: poison
    version: v1
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    depends_on: [pv]
    time_column: ts
    sql: |
      SELECT ts, CAST(CASE WHEN user_id >= 0 THEN 'x' ELSE '1' END AS INTEGER) AS bad
      FROM pv WHERE ts >= @start_ts AND ts < @end_ts
`
	if err := os.WriteFile(models, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "pv=v1", "--id", "p1", "--nats-url", s.nats, "--wait", "60s"); code != 0 {
		t.Fatalf("plan p1 --wait: exit %d %s %s", code, out, stderr)
	}
	_, stderr, code := runCLI(t, "plan", "--env", "dev", "--set", "pv=v1,poison=v1", "--id", "d1", "--nats-url", s.nats, "--wait", "60s")
	const text = "Could not convert string 'x' to INT32"
	if code != 1 || !strings.Contains(stderr, "plan d1 failed: model poison (poison@v1) was given up after 2 attempt(s)") || !strings.Contains(stderr, text) {
		t.Fatalf("plan d1 --wait: exit %d, want 1 naming poison and its error:\n%s", code, stderr)
	}
	out, stderr, code := runCLI(t, "status", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "plan in flight: d1 for dev") || !strings.Contains(out, "poison@v1: backfill attempt 2 (given up") || !strings.Contains(out, text) {
		t.Fatalf("status: exit %d %s\n%s", code, stderr, out)
	}
	page := get(t, s.http+"/")
	if !strings.Contains(page, `data-model="poison" data-final="true"`) || !strings.Contains(page, "Could not convert string &#39;x&#39; to INT32") {
		t.Errorf("the dashboard does not show the failure's text on the plan:\n%s", page)
	}
	metrics := get(t, s.http+"/metrics")
	for _, want := range []string{`tidemark_work_failures_total{final="true"} 1`, `tidemark_work_failures_total{final="false"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Prod's plan is promotable: its work was not held up.
	if out, stderr, code := runCLI(t, "promote", "p1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "p1: ACCEPTED") {
		t.Fatalf("promote p1: exit %d %s %s", code, out, stderr)
	}
	// Cancelling the failed plan is recorded; a second time is refused.
	if out, stderr, code := runCLI(t, "plan", "cancel", "d1", "--reason", "poison", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "plan d1 cancelled") {
		t.Fatalf("plan cancel d1: exit %d %s %s", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "cancel", "d1", "--nats-url", s.nats); code != 1 || !strings.Contains(stderr, "cancelled already") {
		t.Fatalf("plan cancel d1 again: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "cancel", "nope", "--nats-url", s.nats); code != 3 {
		t.Fatalf("plan cancel nope: exit %d %s, want 3", code, stderr)
	}
	if out, _, _ := runCLI(t, "status", "--nats-url", s.nats); !strings.Contains(out, "plan cancelled: d1 for dev") {
		t.Errorf("status after the cancellation:\n%s", out)
	}
}
