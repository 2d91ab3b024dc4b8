package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/modelfile"
)

const withSQL = `name: models with sql
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    time_column: ts
    sql: "SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 3 AS BIGINT) AS session_id FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
  - name: sessions
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    depends_on: [events]
    time_column: ts
    sql: |
      SELECT session_id, min(ts) AS ts FROM events
      WHERE ts >= @start_ts AND ts < @end_ts GROUP BY session_id
steps:
  - deploy: {env: prod, versions: {events: v1, sessions: v1}}
    expect: {outcome: accepted, incumbent: {events: v1, sessions: v1}}
  - plan:
      id: p1
      env: prod
      versions:
        sessions:
          version: v2
          sql: "select session_id, max(ts) as ts from events where ts >= @start_ts and ts < @end_ts group by 1"
  - backfill: {plan: p1}
  - promote: {plan: p1}
    expect: {outcome: accepted, incumbent: {events: v1, sessions: v2}}
`

// Scenario models and version overrides accept sql and time_column, checked
// by models.Definition.Validate; the run registers them.
func TestSQLModels(t *testing.T) {
	f, err := Parse("sql.yaml", []byte(withSQL))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Models["sessions"]
	if m.TimeColumn != "ts" || !strings.HasPrefix(m.SQL, "SELECT session_id, min(ts)") || !strings.HasSuffix(m.SQL, "GROUP BY session_id\n") {
		t.Fatalf("sessions: %q %q", m.SQL, m.TimeColumn)
	}
	if !strings.HasPrefix(f.Models["events"].SQL, "SELECT h.h") {
		t.Fatalf("events: %q", f.Models["events"].SQL)
	}
	v := f.Steps[1].Versions["sessions"]
	if v.Name != "v2" || v.Model.TimeColumn != "ts" || !strings.HasPrefix(v.Model.SQL, "select session_id, max(ts)") {
		t.Fatalf("override: %+v", v)
	}
	if res := run(t, f); res.Failed != 0 {
		t.Fatalf("failed %d of %d expectations: %v", res.Failed, res.Expectations, res.Failures)
	}

	for _, c := range []struct{ name, text, want string }{
		{"macro", strings.Replace(withSQL, "@end_ts GROUP", "@stop GROUP", 1), "bad.yaml: models[1].sql: uses the macro @stop at line 2"},
		{"override macro", strings.Replace(withSQL, "< @end_ts group", "< @end group", 1), "bad.yaml: step 2.plan.versions.sessions.sql: uses the macro @end at line 1"},
		{"no time column", strings.Replace(withSQL, "    depends_on: [events]\n    time_column: ts\n", "    depends_on: [events]\n", 1), "bad.yaml: models[1].time_column: is required when sql is set"},
		{"override time column", strings.Replace(withSQL, "          version: v2\n", "          version: v2\n          time_column: \"t s\"\n", 1), `bad.yaml: step 2.plan.versions.sessions.time_column: "t s": a plain column name`},
	} {
		_, err := Parse("bad.yaml", []byte(c.text))
		if !errors.Is(err, modelfile.ErrInvalid) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.name, err, c.want)
		}
	}
}

// TestRunChecksSQL: the runner's engine checks model SQL as serve's does
// (sqlcheck): a model reading a server file stops the run at its
// registration, naming the field.
func TestRunChecksSQL(t *testing.T) {
	text := strings.Replace(withSQL, "FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)", "FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h), read_text('/etc/passwd')", 1)
	f, err := Parse("hostile.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), f, Options{})
	if err == nil || !strings.Contains(err.Error(), "invalid: sql: sql calls the table function read_text") {
		t.Fatalf("got %v, want the registration refused", err)
	}
}
