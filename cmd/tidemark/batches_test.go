package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// batchedModels writes a model file of an hourly clicks model (60 rows an
// hour, batches of 4 hours, one batch at a time) and its hourly rollup
// (batches of 6 hours), which records in each row what its batch saw of
// clicks over the batch's whole range (seen) and the batch's bounds.
func batchedModels(t *testing.T, start time.Time) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "models.yaml")
	body := `models:
  - name: clicks
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    batch_size: 4
    batch_concurrency: 1
    sql: |
      SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id
      FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)
  - name: hourly
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    depends_on: [clicks]
    time_column: hour
    batch_size: 6
    sql: |
      SELECT date_trunc('hour', ts) AS hour, count(*) AS views,
        (SELECT count(*) FROM clicks p WHERE p.ts >= @start_ts AND p.ts < @end_ts) AS seen,
        @start_ts AS batch_start, @end_ts AS batch_end
      FROM clicks WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readEvents is every event the stream at natsURL holds now, in order
// (jstest.ReadLog).
func readEvents(t *testing.T, natsURL string) []events.Record {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recs, err := jstest.ReadLog(ctx, js)
	if err != nil {
		t.Fatalf("reading the events: %v", err)
	}
	return recs
}

// waiter is a backend of the warehouse's database waiting for a lock,
// and the application name its client connected with.
type waiter struct {
	pid int
	app string
}

// lockWaiters are the backends of db's database waiting for a lock: the
// advisory lock key (hashtextextended of it, as the warehouse takes its
// locks), or any when key is empty.
func lockWaiters(t *testing.T, db *sql.DB, key string) []waiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = current_database()
  AND ($1 = '' OR l.locktype = 'advisory' AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0))`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []waiter
	for rows.Next() {
		var w waiter
		if err := rows.Scan(&w.pid, &w.app); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBatchesPostgresWorkerProcesses: a plan's backfill of a parent model
// (batches of 4 hours, one at a time) and its child (batches of 6 hours)
// computed by three `tidemark worker --warehouse postgres://…` processes,
// serve redelivering a batch after --work-ack-wait. The test holds
// Postgres locks the warehouse's writes take to stop two of the parent's
// batches in the middle:
//   - the first after its INSERT, before it commits (the lock each write
//     takes before recording itself): its worker is killed (SIGKILL), the
//     batch goes to another worker, and the killed write leaves nothing;
//   - the second at the start of its write (its range's lock): its worker
//     is paused (SIGSTOP) until the batch is redelivered to another worker,
//     whose write then waits for the paused one's range; resumed, both
//     workers write the batch, one after the other.
//
// Then: every hour of the parent holds exactly its 60 rows (none twice,
// none lost) and the child one row; no child batch ran before the parent's
// batches overlapping its range were committed (each child row records
// what its batch saw of the parent over its whole range, and each child
// batch's completion follows theirs in the stream); the stream holds one
// completion per batch, naming the plan's work item, with the rows the
// batch wrote; after the promotion, verify finds 0 differing rows.
func TestBatchesPostgresWorkerProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn, "--work-ack-wait", "2s")
	workers := map[string]*exec.Cmd{}
	logs := map[string]*logBuffer{}
	for _, name := range []string{"b1", "b2", "b3"} {
		workers[name], logs[name] = startWorkerProcess(t, "--nats-url", s.nats, "--warehouse", dsn+"&application_name="+name, "--name", name,
			"--heartbeat", "100ms", "--log-format", "json")
	}
	eventually(t, "the three worker processes live on /metrics", time.Minute, func() bool {
		m := get(t, s.http+"/metrics")
		return strings.Contains(m, `worker="b1"`) && strings.Contains(m, `worker="b2"`) && strings.Contains(m, `worker="b3"`)
	})

	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	out, stderr, code := runCLI(t, "apply", "-f", batchedModels(t, start), "--nats-url", s.nats, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil || len(applied) != 2 {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	snaps := map[string]string{} // model → snapshot
	for _, a := range applied {
		m, _, _ := strings.Cut(a.Snapshot, "@")
		snaps[m] = a.Snapshot
	}
	parent, child := snaps["clicks"], snaps["hourly"]
	parentTable, childTable := sqlrun.TableName(parent), sqlrun.TableName(child)
	first := interval.R(start, start.Add(4*time.Hour))
	second := interval.R(first.End, first.End.Add(4*time.Hour))

	wh, err := warehouse.Open(t.Context(), dsn, warehouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	db := wh.DB()
	// The locks the test holds (session locks, on one connection): the
	// one each write of the parent's table takes after its INSERT, before
	// recording itself and committing; and the lock of the first hour of
	// the parent's second batch, which its write takes first.
	hold, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	writersKey := "tidemark.writers:" + parentTable
	secondKey := "tidemark.write:" + parentTable + ":0:" + strconv.FormatInt(second.Start.Unix()/3600, 10)
	held := map[string]bool{}
	lock := func(key string) {
		if _, err := hold.ExecContext(t.Context(), "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
			t.Fatal(err)
		}
		held[key] = true
	}
	unlock := func(key string) {
		if held[key] {
			held[key] = false
			if _, err := hold.ExecContext(context.Background(), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
				t.Error(err)
			}
		}
	}
	lock(writersKey)
	defer unlock(writersKey)
	lock(secondKey)
	defer unlock(secondKey)

	type result struct {
		out, stderr string
		code        int
	}
	planned := make(chan result, 1)
	go func() {
		out, stderr, code := runCLIWithin(t.Context(), "plan", "--env", "prod", "--id", "d1", "--nats-url", s.nats, "--wait", "2m",
			"--set", strings.Replace(parent, "@", "=", 1), "--set", strings.Replace(child, "@", "=", 1))
		planned <- result{out, stderr, code}
	}()

	// waitingFor is the one worker whose write waits for key.
	waitingFor := func(what, key string) waiter {
		t.Helper()
		var w waiter
		eventually(t, what, time.Minute, func() bool {
			// Nothing else is computed meanwhile: the parent's batches go
			// one at a time, and the child's wait for them.
			if all := lockWaiters(t, db, ""); len(all) > 1 {
				t.Fatalf("%s: %d writes wait at once: %+v", what, len(all), all)
			}
			ws := lockWaiters(t, db, key)
			if len(ws) == 1 {
				w = ws[0]
			}
			return len(ws) == 1
		})
		if workers[w.app] == nil {
			t.Fatalf("%s: the waiting write is not a worker's: %+v", what, w)
		}
		return w
	}
	// takenOver waits until a worker other than those of skip waits for a
	// lock: the batch, redelivered, is its now, and its write waits for
	// the first worker's, whose transaction holds the batch's range.
	takenOver := func(what string, skip ...waiter) waiter {
		t.Helper()
		var heir waiter
		eventually(t, what, time.Minute, func() bool {
			for _, w := range lockWaiters(t, db, "") {
				if workers[w.app] != nil && !slices.ContainsFunc(skip, func(s waiter) bool { return s.app == w.app }) {
					heir = w
					return true
				}
			}
			return false
		})
		return heir
	}
	// The test's own reads are bounded: a lock held in the way fails the
	// test rather than hang it.
	qctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(qctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	// The first batch: its worker killed after its INSERT.
	victim := waitingFor("a worker's write of the parent's first batch waits to commit", writersKey)
	if n := count(`SELECT count(*) FROM tidemark."` + parentTable + `"`); n != 0 {
		t.Fatalf("the uncommitted batch shows %d rows", n)
	}
	if n := count(`SELECT count(*) FROM tidemark_meta.intervals WHERE table_name = $1`, childTable); n != 0 {
		t.Fatalf("%d child batches written before the parent's first committed", n)
	}
	if err := workers[victim.app].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim.app].Wait()
	// Redelivered after the ack wait, the batch's write waits for the
	// killed worker's transaction, which ends once the lock is released.
	heir := takenOver("another worker takes the killed worker's batch", victim)
	t.Logf("killed %s in the parent's first batch; %s took it over", victim.app, heir.app)
	unlock(writersKey)

	// The second batch: its worker paused until another takes the batch
	// over, then resumed.
	paused := waitingFor("a worker's write of the parent's second batch waits for its range", secondKey)
	if err := workers[paused.app].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	second2 := takenOver("another worker takes the paused worker's batch", victim, paused)
	t.Logf("paused %s in the parent's second batch; %s took it over", paused.app, second2.app)
	unlock(secondKey)
	if err := workers[paused.app].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	var r result
	select {
	case r = <-planned:
	case <-time.After(3 * time.Minute):
		t.Fatal("plan --wait did not return")
	}
	if r.code != 0 || !strings.Contains(r.stderr, "plan d1: backfill complete") {
		t.Fatalf("plan --wait: exit %d %s %s", r.code, r.out, r.stderr)
	}
	// Both wrote the second batch (each logs the batch it committed).
	wrote := `"snapshot":"` + parent + `","range":"` + second.String() + `"`
	for _, w := range []waiter{paused, second2} {
		if !strings.Contains(logs[w.app].String(), wrote) {
			t.Errorf("%s did not write the second batch %s:\n%s", w.app, second, logs[w.app])
		}
	}

	// The stream: the plan's backfill set, and one completion per batch.
	recs := readEvents(t, s.nats)
	var backfill map[string][]interval.Range
	workID := ""
	for _, rec := range recs {
		if p, ok := rec.Event.Payload.(events.PlanBuilt); ok && p.Plan == "d1" {
			backfill = map[string][]interval.Range{}
			for _, c := range p.Candidates {
				backfill[c.Snapshot] = c.Backfill
			}
			workID = events.WorkID(rec.Seq, events.RunBackfill)
		}
	}
	if len(backfill[parent]) == 0 || len(backfill[child]) == 0 {
		t.Fatalf("plan d1's backfill: %v", backfill)
	}
	batches := map[string][]interval.Range{
		parent: interval.Batches(interval.Hour, 4, backfill[parent]),
		child:  interval.Batches(interval.Hour, 6, backfill[child]),
	}
	if batches[parent][0] != first || batches[parent][1] != second {
		t.Fatalf("the parent's batches %v do not start with %s, %s", batches[parent], first, second)
	}
	type completion struct {
		seq   uint64
		actor string
		rows  int64
	}
	done := map[string]map[string]completion{parent: {}, child: {}} // snapshot → batch → its completion
	for _, rec := range recs {
		c, ok := rec.Event.Payload.(events.IntervalsCompleted)
		if !ok || done[c.Snapshot] == nil {
			continue
		}
		if c.Work != workID || c.RunKind != events.RunBackfill || len(c.Ranges) != 1 {
			t.Fatalf("completion %d of %s: %+v, want one batch of work %s", rec.Seq, c.Snapshot, c, workID)
		}
		if prev, twice := done[c.Snapshot][c.Ranges[0].String()]; twice {
			t.Fatalf("%s %s completed twice: at %d by %s and at %d by %s", c.Snapshot, c.Ranges[0], prev.seq, prev.actor, rec.Seq, rec.Event.Actor)
		}
		done[c.Snapshot][c.Ranges[0].String()] = completion{rec.Seq, rec.Event.Actor, c.Rows}
	}
	hours := func(r interval.Range) int64 { return int64(r.End.Sub(r.Start) / time.Hour) }
	for snap, bs := range batches {
		if len(done[snap]) != len(bs) {
			t.Errorf("%s: %d completions, want one per batch (%d)", snap, len(done[snap]), len(bs))
		}
		perHour := int64(60)
		if snap == child {
			perHour = 1
		}
		for _, b := range bs {
			c, ok := done[snap][b.String()]
			if !ok {
				t.Errorf("%s: batch %s not completed", snap, b)
				continue
			}
			if c.rows != perHour*hours(b) {
				t.Errorf("%s: batch %s completed with %d rows, want %d", snap, b, c.rows, perHour*hours(b))
			}
			if snap != child {
				continue
			}
			for _, pb := range batches[parent] {
				if pb.Start.Before(b.End) && b.Start.Before(pb.End) && done[parent][pb.String()].seq > c.seq {
					t.Errorf("child batch %s completed (seq %d) before its parent's batch %s (seq %d)", b, c.seq, pb, done[parent][pb.String()].seq)
				}
			}
		}
	}
	if c := done[parent][first.String()]; c.actor != "worker:"+heir.app {
		t.Errorf("the killed worker's batch %s was completed by %q, want %s, which took it over", first, c.actor, heir.app)
	}

	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	all := interval.NewSet(backfill[parent]...)
	var n int64
	for _, r := range all {
		n += hours(r)
	}
	eventually(t, "prod's views are swapped onto the workers' tables", time.Minute, func() bool {
		var views int
		err := db.QueryRowContext(qctx, "SELECT count(*) FROM information_schema.views WHERE table_schema = 'prod'").Scan(&views)
		return err == nil && views == 2
	})
	// Every hour holds its rows exactly once.
	rows, err := db.QueryContext(qctx, "SELECT date_trunc('hour', ts) AS h, count(*) FROM prod.clicks GROUP BY 1 ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var perHour int64
	for rows.Next() {
		var h time.Time
		var c int64
		if err := rows.Scan(&h, &c); err != nil {
			t.Fatal(err)
		}
		if !all.Covers(interval.R(h.UTC(), h.UTC().Add(time.Hour))) || c != 60 {
			t.Errorf("prod.clicks: %d rows at %s, want 60 in each hour of %v", c, h, all)
		}
		perHour++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if perHour != n {
		t.Errorf("prod.clicks has %d hours, want %d", perHour, n)
	}
	// Each child row saw its batch's whole range of the parent.
	rows, err = db.QueryContext(qctx, "SELECT hour, views, seen, batch_start, batch_end FROM prod.hourly ORDER BY hour")
	if err != nil {
		t.Fatal(err)
	}
	var childRows int64
	for rows.Next() {
		var h, bs, be time.Time
		var views, seen int64
		if err := rows.Scan(&h, &views, &seen, &bs, &be); err != nil {
			t.Fatal(err)
		}
		b := interval.R(bs.UTC(), be.UTC())
		if views != 60 || seen != 60*hours(b) || h.Before(bs) || !h.Before(be) {
			t.Errorf("prod.hourly at %s: %d views, saw %d rows of clicks over its batch %s (want 60 and %d)", h, views, seen, b, 60*hours(b))
		}
		childRows++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if childRows != n {
		t.Errorf("prod.hourly has %d rows, want one an hour (%d)", childRows, n)
	}
	out, stderr, code = runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.clicks: ok (0 rows only in the view, 0 only in the recompute") || !strings.Contains(out, "prod.hourly: ok (0 rows only in the view, 0 only in the recompute") {
		t.Fatalf("verify: exit %d %s %s", code, out, stderr)
	}
}
