package bench

import (
	"context"
	"testing"
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
