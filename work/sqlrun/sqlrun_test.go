package sqlrun_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// Page views generated per hour: perHour rows, user ids 0..4.
func pageViews(perHour int) string {
	return `SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range % 5 AS BIGINT) AS user_id
FROM range(0, ` + itoa(perHour) + `) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)`
}

const rollup = `SELECT date_trunc('day', ts) AS day, user_id, count(*) AS views
FROM page_views WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

type world struct {
	t   *testing.T
	e   *engine.Engine
	wh  *warehouse.Warehouse
	run *sqlrun.Runner
	now time.Time

	clock atomic.Int64 // the engine's clock (unix ns): w.now, for commands that carry no time
}

// newWorld is a world on a DuckDB file.
func newWorld(t *testing.T) *world {
	t.Helper()
	return openWorld(t, filepath.Join(t.TempDir(), "warehouse.duckdb"))
}

// openWorld is an engine on a simulated clock (w.now, moved by w.at) and
// the warehouse at dsn, with a Syncer keeping prod's views on its
// incumbents.
func openWorld(t *testing.T, dsn string) *world {
	t.Helper()
	w := &world{t: t}
	w.at(t0.Add(48 * time.Hour))
	e := jstest.Engine(t, engine.Config{TrustCommandTime: true, Clock: func() time.Time { return time.Unix(0, w.clock.Load()).UTC() }})
	wh, err := warehouse.Open(t.Context(), dsn, warehouse.Options{})
	if err != nil {
		if err == warehouse.ErrNoCgo {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	w.e, w.wh = e, wh
	w.run = &sqlrun.Runner{WH: wh, Proj: e.Projection(), Done: &inproc.Worker{Handler: e, Actor: "test"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = (&sqlrun.Syncer{WH: wh, Proj: e.Projection()}).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// at moves the simulated clock.
func (w *world) at(t time.Time) {
	w.now = t
	w.clock.Store(t.UnixNano())
}

func (w *world) do(cmd commands.Command) commands.Reply {
	w.t.Helper()
	cmd.Header().ID, cmd.Header().At = commands.NewID(), w.now
	r := w.e.Handle(w.t.Context(), cmd)
	if err := r.Err(); err != nil {
		w.t.Fatalf("%s: %v", cmd.Kind(), err)
	}
	return r
}

func (w *world) register(model, version, cron, sql, timeColumn string, deps ...string) {
	w.do(&commands.RegisterSnapshot{Model: model, Version: version, Cron: cron, Start: t0, SQL: sql, TimeColumn: timeColumn, DependsOn: deps})
}

// deploy builds plan, computes its backfill in the warehouse and promotes it.
func (w *world) deploy(plan string, versions map[string]string) {
	w.t.Helper()
	r := w.do(&commands.BuildPlan{Plan: plan, Env: "prod", Versions: versions})
	if err := w.run.Run(w.t.Context(), work.Backfill(*r.Plan), w.now); err != nil {
		w.t.Fatal(err)
	}
	if d := w.do(&commands.Promote{Plan: plan}).Decision; d == nil || d.Outcome != events.Accepted {
		w.t.Fatalf("promote %s: %+v", plan, d)
	}
}

// count waits (bounded) until the Syncer has swapped prod.<view> onto a
// table with want rows.
func (w *world) count(view string, want int64) {
	w.t.Helper()
	w.countAt("prod."+view, want)
}

// countAt waits (bounded) until the relation rel (schema.view) has want
// rows.
func (w *world) countAt(rel string, want int64) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got any
	for time.Now().Before(deadline) {
		_, rows, err := w.wh.Query(w.t.Context(), "SELECT count(*) FROM "+rel)
		if err == nil && len(rows) == 1 {
			got = rows[0][0]
			if n, ok := got.(int64); ok && n == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // the Syncer swaps after the projection applies the decision
	}
	w.t.Fatalf("%s: %v rows, want %d", rel, got, want)
}

func (w *world) verify() {
	w.t.Helper()
	var diffs map[string]warehouse.Diff
	var err error
	diffs, err = sqlrun.VerifyEnv(w.t.Context(), w.wh, w.e.Projection(), "prod", "")
	if err != nil {
		w.t.Fatal(err)
	}
	if len(diffs) == 0 {
		w.t.Fatal("nothing verified")
	}
	for model, d := range diffs {
		if !d.Empty() {
			w.t.Fatalf("%s: %d rows only in the view, %d only in the recompute: %+v", model, d.OnlyInView, d.OnlyInRecompute, d.Samples)
		}
	}
}

// SQL models computed interval by interval into their snapshot tables,
// promoted by a view swap, verified row by row; a new upstream version
// gives the downstream a derived version reading the new upstream table.
func TestComputePromoteVerify(t *testing.T) {
	w := newWorld(t)
	w.register("page_views", "v1", "@hourly", pageViews(60), "ts")
	w.register("rollup", "v1", "@daily", rollup, "day", "page_views")
	w.deploy("p1", map[string]string{"page_views": "v1", "rollup": "v1"})
	w.count("page_views", 48*60)
	w.count("rollup", 2*5)
	w.verify()
	_, rows, err := w.wh.Query(t.Context(), "SELECT sum(views) FROM prod.rollup")
	if err != nil || len(rows) != 1 {
		t.Fatal(rows, err)
	}
	if fmt.Sprint(rows[0][0]) != itoa(48*60) {
		t.Fatalf("sum of the rollup: %v", rows[0][0])
	}

	// v2 of the source: 30 rows an hour. The plan derives rollup's
	// version, which reads page_views@v2's table, not prod's view.
	w.register("page_views", "v2", "@hourly", pageViews(30), "ts")
	w.deploy("p2", map[string]string{"page_views": "v2"})
	w.count("page_views", 48*30)
	w.count("rollup", 2*5)
	_, rows, err = w.wh.Query(t.Context(), "SELECT sum(views) FROM prod.rollup")
	if err != nil || fmt.Sprint(rows[0][0]) != itoa(48*30) {
		t.Fatalf("sum of the rollup after p2: %v %v", rows, err)
	}
	w.verify()

	// Computing an item again rewrites the same rows.
	var plan events.PlanBuilt
	w.e.Projection().Read(func(st *projections.State) { plan = st.Plans["p2"].Built })
	if err := w.run.Run(t.Context(), work.Backfill(plan), w.now); err != nil {
		t.Fatal(err)
	}
	w.count("page_views", 48*30)
	w.verify()
}

// SyncOnce swaps the views synchronously: right after it returns, prod's
// views read the promoted tables; applying them again changes nothing.
func TestSyncOnce(t *testing.T) {
	e := jstest.Engine(t, engine.Config{TrustCommandTime: true})
	wh := tempDuckDB(t)
	w := &world{t: t, e: e, wh: wh, now: t0.Add(24 * time.Hour)}
	w.run = &sqlrun.Runner{WH: wh, Proj: e.Projection(), Done: &inproc.Worker{Handler: e, Actor: "test"}}
	w.register("page_views", "v1", "@hourly", pageViews(60), "ts")
	w.deploy("p1", map[string]string{"page_views": "v1"})
	w.register("page_views", "v2", "@hourly", pageViews(30), "ts")
	w.deploy("p2", map[string]string{"page_views": "v2"})
	for i := 0; i < 2; i++ {
		if err := sqlrun.SyncOnce(t.Context(), wh, e.Projection()); err != nil {
			t.Fatal(err)
		}
		_, rows, err := wh.Query(t.Context(), "SELECT count(*) FROM prod.page_views")
		if err != nil || fmt.Sprint(rows) != "[[720]]" {
			t.Fatalf("after SyncOnce %d: %v %v", i, rows, err)
		}
	}
	w.verify()
}

// tempDuckDB opens a DuckDB warehouse in a file of the test's own, closed
// when the test ends; a build without cgo skips the test.
func tempDuckDB(t *testing.T) *warehouse.Warehouse {
	t.Helper()
	wh, err := warehouse.Open(t.Context(), filepath.Join(t.TempDir(), "w.duckdb"), warehouse.Options{})
	if errors.Is(err, warehouse.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh
}
