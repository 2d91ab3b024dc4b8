package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// restateModels writes a model file of an hourly raw (60 rows an hour,
// one a minute, user = minute % 5), an hourly events reading raw's rows
// that pass filter, and a daily rollup counting events per user and day,
// in SQL both DuckDB and Postgres run; eventsKind, when set, is events'
// kind.
func restateModels(t *testing.T, start time.Time, filter, eventsKind string) string {
	t.Helper()
	kind := ""
	if eventsKind != "" {
		kind = "    kind: " + eventsKind + "\n"
	}
	s := start.Format(time.RFC3339)
	body := `models:
  - name: raw
    cron: "@hourly"
    start: ` + s + `
    time_column: ts
    sql: |
      SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id
      FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)
  - name: events
    cron: "@hourly"
    start: ` + s + `
    depends_on: [raw]
` + kind + `    time_column: ts
    sql: |
      SELECT ts, user_id FROM raw WHERE ts >= @start_ts AND ts < @end_ts AND ` + filter + `
  - name: rollup
    cron: "@daily"
    start: ` + s + `
    depends_on: [events]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day, user_id, count(*) AS views
      FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2
`
	p := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// deployModels applies a model file, builds plan id in prod setting
// every model it registers anew (set: only those named, when given), and
// promotes it once its backfill is computed. It returns the snapshots
// applied, by model.
func deployModels(t *testing.T, natsURL, models, id string, set ...string) map[string]string {
	t.Helper()
	out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", natsURL, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	snaps := map[string]string{}
	args := []string{"plan", "--env", "prod", "--id", id, "--nats-url", natsURL}
	for _, a := range applied {
		m, _, _ := strings.Cut(a.Snapshot, "@")
		snaps[m] = a.Snapshot
		if len(set) == 0 || contains(set, m) {
			args = append(args, "--set", strings.Replace(a.Snapshot, "@", "=", 1))
		}
	}
	if out, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("plan %s: exit %d %s %s", id, code, out, stderr)
	}
	eventually(t, "plan "+id+"'s backfill is computed and its promotion accepted", 2*time.Minute, func() bool {
		out, _, code := runCLI(t, "promote", id, "--nats-url", natsURL)
		return code == 0 && strings.Contains(out, "ACCEPTED")
	})
	return snaps
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// queryCSV is one query's CSV answer through serve ("" when it fails:
// prod's views are swapped a moment after the promotion).
func queryCSV(t *testing.T, natsURL, sql string) string {
	t.Helper()
	out, stderr, code := runCLI(t, "query", sql, "--nats-url", natsURL, "-o", "csv")
	if code != 0 {
		t.Logf("query %s: exit %d %s", sql, code, stderr)
		return ""
	}
	return out
}

// restateFixture is what both warehouses' tests share: start is the
// models' start (two days before today), hour the restated hour (06:00
// on the second day) and day its day.
type restateFixture struct {
	nats      string
	start     time.Time
	hour, day time.Time
}

func newRestateFixture(natsURL string) restateFixture {
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	return restateFixture{nats: natsURL, start: start, hour: start.Add(30 * time.Hour), day: start.Add(24 * time.Hour)}
}

// eventsIn is the number of prod.events rows in the restated hour.
func (f restateFixture) eventsIn(t *testing.T) string {
	t.Helper()
	return queryCSV(t, f.nats, "SELECT count(*) AS n FROM prod.events WHERE ts >= TIMESTAMP '"+f.hour.Format("2006-01-02 15:04:05")+
		"' AND ts < TIMESTAMP '"+f.hour.Add(time.Hour).Format("2006-01-02 15:04:05")+"'")
}

// rollupOf is the sum of prod.rollup's views on the restated day.
func (f restateFixture) rollupOf(t *testing.T) string {
	t.Helper()
	return queryCSV(t, f.nats, "SELECT sum(views) AS n FROM prod.rollup WHERE day = TIMESTAMP '"+f.day.Format("2006-01-02 15:04:05")+"'")
}

// restate runs `tidemark restate` of events' restated hour and waits
// for its work; it checks the cascade it prints: events' hour, then
// rollup's whole day.
func (f restateFixture) restate(t *testing.T) {
	t.Helper()
	hour := f.hour.Format(time.RFC3339) + "/" + f.hour.Add(time.Hour).Format(time.RFC3339)
	day := f.day.Format(time.RFC3339) + "/" + f.day.Add(24*time.Hour).Format(time.RFC3339)
	out, stderr, code := runCLI(t, "restate", "--env", "prod", "--model", "events", "--range", hour, "--wait", "2m", "--reason", "late raw rows", "--nats-url", f.nats)
	if code != 0 {
		t.Fatalf("restate: exit %d\n%s\n%s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "restating events in prod") ||
		!strings.Contains(lines[1], "events@") || !strings.HasSuffix(lines[1], "recomputes "+hour) ||
		!strings.Contains(lines[2], "rollup@") || !strings.HasSuffix(lines[2], "recomputes "+day) {
		t.Fatalf("restate printed:\n%s", out)
	}
	if !strings.Contains(stderr, "restate events: recomputed") {
		t.Fatalf("restate --wait: %s", stderr)
	}
}

// TestRestateForReal: serve with the built-in worker on DuckDB. events
// gets a forward-only version with new logic (it keeps only the first 30
// minutes of raw's hour): production's history keeps the old rows until
// an hour of it is restated; the restatement of that hour recomputes it
// with the new logic and its whole day of rollup (an hourly hour to its
// daily day), in that order, recorded as restate work, and verify finds 0
// differing rows. The CLI's bad inputs exit per the README's table.
func TestRestateForReal(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	f := newRestateFixture(s.nats)
	v1 := deployModels(t, s.nats, restateModels(t, f.start, "true", ""), "d1")
	eventually(t, "the rollup is computed", time.Minute, func() bool { return f.rollupOf(t) == "n\n1440\n" })

	// events v2, forward-only: new logic for new intervals; history stays.
	v2 := deployModels(t, s.nats, restateModels(t, f.start, "extract(minute FROM ts) < 30", "forward_only"), "d2", "events")
	if v2["events"] == v1["events"] {
		t.Fatalf("events v2 not registered: %v", v2)
	}
	eventually(t, "prod's rollup reads d2's derived table", time.Minute, func() bool {
		return queryCSV(t, s.nats, "SELECT sum(views) AS n FROM prod.rollup") == "n\n2880\n"
	})
	if got := f.eventsIn(t); got != "n\n60\n" {
		t.Fatalf("events' hour before the restatement: %q", got)
	}

	f.restate(t)
	if out, _, code := runCLI(t, "status", "--nats-url", s.nats, "-o", "json"); code != 0 || !strings.Contains(out, `"restatements":[]`) {
		t.Fatalf("status after the restatement's work: exit %d %s", code, out)
	}
	if got := f.eventsIn(t); got != "n\n30\n" {
		t.Fatalf("events' hour after the restatement: %q, want the new logic's 30 rows", got)
	}
	if got := f.rollupOf(t); got != "n\n1410\n" {
		t.Fatalf("rollup's day after the restatement: %q, want 1440 - 30", got)
	}
	if got := queryCSV(t, s.nats, "SELECT sum(views) AS n FROM prod.rollup"); got != "n\n2850\n" {
		t.Fatalf("rollup after the restatement: %q (only its restated day changes)", got)
	}
	out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || strings.Count(out, ": ok (0 rows only in the view, 0 only in the recompute") != 3 {
		t.Fatalf("verify after the restatement: exit %d %s %s", code, out, stderr)
	}
	for _, m := range []string{"events", "rollup"} {
		if out, _, code := runCLI(t, "audit", "--nats-url", s.nats, "--model", m); code != 0 || !strings.Contains(out, "(restate)") || !strings.Contains(out, "restatement of "+v2["events"]) {
			t.Fatalf("audit of %s shows no restatement and its work: exit %d\n%s", m, code, out)
		}
	}
	// Replay decides the restatement again on its view: the same work.
	if out, stderr, code := runCLI(t, "replay", "--verify", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "0 divergence(s)") {
		t.Fatalf("replay --verify: exit %d %s %s", code, out, stderr)
	}

	// Bad inputs: exit 3 for what does not exist, 2 for usage, 1 for a
	// rejected restatement (nothing covered); -o json prints the request.
	hour := f.hour.Format(time.RFC3339) + "/" + f.hour.Add(time.Hour).Format(time.RFC3339)
	if _, stderr, code := runCLI(t, "restate", "--env", "prod", "--model", "nope", "--range", hour, "--nats-url", s.nats); code != 3 || !strings.Contains(stderr, `serves no model "nope"`) {
		t.Fatalf("unknown model: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "restate", "--env", "prod", "--model", "events", "--range", "yesterday", "--nats-url", s.nats); code != 2 || !strings.Contains(stderr, "--range") {
		t.Fatalf("bad range: exit %d %s", code, stderr)
	}
	future := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Hour)
	if _, stderr, code := runCLI(t, "restate", "--env", "prod", "--model", "events", "--range", future.Format(time.RFC3339)+"/"+future.Add(time.Hour).Format(time.RFC3339), "--nats-url", s.nats); code != exitUsage || !strings.Contains(stderr, "covers nothing of") {
		t.Fatalf("nothing covered: exit %d %s", code, stderr)
	}
	out, stderr, code = runCLI(t, "restate", "--env", "prod", "--model", "rollup", "--range", hour, "-o", "json", "--nats-url", s.nats)
	var req struct {
		Model string `json:"model"`
		Work  []struct {
			Snapshot string   `json:"snapshot"`
			Ranges   []string `json:"ranges"`
		} `json:"work"`
	}
	if err := json.Unmarshal([]byte(out), &req); code != 0 || err != nil || req.Model != "rollup" || len(req.Work) != 1 ||
		len(req.Work[0].Ranges) != 1 || req.Work[0].Ranges[0] != f.day.Format(time.RFC3339)+"/"+f.day.Add(24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("restate -o json: exit %d %v %s %s", code, err, out, stderr)
	}
}

// TestRestatePostgres: serve on Postgres, its work computed by two
// `tidemark worker --warehouse` processes (the restate item published as
// batches, rollup's held until events' is done). raw's rows of an hour
// change in the warehouse (late data, as a loader would write it):
// events' hour no longer matches its recompute until the hour is
// restated; the restatement recomputes it from the new rows and rollup's
// whole day, and verify finds events and rollup clean (raw, changed
// outside tidemark, still differs: verify says so).
func TestRestatePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn)
	startSQLWorker(t, s.nats, dsn, "w1")
	startSQLWorker(t, s.nats, dsn, "w2")
	f := newRestateFixture(s.nats)
	snaps := deployModels(t, s.nats, restateModels(t, f.start, "true", ""), "d1")
	eventually(t, "the rollup is computed", time.Minute, func() bool { return f.rollupOf(t) == "n\n1440\n" })

	wh, err := warehouse.Open(t.Context(), dsn, warehouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	res, err := wh.DB().ExecContext(t.Context(), `DELETE FROM tidemark."`+sqlrun.TableName(snaps["raw"])+`" WHERE ts >= $1 AND ts < $2`, f.hour, f.hour.Add(20*time.Minute))
	if n, _ := res.RowsAffected(); err != nil || n != 20 {
		t.Fatalf("deleting raw's rows: %d %v", n, err)
	}
	if out, _, code := runCLI(t, "verify", "--env", "prod", "--model", "events", "--nats-url", s.nats); code != 1 || !strings.Contains(out, "prod.events: DIFFERS (20 rows only in the view") {
		t.Fatalf("verify events before the restatement: exit %d %s", code, out)
	}

	f.restate(t)
	if got := f.eventsIn(t); got != "n\n40\n" {
		t.Fatalf("events' hour after the restatement: %q, want raw's 40 rows", got)
	}
	if got := f.rollupOf(t); got != "n\n1420\n" {
		t.Fatalf("rollup's day after the restatement: %q, want 1440 - 20", got)
	}
	for _, m := range []string{"events", "rollup"} {
		if out, stderr, code := runCLI(t, "verify", "--env", "prod", "--model", m, "--nats-url", s.nats); code != 0 || !strings.Contains(out, "prod."+m+": ok (0 rows only in the view, 0 only in the recompute") {
			t.Fatalf("verify %s after the restatement: exit %d %s %s", m, code, out, stderr)
		}
	}
	if out, _, code := runCLI(t, "verify", "--env", "prod", "--model", "raw", "--nats-url", s.nats); code != 1 || !strings.Contains(out, "prod.raw: DIFFERS (0 rows only in the view, 20 only in the recompute") {
		t.Fatalf("verify raw: exit %d %s", code, out)
	}
}

// restateLeft, what restate --wait waits for, from status answers: the
// restated ranges until each table covers them again (a range past the
// frontier too: invalidating the last hour moves the frontier back), and
// an error once the work cannot be done (a final failure of restate work
// after the request, the environment at another generation).
func TestRestateLeft(t *testing.T) {
	h := func(i int) time.Time { return time.Date(2026, 12, 1, i, 0, 0, 0, time.UTC) }
	req := &events.RestatementRequested{Env: "prod", Model: "events", Generation: 2, Work: []events.RestateWork{
		{Model: "events", Snapshot: "events@v1", Ranges: []interval.Range{interval.R(h(6), h(7))}},
		{Model: "rollup", Snapshot: "rollup@v1", Ranges: []interval.Range{interval.R(h(0), h(24))}},
	}}
	status := func(gen uint64, evFrontier time.Time, evMissing []interval.Range, rollFrontier time.Time, fail *commands.RunFailure) commands.Reply {
		return commands.Reply{Envs: []commands.EnvStatus{{Env: "prod", Generation: gen, Models: []commands.ModelStatus{
			{Model: "events", Snapshot: "events@v1", Frontier: evFrontier, Missing: evMissing, LastFailure: fail},
			{Model: "rollup", Snapshot: "rollup@v1", Frontier: rollFrontier},
		}}}}
	}
	for _, c := range []struct {
		name string
		st   commands.Reply
		left string
		err  string
	}{
		{"done", status(2, h(12), nil, h(24), nil), "", ""},
		{"a hole", status(2, h(12), []interval.Range{interval.R(h(6), h(7))}, h(24), nil), "events@v1 2026-12-01T06:00:00Z/2026-12-01T07:00:00Z", ""},
		{"the frontier moved back", status(2, h(12), nil, h(0), nil), "rollup@v1 2026-12-01T00:00:00Z/2026-12-02T00:00:00Z", ""},
		{"an older failure", status(2, h(12), nil, h(24), &commands.RunFailure{RunKind: events.RunRestate, Final: true, Seq: 5}), "", ""},
		{"given up", status(2, h(12), nil, h(24), &commands.RunFailure{RunKind: events.RunRestate, Final: true, Seq: 11, Attempt: 5, Error: "boom"}), "", "given up after 5 attempt(s): boom"},
		{"another generation", status(3, h(12), nil, h(24), nil), "", "moved to generation 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			left, err := restateLeft(c.st, req, 10)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || exitCode(err) != exitFailed {
					t.Fatalf("err %v (exit %d), want %q, exit 1", err, exitCode(err), c.err)
				}
				return
			}
			if err != nil || left != c.left {
				t.Fatalf("left %q %v, want %q", left, err, c.left)
			}
		})
	}
}
