package bench

import (
	"context"
	"testing"
)

// The figures are benchmarks too (each row has one): go test -bench . ./bench
func BenchmarkPromotionCheck(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := promotionFigure(context.Background(), sizes{candidates: 200}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := memoryFigure(context.Background(), sizes{memSnapshots: 500}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestQuickFigures runs the cheap pure figures at tiny sizes: each must
// produce a finite, positive measurement.
func TestQuickFigures(t *testing.T) {
	for _, fn := range []func(context.Context, sizes) ([]Figure, error){promotionFigure, memoryFigure} {
		figs, err := fn(t.Context(), sizes{candidates: 20, memSnapshots: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range figs {
			if !(f.Tidemark > 0) || f.Ratio <= 0 || f.Name == "" || f.Goal == "" {
				t.Fatalf("figure %+v", f)
			}
		}
	}
}

func BenchmarkCommandPath(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := commandFigures(context.Background(), sizes{commands: 10_000, latency: 100}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDurable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := durableFigure(context.Background(), sizes{durable: 1_000}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay backs the replay and restart figures.
func BenchmarkReplay(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := replayFigures(context.Background(), sizes{replayEvents: 20_000}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGrowth(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := growthFigure(context.Background(), sizes{commands: 4_000, growth: []int{1_000, 10_000}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCluster runs the cluster experiment at the goal's rate (one
// run per iteration; -benchtime=1x).
func BenchmarkCluster(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res, err := RunCluster(b.Context(), ClusterOptions{Rate: clusterRate, Duration: clusterQuickLoad, Senders: 64, Promotions: 20, Failover: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Rate, "completions/s")
		b.ReportMetric(float64(res.DecisionP99)/1e6, "p99-decision-ms")
		b.ReportMetric(float64(res.Failover)/1e6, "failover-ms")
		b.Logf("%+v", *res)
	}
}

// BenchmarkClusterCrash is BenchmarkCluster with the writer's member
// crashing (its lease is not given up).
func BenchmarkClusterCrash(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res, err := RunCluster(b.Context(), ClusterOptions{Rate: clusterRate, Duration: clusterQuickLoad, Senders: 64, Promotions: 5, Failover: true, Crash: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Failover)/1e6, "failover-ms")
		b.Logf("%+v", *res)
	}
}
