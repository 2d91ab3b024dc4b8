package live

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/projections"
)

func memLog(t *testing.T) *eventlog.Log {
	t.Helper()
	node, err := natsnode.Start(t.Context(), natsnode.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	js, err := jetstream.New(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	l, err := eventlog.Ensure(t.Context(), js, eventlog.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The projection folds what Tail delivers, applies its owner's next event
// at once (and only the next), ignores it when Tail delivers it again, and
// Run ends without error with its context.
func TestProjection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	l := memLog(t)
	ids := events.NewIDSource()
	appendEnv := func(env, cmd string) (uint64, events.Event) {
		t.Helper()
		ev := events.New(ids, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), events.EnvironmentFinalized{Env: env, Plan: "p1", Generation: 1})
		ev.Causation = cmd
		seq, err := l.Append(ctx, eventlog.MsgID("finalize", cmd, false), []events.Event{ev}, events.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return seq, ev
	}
	appendEnv("prod", "c1")
	appendEnv("qa", "c2")

	p := New(l.Reader(), nil, nil)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	if err := p.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if ok := p.ApplyOwn(4, events.Event{}); ok {
		t.Fatal("applied an event out of turn")
	}
	seq, ev := appendEnv("dev", "c3")
	_ = p.ApplyOwn(seq, ev) // false only when Tail was first
	if err := p.Await(ctx, func(st *projections.State) bool { return st.Env("dev").Finalized == "p1" }); err != nil {
		t.Fatal(err)
	}
	appendEnv("staging", "c4")
	if err := p.WaitFor(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Seq != 4 || st.Folded != 4 {
		t.Fatalf("stats %+v, want seq 4, 4 folded (each event once)", st)
	}
	stop()
	if err := <-done; err != nil || p.Err() != nil {
		t.Fatalf("run: %v, err %v", err, p.Err())
	}
}

// Own events are applied only in stream order, each when it is the very
// next; an event already applied is not applied again; Run skips what was
// applied.
func TestApplyOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	l := memLog(t)
	ids := events.NewIDSource()
	var evs []events.Event
	for i, env := range []string{"a", "b", "c", "d"} {
		ev := events.New(ids, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), events.EnvironmentFinalized{Env: env, Plan: "p1", Generation: 1})
		ev.Causation = env
		if seq, err := l.Append(ctx, eventlog.MsgID("finalize", env, false), []events.Event{ev}, events.Expect{}); err != nil || seq != uint64(i+1) {
			t.Fatalf("append %s: seq %d, %v", env, seq, err)
		}
		evs = append(evs, ev)
	}
	p := New(l.Reader(), nil, nil) // not running: only the owner applies
	if p.ApplyOwn(2, evs[1]) || p.Seq() != 0 {
		t.Fatalf("applied out of turn: seq %d", p.Seq())
	}
	for i, ev := range evs {
		if !p.ApplyOwn(uint64(i+1), ev) || p.Seq() != uint64(i+1) {
			t.Fatalf("the next event %d not applied at once: seq %d", i+1, p.Seq())
		}
	}
	if p.ApplyOwn(3, evs[2]) || p.ApplyOwn(4, evs[3]) {
		t.Fatal("an applied event applied again")
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	fifth := events.New(ids, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), events.EnvironmentFinalized{Env: "e", Plan: "p1", Generation: 1})
	if _, err := l.Append(ctx, eventlog.MsgID("finalize", "e", false), []events.Event{fifth}, events.Expect{}); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, 5); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.Read(func(st *projections.State) {
		for _, env := range []string{"a", "b", "c", "d", "e"} {
			if st.Env(env).Finalized != "p1" {
				t.Errorf("env %s not folded", env)
			}
		}
	})
	if st := p.Stats(); st.Seq != 5 || st.Folded != 5 {
		t.Fatalf("stats %+v, want seq 5, 5 folded (each event once)", st)
	}
}
