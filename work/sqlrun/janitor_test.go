package sqlrun_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// janitorGrace is the grace period of these tests, and their retention.
const janitorGrace = 24 * time.Hour

// exists reports whether the warehouse holds the table of tidemark table
// id.
func (w *world) exists(id string) bool {
	w.t.Helper()
	n := w.scalar("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" + warehouse.Schema + "' AND table_name = '" + sqlrun.TableName(id) + "'")
	return n != "0"
}

// janitor is a janitor on the world's engine and clock, with its grace
// and retain.
func (w *world) janitor(retain time.Duration) *scheduler.Janitor {
	return &scheduler.Janitor{Handler: w.e, Proj: w.e.Projection(), Clock: w.e.Now, Logger: jstest.Quiet(), Grace: janitorGrace, Retain: retain}
}

// sweep runs the janitor's sweep at the world's clock.
func (w *world) sweep() []string {
	w.t.Helper()
	evs, err := w.janitor(janitorGrace).Sweep(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Table)
	}
	return out
}

// records reads the whole log back.
func (w *world) records() []events.Record {
	w.t.Helper()
	last, err := w.e.Log().Reader().LastSeq(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	var recs []events.Record
	for seq := uint64(1); seq <= last; seq++ {
		rec, err := w.e.Log().Reader().Get(w.t.Context(), seq)
		if err != nil {
			w.t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// startJanitor runs a sqlrun.Janitor until the test ends, logging to log
// (nil: nowhere).
func (w *world) startJanitor(log ...*slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	j := &sqlrun.Janitor{WH: w.wh, Proj: w.e.Projection(), Retry: 50 * time.Millisecond}
	if len(log) > 0 {
		j.Log = log[0]
	}
	go func() {
		defer close(done)
		_ = j.Run(ctx)
	}()
	w.t.Cleanup(func() { cancel(); <-done })
}

// recorder is a slog handler that counts the records whose message is
// msg.
type recorder struct {
	msg string
	n   atomic.Int64
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == r.msg {
		r.n.Add(1)
	}
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// gone waits (bounded) until the janitor has dropped the tables of ids.
func (w *world) gone(ids ...string) {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !w.exists(id) })
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the warehouse still holds %v", left)
		}
		time.Sleep(10 * time.Millisecond) // the janitor drops after the projection applies the event
	}
}

// replaceV1 deploys pv@v1 and agg@v1, then promotes pv@v2 (plan p2, with
// agg's derived version) at 48h05: v1's tables were last used until then.
func replaceV1(w *world, kind events.Kind) events.PlanBuilt {
	w.t.Helper()
	pvAndAgg(w)
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts", SnapshotKind: kind})
	p := w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"pv": "v2"}})
	w.at(hour(48).Add(5 * time.Minute))
	if d := w.do(&commands.Promote{Plan: "p2"}).Decision; d == nil || d.Outcome != events.Accepted {
		w.t.Fatalf("promote p2: %+v", d)
	}
	if kind == events.ForwardOnly {
		w.synced() // a forward-only version keeps v1's rows: nothing to verify
	} else {
		w.clean()
	}
	return p
}

