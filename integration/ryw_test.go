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
	"github.com/tidemark/tidemark/transport"
)

// member is a cluster member and its engine.
type member struct {
	*cluster.Member
	e *engine.Engine
}

// parts is cfg with e's parts.
func parts(e *engine.Engine, cfg cluster.Config) cluster.Config {
	cfg.Handler, cfg.Log, cfg.Proj, cfg.CatchUp = e, e.Log(), e.Projection(), e.CatchUp
	return cfg
}

// members makes each engine a cluster member, and returns them with the
// writer first, waiting (bounded) until one of them is the writer.
func members(t *testing.T, es []*engine.Engine) []member {
	t.Helper()
	return membersWith(t, es, cluster.Config{Logger: quiet()})
}

// membersWith is members with cfg.
func membersWith(t *testing.T, es []*engine.Engine, cfg cluster.Config) []member {
	t.Helper()
	var ms []member
	for _, e := range es {
		m, err := cluster.Join(t.Context(), parts(e, cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Leave(context.Background()) })
		ms = append(ms, member{m, e})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		for i, m := range ms {
			if on, _ := m.Writing(); on {
				out := []member{m}
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
	if got := f.e.Projection().Seq(); got < r.Seq {
		t.Fatalf("the follower replied before applying its write: at %d, stored at %d", got, r.Seq)
	}
	if on, _ := f.Writing(); on {
		t.Fatal("the follower became the writer")
	}
}

// TestWritesReachTheWriter: a member serves the queries always and the
// commands that write only while it is the writer (cluster.Member.Serve),
// so a client's write reaches the writer directly, never forwarded through
// another member. When the writer leaves, the next one serves them, and a
// client's write is answered once it does (the client asks again while
// no member serves the kind).
func TestWritesReachTheWriter(t *testing.T) {
	ms := members(t, replicas(t, 2))
	w, f := ms[0], ms[1]
	ctx := t.Context()
	svcs := make([]*cluster.Service, len(ms))
	for i, m := range ms {
		s, err := m.Serve(m.e.Log().JetStream().Conn(), transport.ServiceConfig{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop() })
		svcs[i] = s
	}
	serves := func(s *cluster.Service, kind string) bool {
		for _, info := range s.Info() {
			for _, e := range info.Endpoints {
				if e.Name == kind {
					return true
				}
			}
		}
		return false
	}
	awaitServing := func(s *cluster.Service) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !serves(s, commands.KindRegisterSnapshot); {
			if time.Now().After(deadline) {
				t.Fatal("the writer does not serve the commands that write")
			}
			time.Sleep(10 * time.Millisecond) // the member starts them on its own goroutine
		}
	}
	awaitServing(svcs[0])
	for _, kind := range []string{commands.KindRegisterSnapshot, commands.KindCompleteIntervals, commands.KindPromote, commands.KindCheckWork} {
		if serves(svcs[1], kind) {
			t.Errorf("the follower serves %s", kind)
		}
	}
	for _, i := range []int{0, 1} {
		if !serves(svcs[i], commands.KindStatus) || !serves(svcs[i], commands.KindOpenRepairs) {
			t.Errorf("member %d does not serve the queries", i)
		}
	}

	client := transport.NewClient(connect(t, w.e))
	r, err := client.Do(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "a", Version: "v1", Cron: "@hourly", Start: t0})
	if err != nil || !r.Accepted {
		t.Fatalf("a write: %v %+v", err, r)
	}

	// The writer leaves: the follower takes over and serves the writes.
	w.Leave(ctx)
	if err := f.AwaitWriting(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = client.Do(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "b", Version: "v1", Cron: "@hourly", Start: t0})
	if err != nil || !r.Accepted {
		t.Fatalf("a write after the writer left: %v %+v", err, r)
	}
	awaitServing(svcs[1])
}

// TestWritesServedThroughTheGrace: a member that loses the writer lease
// goes on serving the commands that write for its grace
// (cluster.Config.WritesGrace), forwarding them to the new writer, so
// that a write routed to it before the new writer's subscription is known
// everywhere is still answered. Here the new writer runs no command
// service, so only the old writer's can answer.
func TestWritesServedThroughTheGrace(t *testing.T) {
	ms := membersWith(t, replicas(t, 2), cluster.Config{Logger: quiet(), WritesGrace: time.Minute})
	w, f := ms[0], ms[1]
	ctx := t.Context()
	old, err := w.Serve(w.e.Log().JetStream().Conn(), transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Stop() })
	client := transport.NewClient(connect(t, w.e))
	// Served once the writer's member has started its write service.
	if r, err := client.Do(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "a", Version: "v1", Cron: "@hourly", Start: t0}); err != nil || !r.Accepted {
		t.Fatalf("a write: %v %+v", err, r)
	}
	w.Leave(ctx)
	if err := f.AwaitWriting(ctx); err != nil {
		t.Fatal(err)
	}
	client.NoServiceWait = 0 // no second chance: the old writer's service answers, or nobody
	r, err := client.Do(ctx, &commands.RegisterSnapshot{Meta: meta(at(0)), Model: "b", Version: "v1", Cron: "@hourly", Start: t0})
	if err != nil || !r.Accepted {
		t.Fatalf("a write right after the writer lost the lease: %v %+v", err, r)
	}
	if got := w.e.Projection().Seq(); got < r.Seq {
		t.Fatalf("the old writer answered before applying the write: at %d, stored at %d", got, r.Seq)
	}
}
