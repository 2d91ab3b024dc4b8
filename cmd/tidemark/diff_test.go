package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// diffModels are the demo's models: events v1 60 rows an hour from 7
// users, v2 (grain ts) 30 rows an hour from 5 users; a daily rollup of it
// (grain day).
const diffModels = `models:
  - name: events
    version: %VERSION%
    cron: "@hourly"
    start: %START%
    time_column: ts
    grain: ts
    sql: |
      %SQL%
  - name: rollup
    version: v1
    cron: "@daily"
    start: %START%
    depends_on: [events]
    time_column: day
    grain: [day]
    sql: |
      SELECT date_trunc('day', ts) AS day, count(*) AS views, count(DISTINCT user_id) AS users
      FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
`

const (
	eventsV1 = "SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 7 AS BIGINT) AS user_id FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
	eventsV2 = "SELECT h.h + to_minutes(CAST(2 * r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id FROM range(0, 30) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
)

// TestDiffForReal: serve with the built-in worker on DuckDB; prod serves
// the demo's events v1 and its rollup; a plan sets events v2. diff shows
// the demo's difference, 30 against 60 rows an hour (4 of them the same
// in both: 26 only in v2, 56 only in v1, 26 keys whose user_id changed),
// and the derived rollup's changed days; exit 1. An unknown plan exits 3,
// an unknown model too; --model narrows it.
func TestDiffForReal(t *testing.T) {
	diffForReal(t, startServe(t, "--builtin-worker"), eventsV1, eventsV2)
}

// TestDiffPostgres: the same on Postgres, serve swapping the views and two
// `tidemark worker --warehouse` processes computing (the models' SQL
// written for both engines: generate_series rather than DuckDB's range).
func TestDiffPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn)
	startSQLWorker(t, s.nats, dsn, "w1")
	startSQLWorker(t, s.nats, dsn, "w2")
	diffForReal(t, s, portableEventsV1, portableEventsV2)
}

// portableEventsV1 and portableEventsV2 are eventsV1 and eventsV2 in SQL
// both engines run.
const (
	portableEventsV1 = "SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 7 AS BIGINT) AS user_id FROM generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h), generate_series(0, 59) AS g(i)"
	portableEventsV2 = "SELECT h.h + CAST(2 * g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id FROM generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h), generate_series(0, 29) AS g(i)"
)

// diffForReal is TestDiffForReal's story on the serve s, events' versions
// written as v1 and v2.
func diffForReal(t *testing.T, s *served, v1, v2 string) {
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	file := filepath.Join(t.TempDir(), "models.yaml")
	write := func(version, sql string) {
		body := strings.NewReplacer("%VERSION%", version, "%START%", start.Format(time.RFC3339), "%SQL%", sql).Replace(diffModels)
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := runCLI(t, "apply", "-f", file, "--nats-url", s.nats); code != 0 {
			t.Fatalf("apply: exit %d %s %s", code, out, stderr)
		}
	}
	write("v1", v1)
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", "d1", "--set", "events=v1,rollup=v1", "--nats-url", s.nats, "--wait", "1m"); code != 0 {
		t.Fatalf("plan d1: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the deploy is promoted", time.Minute, func() bool {
		out, _, code := runCLI(t, "promote", "d1", "--nats-url", s.nats)
		return code == 0 && strings.Contains(out, "ACCEPTED")
	})
	write("v2", v2)
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", "p1", "--set", "events=v2", "--nats-url", s.nats, "--wait", "1m"); code != 0 {
		t.Fatalf("plan p1: exit %d %s %s", code, out, stderr)
	}

	out, stderr, code := runCLI(t, "diff", "p1", "--nats-url", s.nats, "-o", "json")
	var rep sqlrun.DiffReply
	if err := json.Unmarshal([]byte(out), &rep); code != 1 || err != nil || rep.Plan != "p1" || rep.Env != "prod" || len(rep.Models) != 2 {
		t.Fatalf("diff p1: exit %d %v %s %s", code, err, out, stderr)
	}
	ev, ru := rep.Models[0], rep.Models[1]
	hours := 0
	for _, r := range ev.Ranges {
		hours += len(interval.Set{r}.Split(interval.Hour))
	}
	if ev.Model != "events" || ev.Candidate != "events@v2" || ev.Incumbent != "events@v1" || ev.TableDiff == nil || hours < 48 {
		t.Fatalf("events: %+v over %d hours", ev, hours)
	}
	d := ev.TableDiff
	h := int64(hours)
	if d.CandidateRows != 30*h || d.IncumbentRows != 60*h || d.OnlyInCandidate != 26*h || d.OnlyInIncumbent != 56*h {
		t.Fatalf("events over %d hours: %d and %d rows, %d only in v2, %d only in v1", hours, d.CandidateRows, d.IncumbentRows, d.OnlyInCandidate, d.OnlyInIncumbent)
	}
	if d.Changed != 26*h || d.ChangedColumns["user_id"] != 26*h || len(d.Samples) != 10 || len(d.Grain) != 1 || d.Grain[0] != "ts" {
		t.Fatalf("events' changed rows: %d, by column %v, %d samples, grain %v", d.Changed, d.ChangedColumns, len(d.Samples), d.Grain)
	}
	// Every day of the rollup changed (720 views from 5 users against 1,440
	// from 7): two, or three across a midnight.
	if rd := ru.TableDiff; ru.Model != "rollup" || ru.Candidate != "rollup@v1+p1" || rd == nil || rd.Changed < 2 || rd.Changed != rd.CandidateRows ||
		rd.Changed != rd.IncumbentRows || rd.ChangedColumns["views"] != rd.Changed || rd.ChangedColumns["users"] != rd.Changed {
		t.Fatalf("rollup: %+v %+v", ru, ru.TableDiff)
	}

	out, stderr, code = runCLI(t, "diff", "p1", "--model", "events", "--nats-url", s.nats)
	if code != 1 || !strings.Contains(out, "events: events@v2 against events@v1 over ") || !strings.Contains(out, "DIFFERS") ||
		!strings.Contains(out, "grain (ts): ") || !strings.Contains(out, "by column: user_id ") || strings.Contains(out, "rollup") {
		t.Fatalf("diff p1 --model events: exit %d %s %s", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "diff", "nope", "--nats-url", s.nats); code != 3 || !strings.Contains(stderr, "nope") {
		t.Fatalf("diff of an unknown plan: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "diff", "p1", "--model", "nope", "--nats-url", s.nats); code != 3 || !strings.Contains(stderr, "nope") {
		t.Fatalf("diff of an unknown model: exit %d %s", code, stderr)
	}
	// The dashboard's plan page shows the same counts.
	page := get(t, s.http+"/plans/p1")
	for _, want := range []string{`<td class="rows">` + strconv.FormatInt(30*h, 10) + " / " + strconv.FormatInt(60*h, 10) + `</td>`,
		`<td class="only-candidate">` + strconv.FormatInt(26*h, 10) + `</td>`, `<td class="changed">` + strconv.FormatInt(26*h, 10) + ` <small>(ts)</small></td>`,
		`<tr data-model="rollup" data-differs="true">`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the plan page lacks %q:\n%s", want, page)
		}
	}
	// The deploy's plan compared its candidates with nothing: exit 0.
	out, stderr, code = runCLI(t, "diff", "d1", "--nats-url", s.nats)
	if code != 0 || strings.Count(out, "skipped") != 2 {
		t.Fatalf("diff d1: exit %d %s %s", code, out, stderr)
	}
}
