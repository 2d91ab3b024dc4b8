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
func TestGroupCommit(t *testing.T) { groupCommit(t, engine.Config{}) }

// TestGroupCommitCoalesced is TestGroupCommit with groups stored as group
// messages (engine.Config.Coalesce): some message holds several commands'
// events, each addressable; then a plan over the grouped snapshots is
// promoted, and replay re-verifies every decision and the audit lists
// every event at its address.
func TestGroupCommitCoalesced(t *testing.T) { groupCommit(t, engine.Config{Coalesce: true}) }

func groupCommit(t *testing.T, cfg engine.Config) {
	e := open(t, cfg)
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
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
	recs, err := jstest.ReadLog(ctx, e.Log().JetStream())
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
	e.Projection().Read(func(st *projections.State) {
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
	e.Projection().Read(func(st *projections.State) { live, _ = json.Marshal(st) })
	if string(live) != string(rebuilt) {
		t.Fatal("the live projection differs from a fold of the stream")
	}
	if e.Stats().Folded == 0 {
		t.Fatal("no events folded")
	}
	if cfg.Coalesce {
		coalescedChecks(t, e, recs)
	}
}

// coalescedChecks: the stream holds group messages of several events,
// each at its own address; a plan over the grouped snapshots promotes,
// and replay and audit over the log reproduce and list everything.
func coalescedChecks(t *testing.T, e *engine.Engine, recs []events.Record) {
	ctx := t.Context()
	type addr struct {
		seq   uint64
		index int
	}
	seen := map[addr]bool{}
	groups := 0
	for _, r := range recs {
		a := addr{r.Seq, r.Index}
		if seen[a] {
			t.Fatalf("two events at %d.%d", a.seq, a.index)
		}
		seen[a] = true
		if r.Count > 1 && r.Index == 0 {
			groups++
		}
	}
	if groups == 0 {
		t.Fatal("no group message of several events was stored")
	}
	pr := must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(61)), Plan: "gp", Env: "prod", Versions: map[string]string{"g": "v0"}}))
	for _, c := range pr.Plan.Candidates {
		if len(c.Backfill) > 0 {
			must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(61)), Model: c.Model, Version: "v0", Ranges: c.Backfill, RunKind: "backfill"}))
		}
	}
	dec := must(t, e.Handle(ctx, &commands.Promote{Meta: meta(at(61)), Plan: "gp"}))
	if dec.Decision == nil {
		t.Fatalf("no decision: %+v", dec)
	}
	recs, err := jstest.ReadLog(ctx, e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	decisions := 0
	for _, r := range recs {
		if _, ok := r.Event.Payload.(events.PromotionDecided); ok {
			decisions++
		}
	}
	if decisions == 0 {
		t.Fatal("no decision recorded")
	}
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
	rows := replay.Audit(recs, replay.Filter{})
	if len(rows) != len(recs) {
		t.Fatalf("audit lists %d rows for %d events", len(rows), len(recs))
	}
	for i, r := range rows {
		if r.Seq != recs[i].Seq || r.Index != recs[i].Index {
			t.Fatalf("audit row %d at %d.%d, event at %d.%d", i, r.Seq, r.Index, recs[i].Seq, recs[i].Index)
		}
	}
	rebuilt, _ := json.Marshal(replay.Fold(recs))
	if live := stateJSON(t, e); live != string(rebuilt) {
		t.Fatal("the live projection differs from a fold of the stream")
	}
}
