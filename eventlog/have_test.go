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
