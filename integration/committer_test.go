package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/replay"
)

// A coalescing engine's completions go through its committer; once the
// engine is closed, a completion is answered unavailable (ErrStopped)
// instead of waiting for a committer that has exited.
func TestCommitterClosed(t *testing.T) {
	e := open(t, engine.Config{Coalesce: true})
	ctx := t.Context()
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "c", Version: "v1", Cron: "@hourly", Start: t0}))
	complete := func(h int) commands.Command {
		return &commands.CompleteIntervals{Meta: meta(at(10)), Model: "c", Version: "v1", Ranges: []interval.Range{rng(h, h+1)}}
	}
	if r := must(t, e.Handle(ctx, complete(0))); r.Seq == 0 {
		t.Fatalf("completion before close: %+v", r)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan commands.Reply, 1)
	go func() { got <- e.Handle(ctx, complete(1)) }()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case r := <-got:
		if r.Accepted || r.Code != commands.CodeUnavailable {
			t.Fatalf("completion after close: %+v, want unavailable", r)
		}
	case <-dctx.Done():
		t.Fatal("a completion after close got no reply")
	}
}

// TestCommitterSeparateMessages: a non-coalescing engine's committer
// stores each group's completions as separate pipelined messages. Under
// 24 concurrent clients, each command sent twice (a retry racing the
// original), every command is stored exactly once, both of its replies
// carry the sequence its event is stored at, and each reply comes only
// once the live projection holds that event (read-your-writes).
func TestCommitterSeparateMessages(t *testing.T) {
	e := open(t, engine.Config{})
	ctx := t.Context()
	const snaps, hours, clients = 8, 30, 24
	for s := 0; s < snaps; s++ {
		must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "p", Version: fmt.Sprintf("v%d", s), Cron: "@hourly", Start: t0}))
	}
	var mu sync.Mutex
	answered := map[string][]uint64{} // command id → the seqs its replies name
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c / 2; i < snaps*hours; i += clients / 2 { // two clients send each command
				id := fmt.Sprintf("p-%d", i)
				cmd := &commands.CompleteIntervals{Meta: commands.Meta{ID: id, At: at(hours + 1)},
					Model: "p", Version: fmt.Sprintf("v%d", i%snaps), Ranges: []interval.Range{rng(i/snaps, i/snaps+1)}}
				r := e.Handle(ctx, cmd)
				if err := r.Err(); err != nil || r.Seq == 0 {
					errs <- fmt.Errorf("%s: %+v, %v", id, r, err)
					return
				}
				if seq := e.Projection().Seq(); seq < r.Seq {
					errs <- fmt.Errorf("%s answered at seq %d while the projection is at %d", id, r.Seq, seq)
					return
				}
				mu.Lock()
				answered[id] = append(answered[id], r.Seq)
				mu.Unlock()
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
	stored := map[string][]uint64{} // command id → where its events are
	perSeq := map[uint64]int{}
	for _, r := range recs {
		perSeq[r.Seq]++
		if _, ok := r.Event.Payload.(events.IntervalsCompleted); ok {
			stored[r.Event.Causation] = append(stored[r.Event.Causation], r.Seq)
		}
	}
	if len(stored) != snaps*hours {
		t.Fatalf("%d completions stored, want %d", len(stored), snaps*hours)
	}
	for id, seqs := range stored {
		if len(seqs) != 1 {
			t.Fatalf("%s stored %d times, at %v", id, len(seqs), seqs)
		}
		if perSeq[seqs[0]] != 1 {
			t.Fatalf("%s stored in a group message at %d", id, seqs[0])
		}
		if got := answered[id]; len(got) != 2 || got[0] != seqs[0] || got[1] != seqs[0] {
			t.Fatalf("%s stored at %d, answered with %v", id, seqs[0], got)
		}
	}
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var groups, commandsInGroups uint64
	for _, mf := range mfs {
		if mf.GetName() == "tidemark_group_commit_commands" {
			h := mf.GetMetric()[0].GetHistogram()
			groups, commandsInGroups = h.GetSampleCount(), uint64(h.GetSampleSum())
		}
	}
	if commandsInGroups <= groups {
		t.Fatalf("%d groups of %d commands: no group of several was stored", groups, commandsInGroups)
	}
	rebuilt, _ := json.Marshal(replay.Fold(recs))
	if live := stateJSON(t, e); live != string(rebuilt) {
		t.Fatal("the live projection differs from a fold of the stream")
	}
}