// TestJanitorDropsReplacedTables: after the grace period the janitor
// retires v1's tables (never before), the warehouse drops them, prod's
// views still answer and verify, the events are in the log, and replay
// reproduces the state with 0 divergences. A live table is never retired,
// whoever asks.
func TestJanitorDropsReplacedTables(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		p := replaceV1(w, "")
		aggV2 := candidate(p, "agg")
		w.startJanitor()
		w.at(hour(48 + 24)) // 23h55 after the release
		if got := w.sweep(); got != nil {
			t.Fatalf("retired within the grace period: %v", got)
		}
		// A hostile client cannot retire a released table early, nor a
		// live one ever.
		hostile := func(tables ...string) {
			t.Helper()
			seq := w.e.Projection().Seq()
			r := w.e.Handle(t.Context(), &commands.RetireTables{Meta: commands.Meta{ID: commands.NewID(), At: w.now}, Tables: tables, GraceMS: janitorGrace.Milliseconds(), RetainMS: janitorGrace.Milliseconds()})
			if r.Code != commands.CodeConflict || r.Field != "tables[0]" || w.e.Projection().Seq() != seq {
				t.Fatalf("retire %s: %+v (seq %d -> %d)", tables, r, seq, w.e.Projection().Seq())
			}
		}
		hostile("pv@v1")
		w.at(hour(48 + 25))
		hostile("pv@v2")
		hostile(aggV2, "pv@v1")
		got := w.sweep()
		if want := []string{"agg@v1", "pv@v1"}; !slices.Equal(got, want) {
			t.Fatalf("retired %v, want %v", got, want)
		}
		w.gone("agg@v1", "pv@v1")
		for _, id := range []string{"pv@v2", aggV2} {
			if !w.exists(id) {
				t.Fatalf("the incumbent's table %s was dropped", id)
			}
		}
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "1440" {
			t.Fatalf("prod.pv after the janitor: %s rows", got)
		}
		var cleared bool
		w.e.Projection().Read(func(st *projections.State) {
			_, retired := st.Retired["pv@v1"]
			cleared = retired && st.Table("pv@v1").Empty()
		})
		if !cleared {
			t.Fatal("pv@v1 is not retired with its coverage cleared")
		}
		status := w.e.Handle(t.Context(), &commands.Status{})
		var shown []string
		for _, r := range status.Retired {
			shown = append(shown, r.Table)
		}
		if !slices.Equal(shown, []string{"agg@v1", "pv@v1"}) {
			t.Fatalf("status shows retired tables %v", shown)
		}
		if again := w.sweep(); again != nil {
			t.Fatalf("a second sweep retired %v", again)
		}
		// A restart drops again: idempotent.
		if err := sqlrun.DropRetired(t.Context(), w.wh, w.e.Projection()); err != nil {
			t.Fatal(err)
		}
		recs := w.records()
		var retired []string
		for _, r := range recs {
			if p, ok := r.Event.Payload.(events.TableRetired); ok {
				retired = append(retired, p.Table)
				if r.Event.Actor != "janitor" || p.GraceMS != janitorGrace.Milliseconds() || !p.JudgedAt.Equal(hour(48+25)) {
					t.Fatalf("the TableRetired event: %+v %+v", r.Event.Envelope, p)
				}
			}
		}
		if !slices.Equal(retired, []string{"agg@v1", "pv@v1"}) {
			t.Fatalf("TableRetired events for %v", retired)
		}
		var audited []string
		for _, row := range replay.Audit(recs, replay.Filter{Model: "pv"}) {
			if row.Type == string(events.TypeTableRetired) {
				audited = append(audited, row.Summary)
			}
		}
		if len(audited) != 1 || !strings.HasPrefix(audited[0], "table pv@v1 retired (written by pv@v1;") {
			t.Fatalf("audit rows of the retirement: %q", audited)
		}
		if divs := replay.Verify(recs); len(divs) != 0 {
			t.Fatalf("replay diverges: %v", divs)
		}
		folded := replay.Fold(recs)
		w.e.Projection().Read(func(st *projections.State) {
			if len(folded.Retired) != len(st.Retired) || !folded.Table("pv@v1").Empty() || folded.Released["pv@v1"] != st.Released["pv@v1"] {
				t.Fatalf("replay folds retired %v, the live state has %v", folded.Retired, st.Retired)
			}
		})
	})
}

// TestJanitorKeepsForwardOnlySharedTable: pv@v2 is forward-only, so it
// writes pv@v1's table: while it is the incumbent, that table is never
// retired (agg's old table is, by serve's janitor loop).
func TestJanitorKeepsForwardOnlySharedTable(t *testing.T) {
	w := newWorld(t)
	replaceV1(w, events.ForwardOnly)
	w.startJanitor()
	// serve's loop (scheduler.Janitor), sweeping every 20ms of wall time
	// on the simulated clock.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		j := w.janitor(janitorGrace)
		j.Every = 20 * time.Millisecond
		_ = j.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	w.at(hour(48 + 24*30))
	w.gone("agg@v1")
	var retired []string
	w.e.Projection().Read(func(st *projections.State) {
		for table := range st.Retired {
			retired = append(retired, table)
		}
	})
	if !slices.Equal(retired, []string{"agg@v1"}) {
		t.Fatalf("retired %v, want only agg@v1", retired)
	}
	if !w.exists("pv@v1") {
		t.Fatal("the table pv@v2 shares was dropped")
	}
	w.synced()
	if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "2880" {
		t.Fatalf("prod.pv: %s rows", got)
	}
}

