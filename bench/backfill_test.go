package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// The Go benchmarks behind the backfill rows: b.N backfills of a year of
// an hourly model (1,000 rows an hour) in batches of 168, each beside the
// raw INSERT … SELECT (reported as raw-rows/s and overhead-ms/batch).

func benchBackfill(b *testing.B, dsn string) {
	wh, err := warehouse.Open(b.Context(), dsn, warehouse.Options{})
	if err != nil {
		b.Skip(err)
	}
	defer wh.Close()
	var tm, raw, over time.Duration
	var rows int64
	for i := 0; b.Loop(); i++ {
		r, err := backfillOnce(b.Context(), wh, 8_760, i)
		if err != nil {
			b.Fatal(err)
		}
		tm, raw, over, rows = tm+r.tidemark, raw+r.raw, over+r.overhead(), rows+r.rows
	}
	b.ReportMetric(rowsPerSec(rows, tm), "rows/s")
	b.ReportMetric(rowsPerSec(rows, raw), "raw-rows/s")
	b.ReportMetric(float64(over)/float64(time.Millisecond)/float64(b.N), "overhead-ms/batch")
}

func BenchmarkBackfillDuckDB(b *testing.B) {
	benchBackfill(b, filepath.Join(b.TempDir(), "w.duckdb"))
}

func BenchmarkBackfillPostgres(b *testing.B) {
	pg, err := pgserver.Start(b.Context(), "")
	if err != nil {
		b.Skip(err)
	}
	defer pg.Stop()
	benchBackfill(b, pg.DSN("postgres"))
}

// The quick backfill rows run and report both engines' sides.
func TestBackfillFiguresQuick(t *testing.T) {
	fs, err := backfillFigures(t.Context(), Options{Quick: true}.sizes())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Logf("%s: tidemark %.0f limit %.2f ratio %.3f pass %v scale %+v (%s)", f.Name, f.Tidemark, f.Limit, f.Ratio, f.Pass, f.Scale, f.Note)
		if f.Tidemark == 0 && f.Note[:7] != "skipped" {
			t.Errorf("%s: nothing measured", f.Name)
		}
	}
}

// BenchmarkBackfillPostgresWorkers: b.N rounds of the workers row at the
// quick size (336 hourly intervals, batches of 24), 4 workers against 1
// through serve's published path (workersRun), reported as rows/s (4
// workers), 1-worker-rows/s and ratio.
func BenchmarkBackfillPostgresWorkers(b *testing.B) {
	pg, err := pgserver.Start(b.Context(), "")
	if err != nil {
		b.Skip(err)
	}
	defer pg.Stop()
	hours := Options{Quick: true}.sizes().backfillHours
	var many, one time.Duration
	var rows int64
	for i := 0; b.Loop(); i++ {
		n, m, o, err := workersBest(b.Context(), pg.DSN("postgres"), hours, 1, workersConcurrency)
		if err != nil {
			b.Fatal(err)
		}
		rows, many, one = rows+n, many+m, one+o
	}
	b.ReportMetric(rowsPerSec(rows, many), "rows/s")
	b.ReportMetric(rowsPerSec(rows, one), "1-worker-rows/s")
	b.ReportMetric(float64(one)/float64(many), "ratio")
}

// TestWorkersRun: n worker loops sharing published batches write every
// row of the backfill once, and the rows add up in the events.
func TestWorkersRun(t *testing.T) {
	pg, err := pgserver.Start(t.Context(), "")
	if err != nil {
		t.Skip(err)
	}
	defer pg.Stop()
	for _, n := range []int{1, 3} {
		rows, d, err := workersRun(t.Context(), pg.DSN("postgres"), fmt.Sprintf("bfw_t%d", n), 96, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d workers: %d rows in %s", n, rows, d)
	}
}

// benchWriteStep is the backfill rows' tidemark side alone (for
// -cpuprofile): b.N backfills of a year of the hourly model in batches of
// 168 (sqlrun.WriteStep), each into a fresh table (its creation and drop
// outside the timer), reported as rows/s and ms/batch.
func benchWriteStep(b *testing.B, dsn string) {
	wh, err := warehouse.Open(b.Context(), dsn, warehouse.Options{})
	if err != nil {
		b.Skip(err)
	}
	defer wh.Close()
	const hours = 8_760
	var rows int64
	var batches int
	var d time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		m := warehouse.Model{Name: "bf", Table: fmt.Sprintf("bf_ws_%d", i), SQL: backfillSQL, TimeColumn: "ts"}
		if err := wh.EnsureTable(b.Context(), m); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t := time.Now()
		n, nb, err := sqlrun.WriteStep(b.Context(), wh, m, interval.Hour, sqlrun.Batching{Size: backfillBatch, Concurrency: 1},
			[]interval.Range{interval.R(t0, t0.Add(hours*time.Hour))}, nil)
		if err != nil {
			b.Fatal(err)
		}
		d += time.Since(t)
		rows, batches = rows+n, batches+nb
		b.StopTimer()
		if err := wh.DropTable(b.Context(), m.Table); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(rowsPerSec(rows, d), "rows/s")
	b.ReportMetric(float64(d)/float64(time.Millisecond)/float64(batches), "ms/batch")
}

func BenchmarkWriteStepDuckDB(b *testing.B) {
	benchWriteStep(b, filepath.Join(b.TempDir(), "w.duckdb"))
}

func BenchmarkWriteStepPostgres(b *testing.B) {
	pg, err := pgserver.Start(b.Context(), "")
	if err != nil {
		b.Skip(err)
	}
	defer pg.Stop()
	benchWriteStep(b, pg.DSN("postgres"))
}
