package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// One private Postgres server for this package's tests.
func TestMain(m *testing.M) { pgtest.Main(m) }

// startSQLWorker runs `tidemark worker --warehouse dsn` in-process (the
// CLI's code path) until stop is called or the test ends.
func startSQLWorker(t *testing.T, natsURL, dsn, name string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"worker", "--nats-url", natsURL, "--warehouse", dsn, "--name", name, "--concurrency", "2",
		"--heartbeat", "100ms", "--log-format", "json"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// sqlModels writes a model file of an hourly page_views (60 rows an hour)
// and its daily rollup, in SQL both DuckDB and Postgres run, and a model
// without SQL.
func sqlModels(t *testing.T, start time.Time) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "models.yaml")
	body := `models:
  - name: page_views
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
    time_column: ts
    sql: |
      SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id
      FROM generate_series(0, 59) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)
  - name: rollup
    cron: "@daily"
    start: ` + start.Format(time.RFC3339) + `
    depends_on: [page_views]
    time_column: day
    sql: |
      SELECT date_trunc('day', ts) AS day, user_id, count(*) AS views
      FROM page_views WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2
  - name: plain
    cron: "@hourly"
    start: ` + start.Format(time.RFC3339) + `
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// applyAndPlan registers the models and builds plan id for all of them
// in prod.
func applyAndPlan(t *testing.T, natsURL, models, id string) {
	t.Helper()
	out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", natsURL, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil || len(applied) != 3 {
		t.Fatalf("apply: exit %d %v %s %s", code, err, out, stderr)
	}
	args := []string{"plan", "--env", "prod", "--id", id, "--nats-url", natsURL}
	for _, a := range applied {
		args = append(args, "--set", strings.Replace(a.Snapshot, "@", "=", 1))
	}
	if out, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestWorkerNeedsExecOrWarehouse: exactly one of --exec and --warehouse,
// or a usage error (exit 2) before anything connects.
func TestWorkerNeedsExecOrWarehouse(t *testing.T) {
	for _, args := range [][]string{
		{"worker"},
		{"worker", "--exec", "true", "--warehouse", filepath.Join(t.TempDir(), "w.duckdb")},
	} {
		_, stderr, code := runCLI(t, append(args, "--nats-url", "nats://127.0.0.1:1")...)
		if code != 2 || !strings.Contains(stderr, "exactly one of --exec") {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

// TestSQLWorkersSharePostgres: serve without the built-in worker, with
// the workers' Postgres, publishes SQL work; two `tidemark worker
// --warehouse postgres://…` compute a plan's backfill and a scheduled
// tick's work into it; the promotion swaps the views (serve's Syncer);
// query and verify answer through serve with 0 differing rows. Both
// workers are live on the dashboard and in /metrics, and a stopped one
// leaves both.
func TestSQLWorkersSharePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := startServe(t, "--warehouse", dsn)
	stopW1 := startSQLWorker(t, s.nats, dsn, "w1")
	startSQLWorker(t, s.nats, dsn, "w2")
	eventually(t, "both workers live on /metrics", time.Minute, func() bool {
		m := get(t, s.http+"/metrics")
		return strings.Contains(m, "tidemark_workers_live 2\n") &&
			strings.Contains(m, `tidemark_worker_last_seen_seconds{kind="sql",user="",worker="w1"}`) &&
			strings.Contains(m, `tidemark_worker_last_seen_seconds{kind="sql",user="",worker="w2"}`)
	})

	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour)
	applyAndPlan(t, s.nats, sqlModels(t, start), "d1")
	backfilled(t, s.nats, "worker:w")
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	hours := int(time.Now().UTC().Truncate(time.Hour).Sub(start) / time.Hour)
	count := func() string {
		out, _, _ := runCLI(t, "query", "SELECT count(*) AS n FROM prod.page_views", "--nats-url", s.nats, "-o", "csv")
		return out
	}
	want := "n\n" + strconv.Itoa(60*hours) + "\n"
	eventually(t, "prod's views read the tables the workers wrote", time.Minute, func() bool { return count() == want })
	out, stderr, code := runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.page_views: ok (0 rows only in the view, 0 only in the recompute") || !strings.Contains(out, "prod.rollup: ok (0 rows") {
		t.Fatalf("verify after the backfill: exit %d %s %s", code, out, stderr)
	}

	// A scheduled tick's work: the last hour's rows taken out of the
	// snapshot table (and its interval invalidated), the tick's advance
	// computes it again.
	wh, err := warehouse.Open(t.Context(), dsn, warehouse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	last := interval.R(time.Now().UTC().Truncate(time.Hour).Add(-time.Hour), time.Now().UTC().Truncate(time.Hour))
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewClient(nc)
	ctx := t.Context()
	var table string
	if r, err := c.Do(ctx, &commands.InvalidateIntervals{Model: "page_views", Version: snapshotVersion(t, c, "page_views"), Ranges: []interval.Range{last}, Reason: "test"}); err != nil || !r.Accepted {
		t.Fatalf("invalidate: %+v %v", r, err)
	}
	table = sqlrun.TableName("page_views@" + snapshotVersion(t, c, "page_views"))
	if _, err := wh.DB().ExecContext(ctx, `DELETE FROM tidemark."`+table+`" WHERE ts >= $1 AND ts < $2`, last.Start, last.End); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != "n\n"+strconv.Itoa(60*hours-60)+"\n" {
		t.Fatalf("after the delete: %q", got)
	}
	r, err := c.Do(ctx, &commands.Status{Env: "prod"})
	if err != nil || !r.Accepted {
		t.Fatalf("status: %+v %v", r, err)
	}
	if r, err := c.Do(ctx, &commands.AdvanceScheduler{Env: "prod", Generation: r.Envs[0].Generation}); err != nil || !r.Accepted || len(r.Advances) == 0 {
		t.Fatalf("advance: %+v %v", r, err)
	}
	eventually(t, "the tick's work is computed by a worker", time.Minute, func() bool { return count() == want })
	eventually(t, "the tick's completion is recorded", time.Minute, func() bool {
		out, _, code := runCLI(t, "audit", "--nats-url", s.nats, "--model", "page_views")
		return code == 0 && strings.Contains(out, "(scheduled)")
	})
	out, stderr, code = runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.page_views: ok (0 rows") || !strings.Contains(out, "prod.rollup: ok (0 rows") {
		t.Fatalf("verify after the tick: exit %d %s %s", code, out, stderr)
	}

	// A new page_views version (30 rows an hour): its plan's backfill, and
	// its derived rollup's, computed by the workers from the published
	// SQL; the promotion swaps both views; verify is clean.
	v2 := filepath.Join(t.TempDir(), "v2.yaml")
	body, err := os.ReadFile(sqlModels(t, start))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v2, []byte(strings.Replace(string(body), "generate_series(0, 59)", "generate_series(0, 29)", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = runCLI(t, "apply", "-f", v2, "--nats-url", s.nats, "-o", "json")
	var applied []struct {
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(out), &applied); code != 0 || err != nil {
		t.Fatalf("apply v2: exit %d %v %s %s", code, err, out, stderr)
	}
	pv2 := ""
	for _, a := range applied {
		if strings.HasPrefix(a.Snapshot, "page_views@") && a.Snapshot != "page_views@"+snapshotVersion(t, c, "page_views") {
			pv2 = a.Snapshot
		}
	}
	if pv2 == "" {
		t.Fatalf("apply v2 registered no new page_views: %s", out)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--id", "d2", "--set", strings.Replace(pv2, "@", "=", 1), "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan d2: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "d2's backfill is computed", time.Minute, func() bool {
		pvOut, _, c1 := runCLI(t, "audit", "--nats-url", s.nats, "--model", "page_views")
		rollOut, _, c2 := runCLI(t, "audit", "--nats-url", s.nats, "--model", "rollup")
		return c1 == 0 && c2 == 0 && strings.Contains(pvOut, pv2+" completed") && strings.Contains(rollOut, "+d2 completed")
	})
	if out, stderr, code := runCLI(t, "promote", "d2", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "ACCEPTED") {
		t.Fatalf("promote d2: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "prod's views read d2's tables", time.Minute, func() bool { return count() == "n\n"+strconv.Itoa(30*hours)+"\n" })
	out, stderr, code = runCLI(t, "verify", "--env", "prod", "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "prod.page_views: ok (0 rows") || !strings.Contains(out, "prod.rollup: ok (0 rows") {
		t.Fatalf("verify after d2: exit %d %s %s", code, out, stderr)
	}

	// The dashboard's Workers panel, then w1 stops: it leaves the panel
	// and the metrics, w2 stays.
	eventually(t, "the panel shows both workers", time.Minute, func() bool {
		page := get(t, s.http+"/")
		return strings.Contains(page, `data-worker="w1"`) && strings.Contains(page, `data-worker="w2"`)
	})
	stopW1()
	eventually(t, "w1 leaves the metrics and the panel", time.Minute, func() bool {
		m, page := get(t, s.http+"/metrics"), get(t, s.http+"/")
		return strings.Contains(m, "tidemark_workers_live 1\n") && !strings.Contains(m, `worker="w1"`) &&
			!strings.Contains(page, `data-worker="w1"`) && strings.Contains(page, `data-worker="w2"`)
	})
}

// snapshotVersion is prod's incumbent version of model.
func snapshotVersion(t *testing.T, c *transport.Client, model string) string {
	t.Helper()
	r, err := c.Do(t.Context(), &commands.Status{Env: "prod"})
	if err != nil || !r.Accepted || len(r.Envs) != 1 {
		t.Fatalf("status: %+v %v", r, err)
	}
	for _, m := range r.Envs[0].Models {
		if m.Model == model {
			_, v, _ := strings.Cut(m.Snapshot, "@")
			return v
		}
	}
	t.Fatalf("prod has no %s", model)
	return ""
}

// backfilled waits until every model's backfill is recorded by a worker
// whose actor starts with actor.
func backfilled(t *testing.T, natsURL, actor string) {
	t.Helper()
	for _, model := range []string{"page_views", "rollup", "plain"} {
		eventually(t, model+"'s backfill is recorded by "+actor, time.Minute, func() bool {
			out, _, code := runCLI(t, "audit", "--nats-url", natsURL, "--model", model)
			return code == 0 && strings.Contains(out, actor) && strings.Contains(out, "(backfill)")
		})
	}
}

// TestWorkerProcessHelper runs the CLI with $TIDEMARK_HELPER_ARGS
// (one argument a line) as a process of its own, exiting with its exit status.
func TestWorkerProcessHelper(t *testing.T) {
	args := os.Getenv("TIDEMARK_HELPER_ARGS")
	if args == "" {
		t.Skip("a helper process for the layout tests")
	}
	root := newRootCmd()
	root.SetArgs(strings.Split(args, "\n"))
	err := root.ExecuteContext(context.Background())
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
	}
	os.Exit(exitCode(err))
}

// TestBuiltinWorkerIsLive: serve's built-in worker is on the roster too
// (kind builtin).
func TestBuiltinWorkerIsLive(t *testing.T) {
	s := startServe(t, "--builtin-worker", "--warehouse", "none")
	eventually(t, "the built-in worker is live on /metrics and the dashboard", time.Minute, func() bool {
		m := get(t, s.http+"/metrics")
		return strings.Contains(m, "tidemark_workers_live 1\n") && strings.Contains(m, `tidemark_worker_last_seen_seconds{kind="builtin",user="",worker="builtin-`) &&
			strings.Contains(get(t, s.http+"/"), `<td>builtin</td>`)
	})
}

// TestSilentWorkerLeaves: a worker that dies without saying so (its
// connection gone, no last heartbeat) leaves the metrics and the panel
// once it has missed 3 heartbeats.
func TestSilentWorkerLeaves(t *testing.T) {
	s := startServe(t)
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go work.Beat(ctx, nc, "doomed", work.KindExec, 100*time.Millisecond, &work.Stats{})
	eventually(t, "the worker is live", time.Minute, func() bool {
		return strings.Contains(get(t, s.http+"/metrics"), `tidemark_worker_last_seen_seconds{kind="exec",user="",worker="doomed"}`) &&
			strings.Contains(get(t, s.http+"/"), `data-worker="doomed"`)
	})
	nc.Close() // a crash: the last heartbeat never leaves
	eventually(t, "the silent worker leaves", time.Minute, func() bool {
		m := get(t, s.http+"/metrics")
		return strings.Contains(m, "tidemark_workers_live 0\n") && !strings.Contains(m, `worker="doomed"`) &&
			!strings.Contains(get(t, s.http+"/"), `data-worker="doomed"`)
	})
}