// TestJanitorKeepsTableAViewReads: a drop that a view refuses (here a
// view outside tidemark) is kept and retried, never forced; once the view
// is gone the table is dropped.
func TestJanitorKeepsTableAViewReads(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		replaceV1(w, "")
		w.exec("CREATE SCHEMA IF NOT EXISTS other")
		w.exec("CREATE VIEW other.old_pv AS SELECT * FROM " + warehouse.Schema + "." + sqlrun.TableName("pv@v1"))
		w.grantSandbox("other")
		w.at(hour(48 + 25))
		if got := w.sweep(); !slices.Equal(got, []string{"agg@v1", "pv@v1"}) {
			t.Fatalf("retired %v", got)
		}
		err := sqlrun.DropRetired(t.Context(), w.wh, w.e.Projection())
		if !errors.Is(err, warehouse.ErrInUse) {
			t.Fatalf("dropping a table a view reads: %v, want ErrInUse", err)
		}
		if !w.exists("pv@v1") || w.exists("agg@v1") {
			t.Fatalf("after the refused drop: pv@v1 %v (want kept), agg@v1 %v (want gone)", w.exists("pv@v1"), w.exists("agg@v1"))
		}
		if got := w.scalar("SELECT count(*) FROM other.old_pv"); got != "2880" {
			t.Fatalf("the foreign view reads %s rows", got)
		}
		// The running janitor is refused too, logs it and keeps retrying.
		rec := &recorder{msg: "retired table still read by a view: kept, retrying"}
		w.startJanitor(slog.New(rec))
		deadline := time.Now().Add(30 * time.Second)
		for rec.n.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("the janitor logged %d refused drops, want 2", rec.n.Load())
			}
			time.Sleep(10 * time.Millisecond) // the janitor retries every 50ms
		}
		if !w.exists("pv@v1") {
			t.Fatal("a table a view reads was dropped")
		}
		w.exec("DROP VIEW other.old_pv")
		w.gone("pv@v1")
	})
}

// TestVerifyAfterUpstreamRetired: agg is forward-only, so its derived
// version keeps the history agg@v1 computed from pv@v1's table. Once the
// janitor retires pv@v1's table that history cannot be recomputed: verify
// skips it and says how much (Unverifiable), instead of failing, and still
// checks what the new version wrote.
func TestVerifyAfterUpstreamRetired(t *testing.T) {
	w := newWorld(t)
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
	w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}, SnapshotKind: events.ForwardOnly})
	w.deploy("p1", map[string]string{"pv": "v1", "agg": "v1"})
	w.clean()
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
	w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"pv": "v2"}})
	w.at(hour(48).Add(5 * time.Minute))
	if d := w.do(&commands.Promote{Plan: "p2"}).Decision; d == nil || d.Outcome != events.Accepted {
		t.Fatalf("promote p2: %+v", d)
	}
	w.tick(hour(49)) // agg's derived version computes 48h-49h from pv@v2
	w.synced()
	w.startJanitor()
	w.at(hour(48 + 25))
	if got := w.sweep(); !slices.Equal(got, []string{"pv@v1"}) {
		t.Fatalf("retired %v, want pv@v1 (agg@v1's table is shared by the incumbent)", got)
	}
	w.gone("pv@v1")
	diffs, err := sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "agg")
	if err != nil {
		t.Fatalf("verify after the upstream's retirement: %v", err)
	}
	d := diffs["agg"]
	if !d.Empty() || d.Unverifiable == 0 || d.Writers["agg@v1+p2"] == 0 || d.Writers["agg@v1"] != 0 {
		t.Fatalf("agg: %+v, want no diffs, agg@v1's history unverifiable and agg@v1+p2's checked", d)
	}
}

