package sqlrun_test

// The data plane under the promotion paths of DESIGN.md: the engine on a
// simulated clock, plans, scheduler ticks (scheduler.Scheduler.Tick, which records
// decide.Due's advances), promotions with policy bounds, every work item
// computed in the warehouse by sqlrun.Runner, the Syncer's view swaps,
// and VerifyEnv requiring 0 differing rows. Each test runs on DuckDB and
// on a private Postgres (internal/pgtest). Columns are integers and
// decimals, never floats (float sums vary with thread count).

import (
	"fmt"
	"github.com/tidemark/tidemark/warehouse"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// One private Postgres server for this package's tests.
func TestMain(m *testing.M) { pgtest.Main(m) }

// eachBackend runs fn on a world over a DuckDB file and over a fresh
// Postgres database.
func eachBackend(t *testing.T, fn func(t *testing.T, w *world)) {
	for _, b := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"duckdb", func(t *testing.T) string { return filepath.Join(t.TempDir(), "warehouse.duckdb") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { fn(t, openWorld(t, b.dsn(t))) })
	}
}

// pv generates perHour page views an hour, on both engines
// (generate_series is a table function in DuckDB and Postgres): integer
// user ids, DECIMAL amounts.
func pv(perHour int) string {
	return fmt.Sprintf(`SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts,
  CAST(g.i %% 5 AS BIGINT) AS user_id,
  CAST(g.i %% 7 AS DECIMAL(12,2)) + 0.25 AS amount
FROM generate_series(0, %d) AS g(i), generate_series(@start_ts, @end_ts - INTERVAL '1 hour', INTERVAL '1 hour') AS h(h)`, perHour-1)
}

// agg is an hourly rollup of pv (or of upstream, when given).
func aggOf(upstream string) string {
	return `SELECT date_trunc('hour', ts) AS hour, user_id, count(*) AS views, sum(amount) AS amount
FROM ` + upstream + ` WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`
}

func hour(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

func (w *world) registerAt(c *commands.RegisterSnapshot) {
	w.t.Helper()
	if c.Start.IsZero() {
		c.Start = t0
	}
	w.do(c)
}

// items is the work the command answered by r made due, as a serving
// process's work publisher derives it: the command's records read back
// from the stream, through work.Of (so every item has its id, and the
// worker's report is checked against it).
func (w *world) items(r commands.Reply) []work.Item {
	w.t.Helper()
	var recs []events.Record
	for seq := r.Seq - uint64(r.Events) + 1; r.Events > 0 && seq <= r.Seq; seq++ {
		rec, err := w.e.Log().Reader().Get(w.t.Context(), seq)
		if err != nil {
			w.t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return work.Of(recs)
}

// compute runs every item r made due with the sqlrun.Runner, and returns
// them.
func (w *world) compute(r commands.Reply) []work.Item {
	w.t.Helper()
	items := w.items(r)
	for _, it := range items {
		if err := w.run.Run(w.t.Context(), it, w.now); err != nil {
			w.t.Fatalf("%s: %v", it.ID, err)
		}
	}
	return items
}

// tick runs the scheduler's tick at t (the AdvanceScheduler that
// scheduler.Scheduler.Tick sends, at the env's generation: decide.Due's advances)
// and computes the work it made due.
func (w *world) tick(t time.Time) []events.SchedulerAdvanced {
	w.t.Helper()
	w.at(t)
	var gen uint64
	w.e.Projection().Read(func(st *projections.State) { gen = st.Env("prod").Generation })
	r := w.e.Handle(w.t.Context(), &commands.AdvanceScheduler{Meta: commands.Meta{ID: scheduler.TickID("prod", t), Actor: "scheduler", At: t}, Env: "prod", Generation: gen})
	if err := r.Err(); err != nil {
		w.t.Fatal(err)
	}
	items := w.compute(r)
	if len(r.Advances) > 0 && (len(items) != 1 || items[0].RunKind != events.RunScheduled) {
		w.t.Fatalf("the work of the tick at %s: %+v", t, items)
	}
	return r.Advances
}

// plan builds a plan and computes its backfill.
func (w *world) plan(c *commands.BuildPlan) events.PlanBuilt {
	w.t.Helper()
	c.Env = "prod"
	r := w.do(c)
	w.compute(r)
	return *r.Plan
}

// synced waits (bounded) until the Syncer has put every prod view on its
// incumbent's table.
func (w *world) synced() {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var want map[string]string
		w.e.Projection().Read(func(st *projections.State) {
			views, _ := sqlrun.Views(st)
			want = map[string]string{}
			for model, m := range views["prod"] {
				want[model] = m.Table
			}
		})
		missing := ""
		for model, table := range want {
			readers, err := w.wh.ViewsReading(w.t.Context(), table)
			schema, view := warehouse.ViewOf("prod", model)
			if err != nil || !slices.Contains(readers, schema+"."+view) {
				missing = fmt.Sprintf("%s.%s does not read %s yet (%v, %v)", schema, view, table, readers, err)
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatal(missing)
		}
		time.Sleep(10 * time.Millisecond) // the Syncer swaps after the projection applies the event
	}
}

// clean syncs the views, then requires VerifyEnv to find no difference.
func (w *world) clean() {
	w.t.Helper()
	w.synced()
	w.verify()
}

// scalar runs a one-value query.
func (w *world) scalar(q string) string {
	w.t.Helper()
	_, rows, err := w.wh.Query(w.t.Context(), q)
	if err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		w.t.Fatalf("%s: %v %v", q, rows, err)
	}
	return fmt.Sprint(rows[0][0])
}

// grantSandbox lets the warehouse's sandbox read a schema tidemark does
// not own (on Postgres it reads only what it is granted), as an operator
// grants a source schema.
func (w *world) grantSandbox(schema string) {
	w.t.Helper()
	if w.wh.Engine() == "postgres" {
		w.exec("GRANT USAGE ON SCHEMA " + schema + " TO " + warehouse.SandboxRole)
		w.exec("GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + warehouse.SandboxRole)
	}
}

func (w *world) exec(q string) {
	w.t.Helper()
	if _, err := w.wh.DB().ExecContext(w.t.Context(), q); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
}

func (w *world) openRepairs() int {
	n := 0
	w.e.Projection().Read(func(st *projections.State) { n = len(st.OpenRepairs()) })
	return n
}

func candidate(p events.PlanBuilt, model string) string {
	for _, c := range p.Candidates {
		if c.Model == model {
			return c.Snapshot
		}
	}
	return ""
}

// pvAndAgg deploys pv@v1 (60 rows an hour) and agg@v1 over 48 hours.
func pvAndAgg(w *world) {
	w.t.Helper()
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
	w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}})
	w.deploy("p1", map[string]string{"pv": "v1", "agg": "v1"})
	w.clean()
	if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "2880" {
		w.t.Fatalf("prod.pv after p1: %s rows", got)
	}
}

