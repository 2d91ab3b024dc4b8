package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQualifiedModelsForReal: schema-qualified models through the CLI:
// apply registers sushi.page_views and sushi.rollup (which reads
// "sushi.page_views", checked by sqlcheck on both sides), plan takes
// --set sushi.page_views=VERSION, the promotion puts their views in
// schema sushi__prod, query reads them there, and verify names them so.
func TestQualifiedModelsForReal(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	models := filepath.Join(t.TempDir(), "models.yaml")
	body := `models:
  - name: sushi.page_views
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
  - name: sushi.rollup
    cron: "@daily"
    start: ` + start.Format(time.RFC3339) + `
    depends_on: [sushi.page_views]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day, user_id, count(*) AS views
      FROM "sushi.page_views" WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2
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
	args := []string{"plan", "--env", "prod", "--id", "q1", "--nats-url", s.nats}
	for _, a := range applied {
		if !strings.HasPrefix(a.Snapshot, "sushi.") {
			t.Fatalf("applied %s", a.Snapshot)
		}
		args = append(args, "--set", strings.Replace(a.Snapshot, "@", "=", 1))
	}
	if out, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the backfill is computed and the promotion accepted", time.Minute, func() bool {
		out, _, code := runCLI(t, "promote", "q1", "--nats-url", s.nats)
		return code == 0 && strings.Contains(out, "ACCEPTED")
	})
	hours := int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour)
	want := "n\n" + strconv.Itoa(60*hours) + "\n"
	eventually(t, "sushi__prod.page_views reads the promoted table", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT count(*) AS n FROM sushi__prod.page_views", "--nats-url", s.nats, "-o", "csv")
		return code == 0 && out == want
	})
	eventually(t, "sushi__prod.rollup is computed", time.Minute, func() bool {
		out, _, code := runCLI(t, "query", "SELECT sum(views) AS total FROM sushi__prod.rollup", "--nats-url", s.nats, "-o", "json")
		return code == 0 && strings.Contains(out, `"total":2880`)
	})
	out, stderr, code = runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "sushi__prod.page_views: ok") || !strings.Contains(out, "sushi__prod.rollup: ok") {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
	if _, _, code := runCLI(t, "query", "SELECT count(*) FROM prod.page_views", "--nats-url", s.nats); code == 0 {
		t.Fatal("a qualified model's view is also in the env's own schema")
	}
}
