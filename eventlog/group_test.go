package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
)

// A group message stores several commands' events at one sequence; every
// reader (Read, Get, GetAll, Tail with and without subject filters) gives
// each event its address (seq, index of count), in order.
func TestGroupAddresses(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	if _, err := l.Append(ctx, MsgID("finalize", "c0", false), []events.Event{finalized(ids, "prod", "p0", "c0")}, events.ExpectStream(0)); err != nil {
		t.Fatal(err)
	}
	group := []events.Event{finalized(ids, "prod", "p1", "c1"), finalized(ids, "qa", "p2", "c2"), finalized(ids, "prod", "p3", "c3")}
	seq, err := l.AppendGroup(ctx, group, GroupCondition{LastSeq: 1})
	if err != nil || seq != 2 {
		t.Fatalf("group: seq %d, %v", seq, err)
	}
	if _, err := l.Append(ctx, MsgID("finalize", "c4", false), []events.Event{finalized(ids, "qa", "p4", "c4")}, events.ExpectStream(2)); err != nil {
		t.Fatal(err)
	}
	type addr struct {
		seq          uint64
		index, count int
		id, subject  string
	}
	want := []addr{{1, 0, 0, "", events.EnvSubject("prod")}}
	for i, ev := range group {
		want = append(want, addr{2, i, 3, ev.ID, ev.Payload.Subject()})
	}
	want = append(want, addr{3, 0, 0, "", events.EnvSubject("qa")})
	of := func(r events.Record) addr {
		if r.Err != nil {
			t.Fatalf("record at %d.%d: %v", r.Seq, r.Index, r.Err)
		}
		a := addr{r.Seq, r.Index, r.Count, r.Event.ID, r.Subject}
		if r.Count == 0 {
			a.id = ""
		}
		return a
	}
	recs, err := l.Reader().Read(ctx, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []addr
	for _, r := range recs {
		got = append(got, of(r))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Read:\n got %v\nwant %v", got, want)
	}
	all, err := l.Reader().GetAll(ctx, 2)
	if err != nil || len(all) != 3 || of(all[1]) != want[2] {
		t.Fatalf("GetAll(2) = %v, %v", all, err)
	}
	last, err := l.Reader().Get(ctx, 2)
	if err != nil || of(last) != want[3] {
		t.Fatalf("Get(2) = %v, %v; want the group's last event", last, err)
	}
	tail := func(subjects ...string) []addr {
		var out []addr
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done := errors.New("done")
		err := l.Reader().Tail(tctx, 1, func(e Entry) error {
			out = append(out, of(e.Record))
			if e.Count > 0 && (e.Batch != e.Index+1 || e.BatchLen != e.Count) {
				t.Errorf("entry %d.%d: batch %d/%d", e.Seq, e.Index, e.Batch, e.BatchLen)
			}
			if e.Seq == 3 {
				return done
			}
			return nil
		}, subjects...)
		if !errors.Is(err, done) {
			t.Fatalf("tail %v: %v", subjects, err)
		}
		return out
	}
	if got := tail(); !slices.Equal(got, want) {
		t.Fatalf("Tail:\n got %v\nwant %v", got, want)
	}
	var qa []addr
	for _, a := range want {
		if a.subject == events.EnvSubject("qa") {
			qa = append(qa, a)
		}
	}
	if got := tail(events.EnvSubject("qa")); !slices.Equal(got, qa) {
		t.Fatalf("Tail on qa:\n got %v\nwant %v", got, qa)
	}
}

// A group message whose condition is stale (the stream's last sequence)
// appends nothing.
func TestGroupStaleCondition(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	ev := func(c string) []events.Event {
		return []events.Event{finalized(ids, "prod", "p-"+c, c), finalized(ids, "qa", "p-"+c, c+"b")}
	}
	if _, err := l.AppendGroup(ctx, ev("c1"), GroupCondition{LastSeq: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendGroup(ctx, ev("c2"), GroupCondition{LastSeq: 0}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale sequence: %v, want ErrConflict", err)
	}
	if last, err := l.Reader().LastSeq(ctx); err != nil || last != 1 {
		t.Fatalf("last seq %d, %v: a stale group appended", last, err)
	}
	if seq, err := l.AppendGroup(ctx, ev("c3"), GroupCondition{LastSeq: 1}); err != nil || seq != 2 {
		t.Fatalf("current condition: seq %d, %v", seq, err)
	}
}

// PublishGroup and AwaitGroup are AppendGroup in two halves: the stored
// group's sequence, ErrConflict under a stale condition (nothing stored),
// an ack awaited by token (an earlier group's, whose wait ended, is
// skipped), ErrAmbiguous when none comes; Close drops the inbox.
func TestPublishGroupAwait(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	ev := func(c string) []events.Event { return []events.Event{finalized(ids, "prod", "p-"+c, c)} }
	first, err := l.PublishGroup(ev("c1"), GroupCondition{LastSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := l.AwaitGroup(ctx, first); err != nil || seq != 1 {
		t.Fatalf("first group: seq %d, %v", seq, err)
	}
	stale, err := l.PublishGroup(ev("c2"), GroupCondition{LastSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	current, err := l.PublishGroup(ev("c3"), GroupCondition{LastSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The stale group's ack comes first and is not the one awaited.
	if seq, err := l.AwaitGroup(ctx, current); err != nil || seq != 2 {
		t.Fatalf("awaiting the second of two groups: seq %d, %v (the first's ack taken for it?)", seq, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := l.AwaitGroup(short, stale); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("an ack already skipped: %v, want ErrAmbiguous", err)
	}
	conflict, err := l.PublishGroup(ev("c4"), GroupCondition{LastSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AwaitGroup(ctx, conflict); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale condition: %v, want ErrConflict", err)
	}
	if last, err := l.Reader().LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("last seq %d, %v: a stale group was stored", last, err)
	}
	if recs, err := l.Reader().GetAll(ctx, 2); err != nil || len(recs) != 1 || recs[0].Event.Causation != "c3" {
		t.Fatalf("seq 2 = %v, %v; want c3's group", recs, err)
	}
	sub := l.acks.sub
	l.Close()
	if sub.IsValid() {
		t.Fatal("Close left the acks' inbox subscribed")
	}
	if _, err := l.PublishGroup(ev("c5"), GroupCondition{LastSeq: 2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after Close: %v, want ErrClosed", err)
	}
	if last, err := l.Reader().LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("last seq %d, %v: a group was stored after Close, its ack unheard", last, err)
	}
}

// With no stream to store it, the server answers a group message with a
// 503 (no responders): the outcome is ErrAmbiguous, to be re-read, not a
// bare nats error.
func TestAwaitGroupNoStream(t *testing.T) {
	ctx := t.Context()
	l, js := memLog(t)
	if err := js.DeleteStream(ctx, events.StreamName); err != nil {
		t.Fatal(err)
	}
	ids := events.NewIDSource()
	token, err := l.PublishGroup([]events.Event{finalized(ids, "prod", "p-c1", "c1")}, GroupCondition{LastSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AwaitGroup(ctx, token); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("no stream: %v, want ErrAmbiguous", err)
	}
}

// A malformed group body is one record with ErrGroup (nothing allocated
// for a count or length it cannot hold); an undecodable event in a
// well-formed group is its own record with Err.
func TestGroupHostile(t *testing.T) {
	ids := events.NewIDSource()
	good, err := groupBody([]events.Event{finalized(ids, "prod", "p1", "c1")})
	if err != nil {
		t.Fatal(err)
	}
	huge := binary.AppendUvarint(nil, 1<<40)
	for name, body := range map[string][]byte{
		"empty":          nil,
		"zero events":    {0},
		"count too big":  huge,
		"length too big": append([]byte{1}, binary.AppendUvarint(nil, 1<<40)...),
		"trailing bytes": append(slices.Clone(good), 0),
		"truncated":      good[:len(good)-1],
	} {
		recs := Expand(7, GroupSubject, body)
		if len(recs) != 1 || !errors.Is(recs[0].Err, ErrGroup) || recs[0].Seq != 7 {
			t.Errorf("%s: %+v, want one record with ErrGroup", name, recs)
		}
	}
	junk := binary.AppendUvarint([]byte{2}, 3)
	junk = append(append(junk, "abc"...), good[1:]...)
	recs := Expand(8, GroupSubject, junk)
	if len(recs) != 2 || recs[0].Err == nil || recs[0].Subject != GroupSubject || recs[1].Err != nil || recs[1].Index != 1 || recs[1].Count != 2 {
		t.Fatalf("junk then an event: %+v", recs)
	}
	if _, err := groupBody(nil); err == nil {
		t.Error("an empty group encoded")
	}
}