// (a) A trailing gap accepted under max_trailing_gap_advances, then the
// repair work the decision issued: the new versions' tables are filled
// and verified, the debt closed.
func TestVerifyAfterTrailingGapRepair(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		pvAndAgg(w)
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
		w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"pv": "v2"}, Bounds: commands.Bounds{MaxTrailingGapAdvances: 1}})
		// The incumbents advance while the plan waits: a one-advance suffix.
		if advs := w.tick(hour(49)); len(advs) != 2 {
			t.Fatalf("tick at 49h: %+v", advs)
		}
		w.at(hour(49).Add(5 * time.Minute))
		r := w.do(&commands.Promote{Plan: "p2"})
		d := r.Decision
		if d == nil || d.Outcome != events.Accepted || !slices.Contains(d.Codes, "trailing_gap_accepted") || len(d.Repairs) != 2 {
			t.Fatalf("promote p2: %+v", d)
		}
		if w.openRepairs() != 2 {
			t.Fatalf("open repairs after the acceptance: %d", w.openRepairs())
		}
		w.clean() // the covered part already verifies
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "1440" {
			t.Fatalf("prod.pv before the repair: %s rows", got)
		}
		// The repair work the decision issued, read from the stream.
		repairs := w.items(r)
		if len(repairs) != 1 || repairs[0].RunKind != events.RunRepair || len(repairs[0].Steps) != 2 || repairs[0].Steps[0].Model != "pv" {
			t.Fatalf("the repair work: %+v", repairs)
		}
		if err := w.run.Run(t.Context(), repairs[0], w.now); err != nil {
			t.Fatal(err)
		}
		if n := w.openRepairs(); n != 0 {
			t.Fatalf("open repairs after the repair: %d", n)
		}
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "1470" {
			t.Fatalf("prod.pv after the repair: %s rows, want 49*30", got)
		}
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "1470" {
			t.Fatalf("sum of prod.agg views after the repair: %s, want 49*30", got)
		}
		// The next tick runs the new incumbents.
		w.tick(hour(50))
		w.clean()
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "1500" {
			t.Fatalf("sum of prod.agg views at 50h: %s", got)
		}
	})
}

