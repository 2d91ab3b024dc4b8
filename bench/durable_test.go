package bench

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkDiskLimit: events/s under SyncAlways, R1 file store, 16
// publishers, 1, 16 or 64 events to a message.
func BenchmarkDiskLimit(b *testing.B) {
	for _, per := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("per=%d", per), func(b *testing.B) {
			ctx := context.Background()
			e, done, err := server(ctx, true)
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			b.ResetTimer()
			rate, err := diskLimit(ctx, e, b.N*per, per)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rate, "events/s")
		})
	}
}

// BenchmarkDurableTidemark is the durable row's tidemark side alone (for
// -cpuprofile): 16 clients, SyncAlways, coalesced group commit.
func BenchmarkDurableTidemark(b *testing.B) {
	ctx := context.Background()
	e, done, err := coalescing(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	cs, stop, err := serveClients(e, benchClients)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	b.ResetTimer()
	rate, err := throughput(ctx, cs, max(b.N, benchClients), benchSnapshots, "dur")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rate, "ops/s")
}

// BenchmarkDurablePair is the durable row: tidemark and raw sync publishes
// in alternating rounds, b.N commands a side.
func BenchmarkDurablePair(b *testing.B) {
	tm, raw, group, err := durablePair(context.Background(), max(b.N, 4*benchClients))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(tm, "tidemark-ops/s")
	b.ReportMetric(raw, "raw-ops/s")
	b.ReportMetric(tm/raw, "ratio")
	b.ReportMetric(group, "cmds/msg")
}
