package sqlrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// rawHours fills raw.ev with 7 rows an hour over n hours from t0.
func rawHours(w *world, n int) {
	w.exec("CREATE SCHEMA raw")
	w.exec(`CREATE TABLE raw.ev AS SELECT CAST(TIMESTAMP '2026-11-01 00:00:00' + CAST(g.i AS INTEGER) * INTERVAL '1 minute' * 60 / 7 AS TIMESTAMP) AS ts,
  CAST(g.i % 5 AS BIGINT) AS user_id FROM generate_series(0, ` + itoa(7*n-1) + `) AS g(i)`)
	w.grantSandbox("raw")
}

const evAgg = `SELECT date_trunc('hour', ts) AS hour, user_id, count(*) AS views FROM raw.ev WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`

// A backfill with batch_size 168 writes each batch as one statement (one
// writer record each, with the batch's bounds), the same rows as writes of
// one interval each, and verifies clean; batch_concurrency 3 writes
// disjoint batches at once (Postgres: each its own range locks).
func TestBatchedBackfill(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		const hours = 400
		rawHours(w, hours)
		w.at(hour(hours))
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: evAgg, TimeColumn: "hour", BatchSize: 168, BatchConcurrency: 3})
		w.deploy("p1", map[string]string{"agg": "v1"})
		w.clean()

		var table string
		w.e.Projection().Read(func(st *projections.State) { table = sqlrun.TableName(st.Snapshots["agg@v1"].Table) })
		recs, err := w.wh.Writers(t.Context(), table)
		if err != nil {
			t.Fatal(err)
		}
		want := []interval.Range{interval.R(hour(0), hour(168)), interval.R(hour(168), hour(336)), interval.R(hour(336), hour(400))}
		if len(recs) != len(want) {
			t.Fatalf("%d writes: %+v, want one per batch %v", len(recs), recs, want)
		}
		for i, r := range recs {
			if !r.Query.Start.Equal(want[i].Start) || !r.Query.End.Equal(want[i].End) {
				t.Fatalf("write %d: %+v, want %v", i, r.Query, want[i])
			}
		}
		// The same model written one interval at a time.
		ref := warehouse.Model{Name: "agg", Table: "agg_ref", SQL: evAgg, TimeColumn: "hour"}
		for h := range hours {
			if _, err := w.wh.WriteInterval(t.Context(), ref, hour(h), hour(h+1)); err != nil {
				t.Fatal(err)
			}
		}
		a, b := `tidemark."`+table+`"`, `tidemark.agg_ref`
		if got := w.scalar(`SELECT (SELECT count(*) FROM (SELECT * FROM ` + a + ` EXCEPT ALL SELECT * FROM ` + b + `) x) + (SELECT count(*) FROM (SELECT * FROM ` + b + ` EXCEPT ALL SELECT * FROM ` + a + `) y)`); got != "0" {
			t.Fatalf("batched and per-interval writes differ in %s rows", got)
		}
		if got := w.scalar(`SELECT count(*) FROM ` + a); got != itoa(hours*5) {
			t.Fatalf("%s rows, want %d", got, hours*5)
		}
	})
}

// A batch that fails leaves none of its rows (its transaction), the
// batches committed before it keep theirs and are recorded complete, batch
// by batch, and nothing from the failed batch on is.
func TestFailingBatchLeavesNoRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rawHours(w, 100)
		w.at(hour(100))
		bad := `SELECT date_trunc('hour', ts) AS hour, user_id, count(*) + CAST(CASE WHEN @start_ts >= TIMESTAMP '2026-11-02 16:00:00' THEN 'x' ELSE '0' END AS INTEGER) AS views
FROM raw.ev WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1, 2`
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: bad, TimeColumn: "hour", BatchSize: 20, BatchConcurrency: 1})
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"agg": "v1"}})
		err := w.run.Run(t.Context(), work.Backfill(*r.Plan), w.now)
		if err == nil {
			t.Fatal("the backfill succeeded")
		}
		var table string
		var covered interval.Set
		w.e.Projection().Read(func(st *projections.State) {
			sn := st.Snapshots["agg@v1"]
			table, covered = sqlrun.TableName(sn.Table), st.Coverage[sn.Table]
		})
		if want := interval.NewSet(interval.R(t0, hour(40))); !covered.Equal(want) {
			t.Fatalf("coverage recorded: %v, want the committed batches %v", covered, want)
		}
		// Batches of 20 hours: [0,20) and [20,40) committed; [40,60) failed.
		got := w.scalar(`SELECT count(*) FROM tidemark."` + table + `" WHERE hour >= TIMESTAMP '2026-11-02 16:00:00'`)
		before := w.scalar(`SELECT count(*) FROM tidemark."` + table + `" WHERE hour < TIMESTAMP '2026-11-02 16:00:00'`)
		if got != "0" || before != itoa(40*5) {
			t.Fatalf("%s rows from the failed batch on, %s before it; want 0 and %d", got, before, 40*5)
		}
	})
}