// (b) Bounded catch-up: the derived downstream candidate already computed
// the suffix hour (from the new upstream's table, which lacked it), so the
// catch-up invalidates it, computes the upstream's suffix, recomputes the
// downstream, and the strict retry passes.
func TestVerifyAfterCatchUpRecompute(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		pvAndAgg(w)
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
		p := w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"pv": "v2"}, Bounds: commands.Bounds{MaxCatchUpAdvances: 1}})
		w.tick(hour(49))
		w.at(hour(49).Add(5 * time.Minute))
		// The derived rollup computes the suffix hour early: pv@v2's table
		// has no rows there yet, so these rows are wrong.
		aggCand := candidate(p, "agg")
		early := work.Item{RunKind: events.RunManual, Env: "prod", Steps: []work.Step{{Model: "agg", Snapshot: aggCand, Ranges: []interval.Range{interval.R(hour(48), hour(49))}, RunID: "early"}}}
		if err := w.run.Run(t.Context(), early, w.now); err != nil {
			t.Fatal(err)
		}
		r := w.do(&commands.Promote{Plan: "p2"})
		if r.CatchUp == nil || r.Decision != nil {
			t.Fatalf("promote p2: want a catch-up request, got %+v", r)
		}
		var rec []interval.Range
		for _, wk := range r.CatchUp.Work {
			if wk.Model == "agg" {
				rec = wk.Recompute
			}
		}
		if !interval.NewSet(rec...).Equal(interval.NewSet(interval.R(hour(48), hour(49)))) {
			t.Fatalf("catch-up recomputes agg over %v, want [48h, 49h): %+v", rec, r.CatchUp.Work)
		}
		// The catch-up work (run kind catch_up) read from the stream and
		// computed, as serve's publisher has it done; then the catch-up
		// driver records the strict retry.
		if items := w.compute(r); len(items) != 1 || items[0].RunKind != events.RunCatchUp {
			t.Fatalf("the catch-up work: %+v", items)
		}
		if err := (&scheduler.CatchUps{Handler: w.e, Proj: w.e.Projection(), Clock: w.e.Now, Logger: jstest.Quiet()}).Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		var d *events.PromotionDecided
		w.e.Projection().Read(func(st *projections.State) { d = st.Plans["p2"].Decision })
		if d == nil || d.Outcome != events.Accepted || !slices.Contains(d.Codes, "caught_up") {
			t.Fatalf("the retry: %+v", d)
		}
		w.clean()
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "1470" {
			t.Fatalf("sum of prod.agg views after catch-up: %s, want 49*30", got)
		}
		if got := w.scalar("SELECT count(*) FROM prod.agg WHERE hour = TIMESTAMP '2026-11-03 00:00:00'"); got != "5" {
			t.Fatalf("prod.agg rows of the recomputed hour: %s, want 5", got)
		}
		w.tick(hour(50))
		w.clean()
	})
}

