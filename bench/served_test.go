package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/tidemark/tidemark/warehouse"
)

// BenchmarkTickToServed is the row "tick to served": each iteration is
// one scheduler tick, timed from the tick's command until a query on
// prod's view sees the new interval's rows (ns/op is the mean; p50-ms and
// p99-ms the distribution; compute-ms the model's own write of one
// interval).
func BenchmarkTickToServed(b *testing.B) {
	ctx := b.Context()
	s, err := NewTickServed(ctx, 1)
	if errors.Is(err, warehouse.ErrNoCgo) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d, err := s.Tick(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	compute, err := s.ComputeTime(ctx, 20)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(ms(compute), "compute-ms")
}

// TestTickFigure: the row at a few ticks, at 1 and 10 models: every tick's
// rows are served, and the figure is complete.
func TestTickFigure(t *testing.T) {
	figs, err := tickFigure(t.Context(), sizes{ticks: 3, tenfold: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) == 0 {
		t.Skip("no DuckDB in this build")
	}
	f := figs[0]
	if !(f.Tidemark > 0) || !(f.Limit > 1000) || f.Ratio <= 0 || f.Note == "" || f.Scale == nil || f.Scale.ScaledSize != 10 || !(f.Scale.ScaledTidemark > 0) {
		t.Fatalf("figure %+v scale %+v", f, f.Scale)
	}
	t.Logf("%s: %.1f %s (limit %.1f), %s", f.Name, f.Tidemark, f.Unit, f.Limit, f.Note)
}
