package bench

import (
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/warehouse"
)

// BenchmarkDiffDuckDB is the Go benchmark behind the diff row: b.N diffs
// of a year of an hourly model (1,000 rows an hour a side, one day
// restated), each beside the same comparison by hand: tidemark-s/op and
// raw-s/op (ns/op is both).
func BenchmarkDiffDuckDB(b *testing.B) {
	wh, err := warehouse.Open(b.Context(), filepath.Join(b.TempDir(), "w.duckdb"), warehouse.Options{})
	if err != nil {
		b.Skip(err)
	}
	defer wh.Close()
	if err := diffTables(b.Context(), wh, 8_760, false); err != nil {
		b.Fatal(err)
	}
	var tm, raw float64
	for i := 0; b.Loop(); i++ {
		r, err := diffOnce(b.Context(), wh, 8_760, i)
		if err != nil {
			b.Fatal(err)
		}
		tm, raw = tm+r.tidemark.Seconds(), raw+r.raw.Seconds()
	}
	b.ReportMetric(tm/float64(b.N), "tidemark-s/op")
	b.ReportMetric(raw/float64(b.N), "raw-s/op")
}

// The quick diff rows run, find what the raw queries find, and report
// both sides.
func TestDiffFiguresQuick(t *testing.T) {
	fs, err := diffFigures(t.Context(), Options{Quick: true}.sizes())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 {
		t.Fatalf("%d rows: %+v", len(fs), fs)
	}
	for _, f := range fs {
		t.Logf("%s: tidemark %.3f limit %.3f ratio %.3f pass %v (%s)", f.Name, f.Tidemark, f.Limit, f.Ratio, f.Pass, f.Note)
		if f.Tidemark == 0 || f.Limit == 0 {
			t.Errorf("%s: nothing measured", f.Name)
		}
	}
}
