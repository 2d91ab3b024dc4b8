package eventlog

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
)

// streamOf starts an in-process server holding a TIDEMARK stream of n
// messages (with or without direct gets), the message at del deleted.
func streamOf(t *testing.T, n int, allowDirect bool, del uint64) (jetstream.JetStream, jetstream.Stream) {
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
	ctx := t.Context()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamName, Subjects: []string{events.SubjectAll}, AllowDirect: allowDirect})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		js.PublishAsync(fmt.Sprintf("%sx.%d", events.SubjectPrefix, i), []byte("not an event"))
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publish did not complete")
	}
	if del > 0 {
		if err := st.DeleteMsg(ctx, del); err != nil {
			t.Fatal(err)
		}
	}
	return js, st
}

// TestReadDirect: with direct gets, a read of more than a batch yields
// every stored message in order (skipping a deleted one), stops at AtSeq,
// and leaves no consumer; without them, the ordered consumer reads the same.
func TestReadDirect(t *testing.T) {
	const n = 2*directBatch + 100
	for _, direct := range []bool{true, false} {
		js, st := streamOf(t, n, direct, 7)
		r, err := OpenReader(t.Context(), js)
		if err != nil {
			t.Fatal(err)
		}
		for _, upTo := range []uint64{0, directBatch + 3, 7} {
			recs, err := r.Read(t.Context(), ReadOptions{AtSeq: upTo})
			// The messages are not tidemark events and 7 was deleted: the
			// read returns them all with the damage that names them.
			var dmg *Damage
			if !errors.As(err, &dmg) || len(dmg.Bad) != len(recs) || (upTo >= 7 || upTo == 0) != (len(dmg.Missing) == 1) {
				t.Fatalf("direct %v, up to %d: %v", direct, upTo, err)
			}
			want := uint64(n)
			if upTo != 0 {
				want = upTo
			}
			if len(recs) != int(want)-1 { // 7 is deleted
				t.Fatalf("direct %v, up to %d: %d records, want %d", direct, upTo, len(recs), want-1)
			}
			next := uint64(1)
			for _, r := range recs {
				if next == 7 {
					next++
				}
				if r.Seq != next || r.Subject != fmt.Sprintf("%sx.%d", events.SubjectPrefix, next) || r.Err == nil {
					t.Fatalf("direct %v: record %+v, want seq %d", direct, r, next)
				}
				next++
			}
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if direct && info.State.Consumers != 0 {
			t.Fatalf("a direct read left %d consumers", info.State.Consumers)
		}
	}
}
