package scenario

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/warehouse"
)

// An hourly source of generated page views (60 an hour in v1, 30 in v2)
// and a daily rollup reading it.
const withData = `name: page views in a warehouse
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-11-30T00:00:00Z
    time_column: ts
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 7 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
  - name: rollup
    cron: "@daily"
    start: 2026-11-30T00:00:00Z
    depends_on: [events]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day, count(*) AS views, count(DISTINCT user_id) AS users
      FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
steps:
  - deploy: {env: prod, versions: {events: v1, rollup: v1}}
    expect: {outcome: accepted}
  - run_scheduler: {env: prod, until: 2026-12-01T08:00:00Z}
  - plan:
      id: p1
      env: prod
      versions:
        events:
          version: v2
          sql: "SELECT h.h + to_minutes(CAST(2 * r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id FROM range(0, 30) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
  - backfill: {plan: p1}
  - promote: {plan: p1}
    expect: {outcome: accepted, incumbent: {events: v2}}
  - replay: {}
    expect: {divergences: 0}
`

// With a warehouse, the run computes the SQL models' work into snapshot
// tables, prod's views follow each promotion, and every step's verify
// finds prod's rows equal to a recompute.
func TestWarehouseRows(t *testing.T) {
	wh, err := warehouse.Open(t.Context(), filepath.Join(t.TempDir(), "warehouse.duckdb"), warehouse.Options{})
	if errors.Is(err, warehouse.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	f, err := Parse("data.yaml", []byte(withData))
	if err != nil {
		t.Fatal(err)
	}
	query := func(q string) string {
		t.Helper()
		_, rows, err := wh.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows)
	}
	got := map[int][2]string{}
	verified := 0
	res, err := Run(t.Context(), f, Options{Warehouse: wh, OnStep: func(sr StepResult) {
		got[sr.Step] = [2]string{
			query("SELECT count(*), count(DISTINCT user_id), max(ts) FROM prod.events"),
			query("SELECT strftime(day, '%Y-%m-%d'), views, users FROM prod.rollup ORDER BY day"),
		}
		for m, d := range sr.Verify {
			verified++
			if !d.Empty() {
				t.Errorf("step %d: %s: %+v", sr.Step, m, d)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	// 30 hours at deploy (06:00), 32 after the scheduler ran to 08:00;
	// the rollup has the one complete day, 2026-11-30.
	for step, want := range map[int][2]string{
		1: {"[[1800 7 2026-12-01 05:59:00 +0000 UTC]]", "[[2026-11-30 1440 7]]"},
		2: {"[[1920 7 2026-12-01 07:59:00 +0000 UTC]]", "[[2026-11-30 1440 7]]"},
		4: {"[[1920 7 2026-12-01 07:59:00 +0000 UTC]]", "[[2026-11-30 1440 7]]"}, // backfilled, not promoted
		5: {"[[960 5 2026-12-01 07:58:00 +0000 UTC]]", "[[2026-11-30 720 5]]"},   // the view swap
	} {
		if got[step] != want {
			t.Errorf("step %d: prod rows %q, want %q", step, got[step], want)
		}
	}
	if verified == 0 {
		t.Fatal("nothing verified")
	}
}
