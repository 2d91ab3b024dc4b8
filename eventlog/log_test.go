package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
)

// memLog starts an in-process server and ensures a log in memory.
func memLog(t *testing.T) (*Log, jetstream.JetStream) {
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
	l, err := Ensure(t.Context(), js, Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	return l, js
}

func finalized(ids *events.IDSource, env, plan, cmd string) events.Event {
	ev := events.New(ids, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), events.EnvironmentFinalized{Env: env, Plan: plan, Generation: 1})
	ev.Causation, ev.Digest = cmd, "d-"+cmd
	return ev
}

// Append stores under its condition (a stale one is ErrConflict), a batch
// whole with its "i/n" marks; OpenReader creates nothing; Tail delivers in
// order from a sequence, filtered by subject, with the batch marks, and
// returns fn's error.
func TestAppendAndTail(t *testing.T) {
	ctx := t.Context()
	l, js := memLog(t)
	ids := events.NewIDSource()
	prod, qa := events.EnvSubject("prod"), events.EnvSubject("qa")

	seq, err := l.Append(ctx, MsgID("finalize", "c1", false), []events.Event{finalized(ids, "prod", "p1", "c1")}, events.ExpectSubjects(nil, prod))
	if err != nil || seq != 1 {
		t.Fatalf("first append: seq %d, %v", seq, err)
	}
	_, err = l.Append(ctx, MsgID("finalize", "c2", false), []events.Event{finalized(ids, "prod", "p2", "c2")}, events.ExpectSubjects(nil, prod))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale condition: %v, want ErrConflict", err)
	}
	batch := []events.Event{finalized(ids, "qa", "p3", "c3"), finalized(ids, "prod", "p3", "c3")}
	if seq, err = l.Append(ctx, MsgID("finalize", "c3", false), batch, events.ExpectStream(1)); err != nil || seq != 3 {
		t.Fatalf("batch: seq %d, %v", seq, err)
	}
	f, err := l.AppendAsync(MsgID("finalize", "c4", false), finalized(ids, "qa", "p4", "c4"), events.ExpectSubjects(map[string]uint64{qa: 2}, qa))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ack := <-f.Ok():
		if ack.Sequence != 4 {
			t.Fatalf("async append at %d, want 4", ack.Sequence)
		}
	case err := <-f.Err():
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("no ack")
	}

	r, err := OpenReader(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := r.Get(ctx, 2); err != nil || rec.Err != nil || rec.Subject != qa || rec.Event.Causation != "c3" {
		t.Fatalf("get 2: %+v, %v", rec, err)
	}
	stop := errors.New("stop")
	var got []Entry
	err = r.Tail(ctx, 2, func(e Entry) error {
		got = append(got, e)
		if e.Seq == 4 {
			return stop
		}
		return nil
	}, qa)
	if !errors.Is(err, stop) {
		t.Fatalf("tail returned %v, want fn's error", err)
	}
	if len(got) != 2 || got[0].Seq != 2 || got[0].Batch != 1 || got[0].BatchLen != 2 || got[0].Last() || got[1].Seq != 4 || !got[1].Last() {
		t.Fatalf("tail delivered %+v", got)
	}

	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := r.Tail(cctx, 5, func(Entry) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("tail at the end: %v, want the context's error", err)
	}
}

// OpenReader on a server without the stream fails and creates nothing.
func TestOpenReaderCreatesNothing(t *testing.T) {
	_, js := memLog(t)
	ctx := t.Context()
	if err := js.DeleteStream(ctx, events.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(ctx, js); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("open without a stream: %v", err)
	}
	if _, err := js.Stream(ctx, events.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the stream came back: %v", err)
	}
}