// (c) A forward-only version writes its incumbent's table: the view keeps
// reading that table, its history stays, new intervals are computed by
// the new version.
func TestVerifyAfterForwardOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		pvAndAgg(w)
		var before string
		w.e.Projection().Read(func(st *projections.State) {
			before = sqlrun.TableName(st.Snapshots[st.Envs["prod"].Incumbents["agg"]].Table)
		})
		// Rewritten logic with the same results on the same input
		// (count(user_id) of non-null ids), so the history it keeps still
		// verifies under the new SQL.
		v2 := `SELECT date_trunc('hour', ts) AS hour, user_id, count(user_id) AS views, sum(amount) AS amount
FROM pv WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v2", Cron: "@hourly", SQL: v2, TimeColumn: "hour", DependsOn: []string{"pv"}, SnapshotKind: events.ForwardOnly})
		p := w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"agg": "v2"}})
		if len(work.Backfill(p).Steps) != 0 {
			t.Fatalf("a forward-only version has no backfill: %+v", work.Backfill(p))
		}
		if d := w.do(&commands.Promote{Plan: "p2"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote p2: %+v", d)
		}
		w.synced()
		var after string
		w.e.Projection().Read(func(st *projections.State) {
			id := st.Envs["prod"].Incumbents["agg"]
			if id != "agg@v2" {
				t.Errorf("prod's agg is %s, want agg@v2", id)
			}
			after = sqlrun.TableName(st.Snapshots[id].Table)
		})
		if after != before {
			t.Fatalf("the forward-only version writes %s, its incumbent wrote %s", after, before)
		}
		readers, err := w.wh.ViewsReading(t.Context(), after)
		if err != nil || !slices.Contains(readers, "prod.agg") {
			t.Fatalf("prod.agg reads %v (%v), want %s", readers, err, after)
		}
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "2880" {
			t.Fatalf("the history of prod.agg: %s views, want 48*60 kept", got)
		}
		w.verify()
		w.tick(hour(49))
		w.clean()
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "2940" {
			t.Fatalf("prod.agg after the tick: %s views, want 49*60", got)
		}
	})
}

// (d) Late data within the lookback: rows arrive in the raw source for an
// hour both models already computed; the next tick recomputes each
// model's lookback window (upstream first), and verify is clean again.
func TestVerifyAfterLateDataInLookback(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.exec("CREATE SCHEMA raw")
		w.exec("CREATE TABLE raw.events (ts TIMESTAMP, user_id BIGINT, amount DECIMAL(12,2))")
		w.grantSandbox("raw")
		// One event every 7 minutes over the first 48 hours.
		w.exec(`INSERT INTO raw.events SELECT TIMESTAMP '2026-11-01 00:00:00' + CAST(g.i AS INTEGER) * INTERVAL '7 minutes',
  CAST(g.i % 13 AS BIGINT), CAST(g.i % 100 AS DECIMAL(12,2)) + 0.5 FROM generate_series(0, 411) AS g(i)`)
		w.registerAt(&commands.RegisterSnapshot{Model: "ev", Version: "v1", Cron: "@hourly", Lookback: 2,
			SQL: "SELECT ts, user_id, amount FROM raw.events WHERE ts >= @start_ts AND ts < @end_ts", TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", Lookback: 2,
			SQL: aggOf("ev"), TimeColumn: "hour", DependsOn: []string{"ev"}})
		w.deploy("p1", map[string]string{"ev": "v1", "agg": "v1"})
		w.clean()
		base := w.scalar("SELECT sum(views) FROM prod.agg")
		if base != "412" {
			t.Fatalf("prod.agg views after p1: %s, want 412", base)
		}

		// Late rows for 47:00-48:00 (computed already) and on-time rows for
		// 48:00-49:00.
		w.exec(`INSERT INTO raw.events VALUES (TIMESTAMP '2026-11-02 23:30:00', 100, 7.25), (TIMESTAMP '2026-11-02 23:31:00', 101, 1.50),
  (TIMESTAMP '2026-11-03 00:10:00', 100, 2.00)`)
		// Verify sees the late rows: ev's table no longer matches its source.
		diffs, err := sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "ev")
		if err != nil || diffs["ev"].OnlyInRecompute != 2 {
			t.Fatalf("verify before the tick: %+v %v, want the 2 late rows only in the recompute", diffs, err)
		}

		advs := w.tick(hour(49))
		for _, a := range advs {
			if !interval.Set(a.Ranges).Equal(interval.NewSet(interval.R(hour(46), hour(49)))) {
				t.Fatalf("%s's work at 49h: %v, want lookback 46h-48h and the new 48h-49h", a.Model, a.Ranges)
			}
		}
		if len(advs) != 2 || advs[0].Model != "ev" {
			t.Fatalf("advances at 49h (upstream first): %+v", advs)
		}
		w.clean()
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "415" {
			t.Fatalf("prod.agg views after the tick: %s, want 412 + 3", got)
		}
		if got := w.scalar("SELECT sum(amount) FROM prod.agg WHERE hour = TIMESTAMP '2026-11-02 23:00:00'"); got != w.scalar("SELECT sum(amount) FROM raw.events WHERE ts >= TIMESTAMP '2026-11-02 23:00:00' AND ts < TIMESTAMP '2026-11-03 00:00:00'") {
			t.Fatalf("prod.agg's late hour: %s", got)
		}

		// Data later than the lookback stays out until something recomputes
		// its hour, and verify reports it: the tick recomputed only its
		// window.
		w.exec("INSERT INTO raw.events VALUES (TIMESTAMP '2026-11-01 10:30:00', 100, 1.00)")
		w.tick(hour(50))
		w.synced()
		diffs, err = sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "")
		if err != nil || diffs["ev"].OnlyInRecompute != 1 || diffs["ev"].OnlyInView != 0 || !diffs["agg"].Empty() {
			t.Fatalf("verify after data later than the lookback: %+v %v, want ev's 1 row only in the recompute", diffs, err)
		}
	})
}

// (c') A forward-only version whose logic changes its results: the history
// its incumbent wrote stays in the shared table by design, and only the
// intervals computed after the promotion carry the new logic. Verify holds
// each interval to the query that wrote it (the writer recorded with the
// rows), so the kept history verifies against v1's query and the new hour
// against v2's; a tampered row of the history is still found, and
// intervals with no writer record fall back to the incumbent's query.
func TestVerifyAfterForwardOnlyLogicChange(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		pvAndAgg(w)
		v2 := `SELECT date_trunc('hour', ts) AS hour, user_id, 2 * count(*) AS views, sum(amount) AS amount
