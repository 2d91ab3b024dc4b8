package eventlog

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
)

// An append without a message id (the engine's group path) is refused
// unless it carries a whole-stream condition; with one it is stored with
// no Nats-Msg-Id, and a second copy of it fails its condition: stored
// once, without the dedupe window.
func TestAppendAsyncWithoutID(t *testing.T) {
	ctx := t.Context()
	l, js := memLog(t)
	ids := events.NewIDSource()
	prod := events.EnvSubject("prod")
	ev := finalized(ids, "prod", "p1", "c1")

	if f, err := l.AppendAsync("", ev, events.ExpectSubjects(nil, prod)); !errors.Is(err, ErrUnfenced) {
		if f != nil {
			<-f.Ok()
		}
		t.Fatalf("no id, no whole-stream condition: %v, want ErrUnfenced", err)
	}
	exp := events.ExpectStream(0)
	exp.Subjects = map[string]uint64{prod: 0}
	for copy := 0; copy < 2; copy++ {
		f, err := l.AppendAsync("", ev, exp)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ack := <-f.Ok():
			if copy > 0 {
				t.Fatalf("a second copy stored at seq %d (duplicate %v)", ack.Sequence, ack.Duplicate)
			}
			if ack.Sequence != 1 || ack.Duplicate {
				t.Fatalf("first copy: %+v", ack)
			}
		case err := <-f.Err():
			if copy == 0 || !errors.Is(MapErr(err), ErrConflict) {
				t.Fatalf("copy %d: %v", copy, err)
			}
		}
	}
	s, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if id := raw.Header.Get(jetstream.MsgIDHeader); id != "" {
		t.Fatalf("stored with message id %q", id)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %v messages (%v), want 1", info, err)
	}
}
