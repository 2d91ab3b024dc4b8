package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/cluster"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// members makes each engine a cluster member, and returns them with the
// writer first, waiting (bounded) until one of them is the writer.
func members(t *testing.T, es []*engine.Engine) []*cluster.Member {
	t.Helper()
	var ms []*cluster.Member
	for _, e := range es {
		m, err := cluster.Join(t.Context(), e, cluster.Config{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Leave(context.Background()) })
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		for i, m := range ms {
			if on, _ := m.Writing(); on {
				out := []*cluster.Member{m}
				out = append(out, ms[:i]...)
				return append(out, ms[i+1:]...)
			}
		}
		_, changed := ms[0].Writing()
		select {
		case <-ctx.Done():
			t.Fatal("no writer")
		case <-changed:
		case <-time.After(50 * time.Millisecond): // another engine's change
		}
	}
}

// TestReadYourWrites: right after the writer acknowledged thousands of
// events, a follower asked with the last acknowledged sequence as
// after_seq answers from a projection that has applied it; a sequence the
// stream does not hold is refused naming after_seq; a write sent to a
// follower is carried out by the writer and answered once the follower has
// applied it.
func TestReadYourWrites(t *testing.T) {
	ms := members(t, replicas(t, 2))
	w, f := ms[0], ms[1]
	ctx := t.Context()
	const snaps, each = 20, 150
	for s := 0; s < snaps; s++ {
		must(t, w.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: fmt.Sprintf("m%d", s), Version: "v1", Cron: "@hourly", Start: t0}))
	}
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	for s := 0; s < snaps; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := 0; h < each; h++ {
				r := w.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(10_000)), Model: fmt.Sprintf("m%d", s), Version: "v1",
					Ranges: []interval.Range{rng(h, h+1)}, RunKind: events.RunScheduled})
				if err := r.Err(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last = max(last, r.Seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r := f.Handle(ctx, &commands.Status{Meta: commands.Meta{AfterSeq: last}})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Seq < last {
		t.Fatalf("the follower answered at seq %d, before the acknowledged %d", r.Seq, last)
	}
	refused(t, "after_seq beyond the stream", f.Handle(ctx, &commands.Status{Meta: commands.Meta{AfterSeq: last + 1000}}), commands.CodeInvalid, "after_seq")

	// A write sent to the follower: carried out by the writer, answered
	// once the follower has applied it.
	r = must(t, f.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "late", Version: "v1", Cron: "@hourly", Start: t0}))
	if got := f.Engine().Projection().Seq(); got < r.Seq {
		t.Fatalf("the follower replied before applying its write: at %d, stored at %d", got, r.Seq)
	}
	if on, _ := f.Writing(); on {
		t.Fatal("the follower became the writer")
	}
}