// TestRetiredTableNotWrittenAgain: work for a snapshot whose table the
// janitor retired (late, or redelivered) writes nothing: the built-in
// runner skips it (the engine then refuses the completion) and the SQL a
// published step carries says why, so the table is not recreated.
func TestRetiredTableNotWrittenAgain(t *testing.T) {
	w := newWorld(t)
	replaceV1(w, "")
	w.startJanitor()
	w.at(hour(48 + 25))
	if got := w.sweep(); !slices.Equal(got, []string{"agg@v1", "pv@v1"}) {
		t.Fatalf("retired %v", got)
	}
	w.gone("pv@v1")
	late := work.Item{ID: "late", RunKind: events.RunScheduled, Steps: []work.Step{{Model: "pv", Version: "v1", Snapshot: "pv@v1",
		Ranges: []interval.Range{interval.R(hour(47), hour(48))}, RunID: "late"}}}
	err := w.run.Run(t.Context(), late, w.now)
	if w.exists("pv@v1") {
		t.Fatal("the late work recreated the retired table")
	}
	if err == nil {
		t.Fatal("the completion into a retired table was accepted")
	}
	s, err := sqlrun.StepSQL(w.e.Projection())(t.Context(), 0, "pv@v1")
	if err != nil || s == nil || !strings.Contains(s.Error, "retired") {
		t.Fatalf("the SQL of a step of a retired table: %+v %v", s, err)
	}
}

// TestStalePlanWorkNotComputed: a plan's backfill still queued after the
// environment moved past the plan (its version promoted by another plan,
// then a forward-only successor serving that table) writes nothing: the
// built-in runner skips it (decide.ForeignWork), so production's rows
// stay as production computed them, and the engine refuses the
// completion for good.
func TestStalePlanWorkNotComputed(t *testing.T) {
	w := newWorld(t)
	pvAndAgg(w)
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
	r := w.do(&commands.BuildPlan{Plan: "p-old", Env: "prod", Versions: map[string]string{"pv": "v2"}})
	stale := work.Backfill(*r.Plan) // queued, not run
	w.deploy("p-new", map[string]string{"pv": "v2"})
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v3", Cron: "@hourly", SQL: pv(40), TimeColumn: "ts", SnapshotKind: events.ForwardOnly})
	w.deploy("p-fo", map[string]string{"pv": "v3"})
	var table string
	w.e.Projection().Read(func(st *projections.State) { table = st.Snapshots["pv@v3"].Table })
	if table != "pv@v2" {
		t.Fatalf("forward-only pv@v3 writes %s, want pv@v2's table", table)
	}
	// Production's rows, marked: a stale write would rewrite them.
	q := warehouse.Schema + `."` + sqlrun.TableName(table) + `"`
	w.exec("UPDATE " + q + " SET amount = 999")
	total := w.scalar("SELECT count(*) FROM " + q)
	if total == "0" {
		t.Fatalf("production's table %s is empty", q)
	}
	err := w.run.Run(t.Context(), stale, w.now)
	if got := w.scalar("SELECT count(*) FROM " + q + " WHERE amount = 999"); got != total {
		t.Fatalf("stale plan work rewrote production's table: %s of %s rows kept", got, total)
	}
	// Refused for good: a worker (the publisher's retry, `tidemark
	// worker`'s redelivery) gives the work up instead of running it again.
	if ce := new(commands.Error); !errors.As(err, &ce) || ce.Code != commands.CodeInvalid || work.Transient(err) {
		t.Fatalf("the stale completion: %v, want a refusal no worker retries", err)
	}
}

