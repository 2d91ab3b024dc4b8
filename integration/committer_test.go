package integration

import (
	"context"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events/interval"
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
