package sqlrun_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// stopAfter records batches with the built-in worker and ends the run's
// context once it has recorded k of them (k 0: never).
type stopAfter struct {
	*inproc.Worker
	k        int64
	recorded atomic.Int64
	stop     context.CancelFunc
}

func (s *stopAfter) RecordBatch(ctx context.Context, b work.Item, res work.Result, at time.Time) error {
	if err := s.Worker.RecordBatch(ctx, b, res, at); err != nil {
		return err
	}
	if s.recorded.Add(1) == s.k {
		s.stop()
	}
	return nil
}

// TestStoppedBackfillComputesOnlyWhatIsLeft: the built-in runner computes
// a backfill of a parent (batches of 4 hours) and its child (batches of 6
// hours), two batches at a time, and is stopped twice (its context ended once it
// has recorded k batches): mid-parent, then mid-child. Each run records
// each batch done as it commits (with its rows: the run stopped has
// recorded what it committed), and computes only batches not recorded
// done before it (the warehouse's writer records: a batch done keeps its
// write). After the last run every batch is recorded once, the rows are
// exact and the promotion verifies with 0 differing rows.
func TestStoppedBackfillComputesOnlyWhatIsLeft(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts", BatchSize: 4, BatchConcurrency: 2})
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}, BatchSize: 6, BatchConcurrency: 2})
		items := w.items(w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"pv": "v1", "agg": "v1"}}))
		if len(items) != 1 || len(items[0].Steps) != 2 {
			t.Fatalf("the plan's work: %+v", items)
		}
		item := items[0]
		all := interval.R(t0, hour(48))
		snaps := []string{"pv@v1", "agg@v1"}
		batches := map[string][]interval.Range{
			"pv@v1":  interval.Batches(interval.Hour, 4, []interval.Range{all}),
			"agg@v1": interval.Batches(interval.Hour, 6, []interval.Range{all}),
		}
		tables := map[string]string{}
		w.e.Projection().Read(func(st *projections.State) {
			for _, s := range snaps {
				tables[s] = sqlrun.TableName(st.Snapshots[s].Table)
			}
		})
		// done is the batches of each snapshot the item's completions have
		// recorded.
		done := func() map[string]map[interval.Range]bool {
			out := map[string]map[interval.Range]bool{}
			w.e.Projection().Read(func(st *projections.State) {
				for _, s := range snaps {
					out[s] = map[interval.Range]bool{}
					var got interval.Set
					if wk := st.Work[item.ID]; wk != nil && wk.Done[s] != nil {
						got = wk.Done[s].Ranges
					}
					for _, b := range batches[s] {
						if got.Covers(b) {
							out[s][b] = true
						}
					}
				}
			})
			return out
		}
		// writes is each snapshot's writer records: batch → when written.
		writes := func() map[string]map[interval.Range]time.Time {
			out := map[string]map[interval.Range]time.Time{}
			for _, s := range snaps {
				recs, err := w.wh.Writers(t.Context(), tables[s])
				if err != nil {
					t.Fatal(err)
				}
				out[s] = map[interval.Range]time.Time{}
				for _, r := range recs {
					if r.Query != r.Holds {
						t.Fatalf("%s: a write of %v holds only %v", s, r.Query, r.Holds)
					}
					out[s][interval.R(r.Query.Start.UTC(), r.Query.End.UTC())] = r.At
				}
			}
			return out
		}

		// Stopped after 5 batches (the parent's), then after 10 more (the
		// parent's last 7, the child's first 3), then to the end.
		for n, k := range []int64{5, 10, 0} {
			before, wroteBefore := done(), writes()
			ctx, cancel := context.WithCancel(t.Context())
			rec := &stopAfter{Worker: &inproc.Worker{Handler: w.e, Actor: "worker:builtin"}, k: k, stop: cancel}
			run := &sqlrun.Runner{WH: w.wh, Proj: w.e.Projection(), Done: rec}
			err := run.Run(ctx, item, w.now)
			cancel()
			if k > 0 && !errors.Is(err, context.Canceled) || k == 0 && err != nil {
				t.Fatalf("run %d: %v", n, err)
			}
			after, wrote := done(), writes()
			newly, computed := 0, 0
			for _, s := range snaps {
				for _, b := range batches[s] {
					again := !wrote[s][b].IsZero() && !wrote[s][b].Equal(wroteBefore[s][b])
					if again {
						computed++
					}
					if before[s][b] && again {
						t.Errorf("run %d: %s batch %s computed again, though recorded done before the run", n, s, b)
					}
					if !before[s][b] && after[s][b] {
						newly++
						if !again {
							t.Errorf("run %d: %s batch %s recorded done, but not written by the run", n, s, b)
						}
					}
				}
			}
			if int64(newly) != rec.recorded.Load() {
				t.Errorf("run %d: %d batches newly recorded done, %d recorded by the run", n, newly, rec.recorded.Load())
			}
			// Stopped, a run records the batch that ended it and may commit
			// (and record) the one beside it.
			if k > 0 && (int64(newly) < k || int64(newly) > k+1 || computed > newly+1) {
				t.Errorf("run %d stopped after %d batches: %d newly recorded done, %d written", n, k, newly, computed)
			}
			t.Logf("run %d: %d batches written, %d recorded done", n, computed, newly)
		}
		final := done()
		for _, s := range snaps {
			if len(final[s]) != len(batches[s]) {
				t.Fatalf("%s: %d of %d batches recorded done", s, len(final[s]), len(batches[s]))
			}
		}

		// One completion per batch, naming the item, with the batch's rows.
		completed := map[string]map[interval.Range]int64{"pv@v1": {}, "agg@v1": {}}
		for _, r := range w.records() {
			c, ok := r.Event.Payload.(events.IntervalsCompleted)
			if !ok || c.Work != item.ID {
				continue
			}
			if len(c.Ranges) != 1 {
				t.Fatalf("a completion of %d ranges: %+v", len(c.Ranges), c)
			}
			b := interval.R(c.Ranges[0].Start, c.Ranges[0].End)
			if _, twice := completed[c.Snapshot][b]; twice {
				t.Fatalf("%s batch %s completed twice", c.Snapshot, b)
			}
			completed[c.Snapshot][b] = c.Rows
		}
		perHour := map[string]int64{"pv@v1": 60, "agg@v1": 5}
		for _, s := range snaps {
			for _, b := range batches[s] {
				if want := perHour[s] * int64(b.End.Sub(b.Start)/time.Hour); completed[s][b] != want {
					t.Errorf("%s batch %s completed with %d rows, want %d", s, b, completed[s][b], want)
				}
			}
		}

		if d := w.do(&commands.Promote{Plan: "p1"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote: %+v", d)
		}
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != itoa(48*60) {
			t.Errorf("prod.pv: %s rows, want %d", got, 48*60)
		}
		if got := w.scalar("SELECT count(*) FROM (SELECT hour FROM prod.agg GROUP BY hour HAVING count(*) = 5 AND sum(views) = 60) x"); got != "48" {
			t.Errorf("prod.agg: %s hours of 5 users and 60 views, want 48", got)
		}
	})
}

var _ sqlrun.BatchRecorder = (*stopAfter)(nil)
