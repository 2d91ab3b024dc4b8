package integration

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/transport"
)

// TestGroupCommit: 16 clients complete hours of 8 snapshots concurrently,
// every command sent twice (a retry racing the original), while another
// client invalidates and re-completes hours of a ninth snapshot (commands
// that must wait for the groups in flight). Completions are
// group-committed: each id is stored once, every hour is covered, groups
// of more than one happened, and replay re-verifies.
func TestGroupCommit(t *testing.T) {
	e := open(t, engine.Config{})
	svc, err := transport.Serve(e.Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	ctx := t.Context()
	const snaps, hours = 8, 60
	for s := 0; s <= snaps; s++ {
		must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "g", Version: fmt.Sprintf("v%d", s), Cron: "@hourly", Start: t0}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	other := transport.NewClient(connect(t, e))
	wg.Add(1)
	go func() { // the ninth snapshot: complete, invalidate, complete again
		defer wg.Done()
		version := fmt.Sprintf("v%d", snaps)
		for h := 0; h < hours; h++ {
			for k, c := range []commands.Command{
				&commands.CompleteIntervals{Meta: commands.Meta{At: at(hours + 1)}, Model: "g", Version: version, Ranges: []interval.Range{rng(h, h+1)}},
				&commands.InvalidateIntervals{Meta: commands.Meta{At: at(hours + 1)}, Model: "g", Version: version, Ranges: []interval.Range{rng(h, h+1)}},
				&commands.CompleteIntervals{Meta: commands.Meta{At: at(hours + 1)}, Model: "g", Version: version, Ranges: []interval.Range{rng(h, h+1)}},
			} {
				r, err := other.Do(ctx, c)
				if err == nil {
					err = r.Err()
				}
				if err != nil {
					errs <- fmt.Errorf("hour %d step %d: %w", h, k, err)
					return
				}
			}
		}
	}()
	for c := 0; c < 16; c++ {
		client := transport.NewClient(connect(t, e))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c / 2; i < snaps*hours; i += 8 { // two clients send each command
				h := i / snaps
				cmd := &commands.CompleteIntervals{Meta: commands.Meta{ID: fmt.Sprintf("g-%d", i), At: at(hours + 1)},
					Model: "g", Version: fmt.Sprintf("v%d", i%snaps), Ranges: []interval.Range{rng(h, h+1)}}
				r, err := client.Do(ctx, cmd)
				if err == nil {
					err = r.Err()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs, err := jstest.ReadLog(ctx, e.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range recs {
		if _, ok := r.Event.Payload.(events.IntervalsCompleted); ok {
			stored[r.Event.Causation]++
		}
	}
	if len(stored) != snaps*hours+2*hours {
		t.Fatalf("%d completions stored, want %d", len(stored), snaps*hours)
	}
	for id, n := range stored {
		if n != 1 {
			t.Fatalf("%s stored %d times", id, n)
		}
	}
	e.View(func(st *projections.State) {
		for s := 0; s <= snaps; s++ {
			if cov := st.SnapshotCoverage(fmt.Sprintf("g@v%d", s)); !cov.Equal(interval.NewSet(rng(0, hours))) {
				t.Errorf("g@v%d covers %v", s, cov)
			}
		}
	})
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	grouped := uint64(0)
	for _, mf := range mfs {
		if mf.GetName() == "tidemark_group_commit_commands" {
			grouped = mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	if grouped == 0 {
		t.Fatal("no completions were group-committed")
	}
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
	if got, want := replay.Fold(recs).Seq, lastSeq(t, e); got != want {
		t.Fatalf("fold at %d, stream at %d", got, want)
	}
	// The engine applies its own acknowledged events without waiting for
	// the consumer: the live state must still be exactly a fold of the
	// stored events.
	rebuilt, _ := json.Marshal(replay.Fold(recs))
	var live []byte
	e.View(func(st *projections.State) { live, _ = json.Marshal(st) })
	if string(live) != string(rebuilt) {
		t.Fatal("the live projection differs from a fold of the stream")
	}
	if e.Stats().Folded == 0 {
		t.Fatal("no events folded")
	}
}