FROM pv WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v2", Cron: "@hourly", SQL: v2, TimeColumn: "hour", DependsOn: []string{"pv"}, SnapshotKind: events.ForwardOnly})
		w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"agg": "v2"}})
		if d := w.do(&commands.Promote{Plan: "p2"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote p2: %+v", d)
		}
		w.tick(hour(49))
		w.synced()
		if got := w.scalar("SELECT sum(views) FROM prod.agg"); got != "3000" {
			t.Fatalf("prod.agg: %s views, want 48*60 kept + 2*60 new", got)
		}
		w.verify()
		diffs, err := sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "agg")
		if err != nil {
			t.Fatal(err)
		}
		if d := diffs["agg"]; d.Writers["agg@v1"] != 1 || d.Writers["agg@v2"] != 1 || len(d.Writers) != 2 || d.Unrecorded != 0 {
			t.Fatalf("agg's writers: %v, unrecorded %d; want agg@v1's 48-hour backfill (one batch), 1 hour by agg@v2", d.Writers, d.Unrecorded)
		}

		// The dashboard's last written interval: the hour agg@v2 computed.
		if end, at, ok := sqlrun.LastWritten(t.Context(), w.wh, w.e.Projection(), "agg@v2"); !ok || !end.Equal(hour(49)) || at.IsZero() {
			t.Fatalf("LastWritten of agg@v2: %s %s %v, want the hour ending at %s", end, at, ok, hour(49))
		}

		// One row of the history (an hour agg@v1 wrote) tampered with.
		var table string
		w.e.Projection().Read(func(st *projections.State) { table = sqlrun.TableName(st.Snapshots["agg@v2"].Table) })
		w.exec(`UPDATE tidemark."` + table + `" SET views = views + 1 WHERE hour = TIMESTAMP '2026-11-01 05:00:00' AND user_id = 3`)
		diffs, err = sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "agg")
		if err != nil || diffs["agg"].OnlyInView != 1 || diffs["agg"].OnlyInRecompute != 1 {
			t.Fatalf("verify after tampering with one row of the history: %+v %v, want 1 row each way", diffs, err)
		}
		w.exec(`UPDATE tidemark."` + table + `" SET views = views - 1 WHERE hour = TIMESTAMP '2026-11-01 05:00:00' AND user_id = 3`)
		w.verify()

		// A record whose query is not the one the log defines for its
		// snapshot does not count: the hours it holds (v1's backfill, one
		// batch of 48) fall back to the incumbent's query (v2's), and their
		// v1 rows differ.
		w.exec(`UPDATE tidemark_meta.intervals SET fingerprint = 'forged' WHERE table_name = '` + table + `' AND holds_start = TIMESTAMP '2026-11-01 00:00:00'`)
		diffs, err = sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "agg")
		if d := diffs["agg"]; err != nil || d.Unrecorded != 48 || d.Writers["agg@v1"] != 0 || d.OnlyInView != 240 || d.OnlyInRecompute != 240 {
			t.Fatalf("verify with a forged writer record: %+v %v, want those 48 hours unrecorded and their 240 rows differing each way", d, err)
		}

		// Without writer records (a table written before they existed),
		// every covered hour is recomputed with the incumbent's query and
		// counted as unrecorded: the history then differs, as before.
		w.exec(`DELETE FROM tidemark_meta.intervals WHERE table_name = '` + table + `'`)
		diffs, err = sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "agg")
		if d := diffs["agg"]; err != nil || d.Unrecorded != 49 || len(d.Writers) != 0 || d.OnlyInView != 240 || d.OnlyInRecompute != 240 {
			t.Fatalf("verify without writer records: %+v %v, want 49 unrecorded hours and v1's 240 rows differing each way", d, err)
		}
	})
}
