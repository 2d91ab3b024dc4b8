package bench

import (
	"context"
	"testing"

	"github.com/tidemark/tidemark/engine"
)

// BenchmarkThroughput is the command-throughput figure's tidemark side alone
// (for -cpuprofile).
func BenchmarkThroughput(b *testing.B) {
	ctx := context.Background()
	_, cs, done, err := served(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	b.ResetTimer()
	rate, err := throughput(ctx, cs, b.N, benchSnapshots, "tp")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rate, "ops/s")
}

// BenchmarkRestart: Open from a checkpoint with 300,000 events in the
// stream (for -cpuprofile; building the stream is outside the timer).
func BenchmarkRestart(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	e, err := open(ctx, dir, false, engine.Config{Logger: quiet(), CheckpointEvery: -1, TrustCommandTime: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := snapshots(ctx, e, 1000); err != nil {
		b.Fatal(err)
	}
	if _, err := rawAsync(ctx, e.Log().JetStream(), 300_000, 1000); err != nil {
		b.Fatal(err)
	}
	e.Close(ctx)
	full, err := open(ctx, dir, false, engine.Config{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	full.Close(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e, err := open(ctx, dir, false, engine.Config{Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		if st := e.Stats(); st.Folded != 0 || st.CheckpointSeq == 0 {
			b.Fatalf("not restarted from the checkpoint: %+v", st)
		}
		b.StopTimer()
		e.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkTransportLimit is the command-throughput figure: tidemark and
// the transport limit (limit.go) in alternating rounds.
func BenchmarkTransportLimit(b *testing.B) {
	ctx := context.Background()
	e, cs, done, err := served(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	before, _ := e.Log().Reader().LastSeq(ctx)
	defer func() {
		after, _ := e.Log().Reader().LastSeq(ctx)
		b.ReportMetric(float64(b.N)/float64(after-before), "cmds/msg")
	}()
	lim, err := startLimit(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer lim.close()
	b.ResetTimer()
	s, err := sideBySide(ctx, cs, lim, b.N, 4, benchSnapshots, "tl")
	if err != nil {
		b.Fatal(err)
	}
	s.report(b)
}

// report reports both sides' rates, their ratio and their CPU per
// command.
func (s sides) report(b *testing.B) {
	b.ReportMetric(s.tidemark, "tidemark-ops/s")
	b.ReportMetric(s.limit, "limit-ops/s")
	b.ReportMetric(s.tidemark/s.limit, "ratio")
	b.ReportMetric(float64(s.tidemarkCPU.Microseconds()), "tidemark-cpu-µs/op")
	b.ReportMetric(float64(s.limitCPU.Microseconds()), "limit-cpu-µs/op")
}

// BenchmarkLimitAlone is the transport limit's side alone (for
// -cpuprofile beside BenchmarkThroughput's).
func BenchmarkLimitAlone(b *testing.B) {
	lim, err := startLimit(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer lim.close()
	b.ResetTimer()
	rate, err := lim.run(0, b.N, benchSnapshots)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rate, "ops/s")
}
