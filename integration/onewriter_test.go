package integration

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/bench"
)

// TestOneWriter: a 3-member cluster (R3 stream, one writer) under a steady
// completion load through all members decides every promotion (accepted
// or rejected, never giving up), answers read-your-writes on another
// member right after an acknowledgement, elects a new writer when the
// writer's member stops, and loses nothing it acknowledged. The load is
// bounded (a few seconds, a fixed rate) and stops by itself; the timings
// the goals set (rate, decision p99, failover) are bench rows, not
// asserted here.
func TestOneWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster under load")
	}
	for _, crash := range []bool{false, true} {
		name := "stop"
		if crash {
			name = "crash" // the writer never gives the lease up
		}
		t.Run(name, func(t *testing.T) {
			res, err := bench.RunCluster(t.Context(), bench.ClusterOptions{Rate: 300, Duration: 6 * time.Second, Senders: 12, Promotions: 8,
				Failover: true, Crash: crash, Logger: clusterLog("cluster")})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d of %d completions acknowledged (%.0f/s), %d promotions decided (p50 %s, p99 %s), %d reads, failover %s→%s in %s, %d events",
				res.Acked, res.Offered, res.Rate, res.Decided, res.DecisionP50, res.DecisionP99, res.ReadChecks, res.OldWriter, res.NewWriter, res.Failover, res.Events)
			if len(res.Undecided) > 0 {
				t.Errorf("promotions without a decision: %v", res.Undecided)
			}
			if res.Decided != 8 {
				t.Errorf("%d of 8 promotions decided", res.Decided)
			}
			if len(res.ReadMisses) > 0 {
				t.Errorf("a member did not see what the client was told exists: %v", res.ReadMisses)
			}
			if res.NewWriter == "" || res.NewWriter == res.OldWriter {
				t.Errorf("no new writer after stopping %s", res.OldWriter)
			}
			if len(res.Lost) > 0 {
				t.Errorf("acknowledged commands not stored exactly once: %v", res.Lost[:min(len(res.Lost), 10)])
			}
			if res.Acked == 0 {
				t.Error("no completion acknowledged")
			}
		})
	}
}
