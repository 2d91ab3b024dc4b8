package scenario

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/events/interval"
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

// A step's result lists the audit results it recorded, and with
// DiffBeforePromote a promote step carries its plan's diff taken before
// the promotion (only the promote step).
func TestWarehouseAuditsAndDiff(t *testing.T) {
	wh, err := warehouse.Open(t.Context(), filepath.Join(t.TempDir(), "warehouse.duckdb"), warehouse.Options{})
	if errors.Is(err, warehouse.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	src := strings.Replace(withData, "    time_column: ts\n", `    time_column: ts
    grain: [ts]
    audits:
      - not_null: {columns: [ts, user_id]}
      - number_of_rows: {threshold: 1}
      - name: full_hours
        sql: SELECT date_trunc('hour', ts) AS hour, count(*) AS n FROM @this_model GROUP BY 1 HAVING count(*) < 60
        blocking: false
`, 1)
	f, err := Parse("data.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[int]StepResult{}
	if _, err := Run(t.Context(), f, Options{Warehouse: wh, DiffBeforePromote: true, OnStep: func(sr StepResult) { steps[sr.Step] = sr }}); err != nil {
		t.Fatal(err)
	}
	audits := func(step int) string {
		var out []string
		for _, a := range steps[step].Audits {
			out = append(out, fmt.Sprintf("%s %s %s passed=%v count=%d blocking=%v", a.Snapshot, interval.Set(a.Ranges).Strings(), a.Audit, a.Passed, a.Count, a.Blocking))
		}
		return strings.Join(out, "\n")
	}
	// The backfill step audits v2's one batch (32 hours of 30 rows).
	if got, want := audits(4), "events@v2 [2026-11-30T00:00:00Z/2026-12-01T08:00:00Z] not_null passed=true count=0 blocking=true\n"+
		"events@v2 [2026-11-30T00:00:00Z/2026-12-01T08:00:00Z] number_of_rows passed=true count=960 blocking=true\n"+
		"events@v2 [2026-11-30T00:00:00Z/2026-12-01T08:00:00Z] full_hours passed=false count=32 blocking=false"; got != want {
		t.Errorf("backfill step's audits:\n%s\nwant\n%s", got, want)
	}
	if got := audits(3); got != "" {
		t.Errorf("the plan step recorded audits: %s", got)
	}
	for n, sr := range steps {
		if (sr.Diff != nil) != (sr.Kind == "promote") {
			t.Errorf("step %d (%s): diff %+v", n, sr.Kind, sr.Diff)
		}
	}
	d := steps[5].Diff
	if d == nil || len(d.Models) == 0 || d.Models[0].TableDiff == nil {
		t.Fatalf("promote step's diff: %+v", d)
	}
	// Before the promotion: v2 against the v1 prod serves, 32 hours.
	m := d.Models[0]
	if m.Model != "events" || m.Candidate != "events@v2" || m.Incumbent != "events@v1" || m.Replaced ||
		m.CandidateRows != 960 || m.IncumbentRows != 1920 || m.Changed == 0 || fmt.Sprint(m.Grain) != "[ts]" {
		t.Errorf("events' diff: %+v %+v", m, *m.TableDiff)
	}
}