// TestJanitorKeepsTablesForRetention: with a retention of 7 days the
// janitor's sweep leaves v1's demoted tables in the warehouse after the
// grace period, so a rollback restores v1 and prod's views read its rows
// again; a week after the rollback demoted v2 it retires v2's tables, and
// a rollback to them is refused naming to_generation.
func TestJanitorKeepsTablesForRetention(t *testing.T) {
	const week = 7 * 24 * time.Hour
	eachBackend(t, func(t *testing.T, w *world) {
		replaceV1(w, "")
		w.startJanitor()
		sweep := func() []string {
			t.Helper()
			evs, err := w.janitor(week).Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, ev := range evs {
				out = append(out, ev.Table)
			}
			return out
		}
		w.at(hour(48 + 25)) // past the grace, within the retention
		if got := sweep(); got != nil {
			t.Fatalf("retired within the retention: %v", got)
		}
		r := w.do(&commands.Rollback{Env: "prod"})
		if r.Rollback == nil || r.Rollback.Generation != 3 || len(r.Rollback.Models) != 2 {
			t.Fatalf("rollback: %+v", r)
		}
		w.clean() // prod's views read v1's tables again, rows as computed
		rows := func(q string) string { return w.scalar("SELECT count(*) FROM " + q) }
		v1, v2 := rows(warehouse.Schema+"."+sqlrun.TableName("pv@v1")), rows(warehouse.Schema+"."+sqlrun.TableName("pv@v2"))
		if got := rows("prod.pv"); got != v1 || v1 == v2 {
			t.Fatalf("prod.pv after the rollback: %s rows; v1's table %s, v2's %s", got, v1, v2)
		}
		w.at(hour(48 + 25).Add(week).Add(time.Minute))
		got := sweep()
		if len(got) != 2 || !slices.Contains(got, "pv@v2") {
			t.Fatalf("retired a week after the rollback: %v", got)
		}
		w.gone(got...)
		resp := w.e.Handle(t.Context(), &commands.Rollback{Meta: commands.Meta{ID: commands.NewID(), At: w.now}, Env: "prod"})
		if resp.Code != commands.CodeConflict || resp.Field != "to_generation" || !strings.Contains(resp.Message, "retired") {
			t.Fatalf("rollback to retired tables: %+v", resp)
		}
	})
}

// TestStaleRestateWorkNotComputed: a restatement's work still queued
// after a promotion moved the environment on (here a forward-only
// successor now serves the restated table) writes nothing: the built-in
// runner skips it (decide.StaleRestatement), so production's rows stay,
// and the engine refuses its completion with stale_generation, which no
// worker retries.
func TestStaleRestateWorkNotComputed(t *testing.T) {
	w := newWorld(t)
	pvAndAgg(w)
	r := w.do(&commands.Restate{Env: "prod", Model: "pv", Ranges: []interval.Range{interval.R(hour(10), hour(12))}})
	if r.Restatement == nil || len(r.Restatement.Work) != 2 {
		t.Fatalf("restatement: %+v", r.Restatement)
	}
	var id string
	w.e.Projection().Read(func(st *projections.State) {
		for k := range st.Restatements {
			id = k
		}
	})
	stale := work.RestateItem(*r.Restatement) // queued, not run
	stale.ID = id
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(40), TimeColumn: "ts", SnapshotKind: events.ForwardOnly})
	w.deploy("p-fo", map[string]string{"pv": "v2"})
	q := warehouse.Schema + `."` + sqlrun.TableName("pv@v1") + `"`
	w.exec("UPDATE " + q + " SET amount = 999")
	total := w.scalar("SELECT count(*) FROM " + q)
	if err := w.run.Run(t.Context(), stale, w.now); err != nil {
		t.Fatalf("stale restate work: %v, want it given up quietly", err)
	}
	if got := w.scalar("SELECT count(*) FROM " + q + " WHERE amount = 999"); got != total {
		t.Fatalf("stale restate work rewrote production's table: %s of %s rows kept", got, total)
	}
	// The engine refuses its completion for good.
	rep := w.e.Handle(t.Context(), &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: commands.Meta{ID: "late", At: w.now},
		Model: "pv", Version: "v1", Ranges: []interval.Range{interval.R(hour(10), hour(11))}, RunID: r.Restatement.Run, Work: id}})
	if ce := new(commands.Error); !errors.As(rep.Err(), &ce) || ce.Code != commands.CodeStaleGeneration || work.Transient(rep.Err()) {
		t.Fatalf("the stale completion: %v, want stale_generation, which no worker retries", rep.Err())
	}
}
