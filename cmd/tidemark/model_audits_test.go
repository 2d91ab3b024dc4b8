//go:build cgo

package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/models"
)

// auditedModels is page_views (60 rows an hour, users 0..4) with audits:
// two pass, a blocking custom one and a non-blocking one fail on user 4.
func auditedModels(start time.Time) string {
	return auditedModelsSQL(start, `SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)`)
}

// auditedModelsSQL is auditedModels with page_views computed by sql.
func auditedModelsSQL(start time.Time, sql string) string {
	return `models:
  - name: page_views
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    batch_size: 24
    sql: |
      ` + sql + `
    audits:
      - not_null: {columns: [ts, user_id]}
      - number_of_rows: {threshold: 1}
      - name: no_user_4
        sql: SELECT ts, user_id FROM @this_model WHERE user_id = 4
      - accepted_values: {column: user_id, is_in: ['0', '1', '2', '3'], blocking: false}
`
}

// planAudited applies the model file body (one model starting at start)
// to s and builds plan a1 setting it; it returns the model's snapshot
// and how many batches the plan's backfill has: two whole days and
// today's hours (2 at midnight, when no hour of today has ended).
func planAudited(t *testing.T, s *served, start time.Time, body string) (snapshot string, batches int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "apply", "-f", path, "--nats-url", s.nats, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil || len(applied) != 1 {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", "a1", "--nats-url", s.nats, "--set", strings.Replace(applied[0].Snapshot, "@", "=", 1)); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	if time.Now().UTC().Truncate(time.Hour).Equal(start.Add(48 * time.Hour)) {
		return applied[0].Snapshot, 2
	}
	return applied[0].Snapshot, 3
}

// TestModelAuditsForReal: serve with the built-in worker computes a model
// whose audits a model file declares: every batch's completion records
// the audits' results (AuditRecorded, with the failing rows' count and
// sample), and the promotion is rejected audit_failed, warning
// audit_warning; serve's register check refuses a custom audit reading a
// column the model lacks, naming the audit's field.
func TestModelAuditsForReal(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	snapshot, batches := planAudited(t, s, start, auditedModels(start))
	var recorded []events.AuditRecorded
	eventually(t, "every batch's audits are recorded", time.Minute, func() bool {
		recorded = recorded[:0]
		for _, r := range readEvents(t, s.nats) {
			if a, ok := r.Event.Payload.(events.AuditRecorded); ok {
				recorded = append(recorded, a)
			}
		}
		return len(recorded) >= 4*batches
	})
	for _, a := range recorded {
		hours := a.Ranges[0].End.Sub(a.Ranges[0].Start).Hours()
		failing := a.Audit == "no_user_4" || a.Audit == "accepted_values"
		if a.Snapshot != snapshot || a.Passed == failing || a.Blocking == (a.Audit == "accepted_values") {
			t.Errorf("AuditRecorded %+v", a)
		}
		if a.Audit == "no_user_4" && (a.Count != int64(12*hours) || len(a.Sample) != 5 || a.Sample[0][1] != "4") {
			t.Errorf("no_user_4 over %v: count %d, sample %q", a.Ranges, a.Count, a.Sample)
		}
	}
	out, _, code := runCLI(t, "promote", "a1", "--nats-url", s.nats)
	if code != 1 || !strings.Contains(out, "audit_failed") || !strings.Contains(out, "audit_warning") || !strings.Contains(out, "no_user_4") {
		t.Fatalf("promote: exit %d\n%s\nwant rejected audit_failed (no_user_4) with audit_warning", code, out)
	}

	// serve checks a custom audit's SQL at register (apply checks it
	// first; here it is sent as it is).
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, err = send(t.Context(), nc, &commands.RegisterSnapshot{Meta: commands.Meta{Actor: "cli"}, Model: "page_views", Version: "v9", Cron: "@hourly", Start: start,
		SQL: "SELECT @start_ts AS ts, 1 AS user_id", TimeColumn: "ts",
		Audits: []models.Audit{{Name: "typo", Kind: models.AuditCustom, SQL: "SELECT * FROM @this_model WHERE usr_id = 4"}}})
	var ce *commands.Error
	if !errors.As(err, &ce) || ce.Field != "audits[0].sql" || !strings.Contains(ce.Error(), "usr_id") {
		t.Fatalf("a custom audit reading a column the model lacks: %v, want invalid on audits[0].sql", err)
	}
}

// TestApplyChecksAudits: apply -f checks a model's audits with its SQL
// before it sends anything (no server here), naming the model's line and
// the audit's field.
func TestApplyChecksAudits(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, from, to, want string }{
		{"custom binder", "WHERE user_id = 4", "WHERE usr_id = 4", `models.yaml:2: models[0].audits[2].sql: does not bind: Binder Error: Referenced column "usr_id" not found`},
		{"custom reads another table", "FROM @this_model", "FROM raw.events", `models.yaml:2: models[0].audits[2].sql: reads raw.events`},
		{"built-in column", "not_null: {columns: [ts, user_id]}", "not_null: {columns: [ts, user]}", `models.yaml:2: models[0].audits[0].columns[1]: "user" is not a column of the model's result`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "models.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(auditedModels(start), c.from, c.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runCLI(t, "apply", "-f", path, "--nats-url", "nats://127.0.0.1:1")
			if code != 2 || !strings.Contains(stderr, filepath.Dir(path)+"/"+c.want) {
				t.Fatalf("exit %d: %s\nwant %q", code, stderr, c.want)
			}
		})
	}
}

// TestSQLWorkerReportsAudits: `tidemark worker --warehouse` on Postgres
// audits each batch it computes from the published step and reports the
// outcomes in its complete_work: the stream records them, and the
// promotion is rejected audit_failed.
func TestSQLWorkerReportsAudits(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn)
	startSQLWorker(t, s.nats, dsn, "w1")
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	_, batches := planAudited(t, s, start, auditedModelsSQL(start, `SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id
      FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)`))
	var failed int
	eventually(t, "every batch's audits are recorded from the worker's reports", time.Minute, func() bool {
		failed = 0
		n := 0
		for _, r := range readEvents(t, s.nats) {
			if a, ok := r.Event.Payload.(events.AuditRecorded); ok {
				n++
				if a.Audit == "no_user_4" && !a.Passed && a.Count > 0 && len(a.Sample) == 5 {
					failed++
				}
			}
		}
		return n >= 4*batches
	})
	if failed != batches {
		t.Fatalf("%d failed no_user_4 results, want %d", failed, batches)
	}
	out, _, code := runCLI(t, "promote", "a1", "--nats-url", s.nats)
	if code != 1 || !strings.Contains(out, "audit_failed") {
		t.Fatalf("promote: exit %d\n%s\nwant rejected audit_failed", code, out)
	}
}