// batch_size and batch_concurrency go from a model file through the
// registration to the projection's snapshot and the step a worker gets.
func TestBatchFieldsRoundTrip(t *testing.T) {
	w := newWorld(t)
	ms, err := modelfile.Parse("m.yaml", []byte(`models:
  - name: agg
    version: v1
    cron: "@hourly"
    start: 2026-11-01T00:00:00Z
    time_column: hour
    batch_size: 168
    batch_concurrency: 2
    sql: "`+strings.ReplaceAll(evAgg, `'`, `''`)[0:0]+`SELECT date_trunc('hour', ts) AS hour FROM raw.ev WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1"
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := ms[0].Register
	if reg.BatchSize != 168 || reg.BatchConcurrency != 2 {
		t.Fatalf("model file: %+v", reg)
	}
	r := w.do(&reg)
	var sn *projections.Snapshot
	w.e.Projection().Read(func(st *projections.State) { sn = st.Snapshots["agg@v1"] })
	if sn.BatchSize != 168 || sn.BatchConcurrency != 2 {
		t.Fatalf("projection: %+v", sn.SnapshotRegistered)
	}
	s, err := sqlrun.StepSQL(w.e.Projection())(t.Context(), r.Seq, "agg@v1")
	if err != nil || s == nil || s.BatchSize != 168 || s.BatchConcurrency != 2 {
		t.Fatalf("step SQL: %+v %v", s, err)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"batch_size":168,"batch_concurrency":2`) {
		t.Fatalf("step SQL JSON: %s", b)
	}
	for _, bad := range []string{"batch_size: 0", "batch_concurrency: 65", "batch_size: -1"} {
		_, err := modelfile.Parse("m.yaml", []byte("models:\n  - name: a\n    cron: \"@hourly\"\n    start: 2026-11-01T00:00:00Z\n    "+bad+"\n"))
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, ":", 2)[0]) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// A step whose context ends before every batch started is not computed:
// WriteStep says so (it returned nil when no batch had started, and the
// step was recorded complete with no rows).
func TestWriteStepCancelledIsNotComputed(t *testing.T) {
	wh := tempDuckDB(t)
	m := warehouse.Model{Name: "pv", Table: "pv__x", SQL: pv(60), TimeColumn: "ts", Snapshot: "pv@v1"}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rows, n, err := sqlrun.WriteStep(ctx, wh, m, interval.Hour, sqlrun.Batching{Size: 1, Concurrency: 1}, []interval.Range{interval.R(t0, hour(48))}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteStep on an ended context: %d rows of %d batches, %v; want context.Canceled", rows, n, err)
	}
}

// With a Clock, each batch is recorded at the reading when it committed,
// so the item's progress (Work.Done: plan --wait's rate and ETA) follows
// the batches; without one, at the item's at.
func TestBatchesRecordedAtTheirClock(t *testing.T) {
	w := newWorld(t)
	rawHours(w, 60)
	w.at(hour(60))
	w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: evAgg, TimeColumn: "hour", BatchSize: 20, BatchConcurrency: 1})
	var readings atomic.Int64
	w.run.Clock = func() time.Time { return w.now.Add(time.Duration(readings.Add(1)) * time.Minute) }
	r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"agg": "v1"}})
	item := work.Backfill(*r.Plan)
	item.ID = events.WorkID(r.Seq, events.RunBackfill) // as work.Of names it
	if err := w.run.Run(t.Context(), item, w.now); err != nil {
		t.Fatal(err)
	}
	var done projections.StepDone
	w.e.Projection().Read(func(st *projections.State) {
		if d := st.Work[item.ID].Done["agg@v1"]; d != nil {
			done = *d
		}
	})
	// Three batches, recorded one per reading.
	if done.Reports != 3 || readings.Load() != 3 || !done.Last.Equal(w.now.Add(3*time.Minute)) || done.Rows != 60*5 {
		t.Fatalf("recorded %+v after %d readings; want 3 reports, the last at %s, %d rows", done, readings.Load(), w.now.Add(3*time.Minute), 60*5)
	}
}

// A step asked to yield (work.Yielding: the pool wants its worker back)
// starts no batch after the one committing, returns work.ErrYielded, and
// what it committed stays committed.
func TestWriteStepYields(t *testing.T) {
	wh := tempDuckDB(t)
	m := warehouse.Model{Name: "pv", Table: "pv__y", SQL: pv(60), TimeColumn: "ts", Snapshot: "pv@v1"}
	var flag atomic.Bool
	ctx := work.WithYield(t.Context(), &flag)
	var committed []interval.Range
	rows, n, err := sqlrun.WriteStep(ctx, wh, m, interval.Hour, sqlrun.Batching{Size: 2, Concurrency: 1}, []interval.Range{interval.R(t0, hour(10))},
		func(_ context.Context, b interval.Range, _ int64) error {
			committed = append(committed, b)
			flag.Store(true) // asked after the first batch
			return nil
		})
	if !errors.Is(err, work.ErrYielded) || len(committed) != 1 || n != 5 || rows != 120 {
		t.Fatalf("yielding: %d rows, %d batches, committed %v, %v; want one batch committed and work.ErrYielded", rows, n, committed, err)
	}
}
