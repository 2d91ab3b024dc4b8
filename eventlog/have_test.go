package eventlog

import (
	"errors"
	"testing"

	"github.com/tidemark/tidemark/events"
)

// A Tail that is told the caller has an event delivers its entry without
// decoding it, and decodes the others.
func TestTailWithHave(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	for i, cmd := range []string{"c1", "c2", "c3"} {
		if seq, err := l.Append(ctx, MsgID("finalize", cmd, false), []events.Event{finalized(ids, "prod", "p"+cmd, cmd)}, events.Expect{}); err != nil || seq != uint64(i+1) {
			t.Fatalf("append %s: seq %d, %v", cmd, seq, err)
		}
	}
	stop := errors.New("stop")
	var got []Entry
	err := l.Reader().WithHave(func(seq uint64) bool { return seq <= 2 }).Tail(ctx, 1, func(e Entry) error {
		got = append(got, e)
		if e.Seq == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(got) != 3 {
		t.Fatalf("tail: %v, %d entries", err, len(got))
	}
	for _, e := range got[:2] {
		if e.Event.Payload != nil || e.Err != nil || e.Subject != events.EnvSubject("prod") {
			t.Fatalf("entry %d the caller has was decoded or lost its subject: %+v", e.Seq, e)
		}
	}
	if got[2].Event.Causation != "c3" || got[2].Err != nil {
		t.Fatalf("entry 3 not decoded: %+v", got[2])
	}
}

// A group message the caller has is one entry, neither split nor decoded;
// one it does not have is expanded into its events.
func TestTailWithHaveGroup(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	for i, g := range [][]string{{"a1", "a2"}, {"b1", "b2", "b3"}} {
		var evs []events.Event
		for _, cmd := range g {
			evs = append(evs, finalized(ids, "env"+cmd, "p"+cmd, cmd))
		}
		if _, err := l.AppendGroup(ctx, evs, GroupCondition{LastSeq: uint64(i)}); err != nil {
			t.Fatalf("group %d: %v", i, err)
		}
	}
	stop := errors.New("stop")
	var got []Entry
	err := l.Reader().WithHave(func(seq uint64) bool { return seq <= 1 }).Tail(ctx, 1, func(e Entry) error {
		got = append(got, e)
		if e.Seq == 2 && e.Index == e.Count-1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(got) != 4 {
		t.Fatalf("tail: %v, %d entries, want 1 for the group held and 3 for the other", err, len(got))
	}
	if e := got[0]; e.Seq != 1 || e.Subject != GroupSubject || e.Count != 0 || e.Event.Payload != nil || e.Err != nil {
		t.Fatalf("the group the caller has was expanded or decoded: %+v", e)
	}
	for i, e := range got[1:] {
		if e.Seq != 2 || e.Index != i || e.Count != 3 || e.Err != nil || e.Event.Causation != []string{"b1", "b2", "b3"}[i] {
			t.Fatalf("event %d of the group not held: %+v", i, e)
		}
	}
}
