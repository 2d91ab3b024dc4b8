package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/policy"
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
// produce a finite, positive measurement and limit, and its cost growth
// at ten times the size.
func TestQuickFigures(t *testing.T) {
	for _, fn := range []func(context.Context, sizes) ([]Figure, error){promotionFigure, memoryFigure} {
		figs, err := fn(t.Context(), sizes{candidates: 20, memSnapshots: 100, tenfold: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range figs {
			if !(f.Tidemark > 0) || !(f.Limit > 0) || f.Ratio <= 0 || f.Name == "" || f.Goal == "" {
				t.Fatalf("figure %+v", f)
			}
			if s := f.Scale; s == nil || s.ScaledSize != 10*s.Size || !(s.ScaledTidemark > 0) || math.IsNaN(s.Slope) || math.IsInf(s.Slope, 0) {
				t.Fatalf("figure %s: scale %+v", f.Name, s)
			}
		}
	}
}

// The slope is the change of the cost per unit of work per tenfold size.
func TestScaled(t *testing.T) {
	for _, c := range []struct {
		size, big     int
		cost, bigCost float64
		slope         float64
		flat          bool
	}{
		{1000, 10_000, 10, 10, 0, true},
		{1000, 10_000, 10, 12, 0.2, true},
		{1000, 10_000, 10, 20, 1, false},
		{1000, 100_000, 10, 40, 1, false}, // twice as dear per decade
	} {
		s := scaled(c.size, c.big, 1, 2, 0, c.cost, c.bigCost)
		if math.Abs(s.Slope-c.slope) > 1e-9 || s.Flat != c.flat || s.Size != c.size || s.ScaledSize != c.big || s.ScaledTidemark != 2 {
			t.Errorf("%+v: got %+v", c, *s)
		}
	}
}

// A figure's JSON carries the fields scripts read.
func TestFigureJSON(t *testing.T) {
	b, err := json.Marshal(Figure{Name: "x", Tidemark: 1, Limit: 2, Ratio: .5, Goal: "g", Pass: true, Scale: &Scale{Size: 1, ScaledSize: 10}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "tidemark", "limit", "unit", "ratio", "goal", "pass", "scale"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b)
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

// BenchmarkPromotionScale is the promotion row's cost growth: one plan
// evaluation at 1,000 and 10,000 candidates (per candidate: ns/op ÷ n).
func BenchmarkPromotionScale(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, plan := promotionPlan(10, n)
			for b.Loop() {
				policy.Evaluate(st, plan)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/candidate")
		})
	}
}

// BenchmarkClusterThroughput is the cluster's command throughput row:
// tidemark on a three-member R3 cluster and the transport limit on one of
// its own, in alternating rounds, b.N commands a side.
func BenchmarkClusterThroughput(b *testing.B) {
	res, err := clusterThroughput(b.Context(), max(b.N, 4*benchClients))
	if err != nil {
		b.Fatal(err)
	}
	res.bare.report(b)
	b.ReportMetric(res.readers.limit, "limit-with-readers-ops/s")
	b.ReportMetric(res.readers.tidemark/res.readers.limit, "ratio-with-readers")
	b.Log(res.where)
}

// Options.Only names groups of rows (Groups); a name that is none fails
// before anything is measured.
func TestOnlyGroups(t *testing.T) {
	if !slices.Contains(Groups(), "backfill") {
		t.Fatalf("groups %v lack backfill", Groups())
	}
	ran := false
	_, err := Run(t.Context(), Options{Quick: true, Only: []string{"backfill", "nosuch"}, Progress: func(string) { ran = true }})
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) || ran {
		t.Fatalf("Only naming no group: %v (measured: %v)", err, ran)
	}
}
