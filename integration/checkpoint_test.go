package integration

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/checkpoint"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/replay"
)

func putCheckpoint(t *testing.T, e *engine.Engine, value []byte) {
	t.Helper()
	kv, err := e.Log().JetStream().KeyValue(t.Context(), eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "projections", value); err != nil {
		t.Fatal(err)
	}
}

func getCheckpoint(t *testing.T, e *engine.Engine) []byte {
	t.Helper()
	kv, err := e.Log().JetStream().KeyValue(t.Context(), eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(t.Context(), "projections")
	if err != nil {
		t.Fatal(err)
	}
	return entry.Value()
}

// TestCheckpoints: an engine that starts from a checkpoint folds only the
// events after it and ends with the same state as a full rebuild; a
// corrupted, foreign or outdated checkpoint is ignored and rebuilt.
func TestCheckpoints(t *testing.T) {
	url := jstest.Node(t).ClientURL() // a server with no engine on it
	ctx := t.Context()

	writer := open(t, engine.Config{CheckpointEvery: 1_000_000}, dial(t, url))
	deploy(t, writer, "prod", "d1", "v1", at(6))
	if err := writer.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	checkpointed := writer.Stats().Seq
	for h := 7; h <= 9; h++ {
		must(t, writer.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(h)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(h-1, h)}}))
	}
	last := writer.Stats().Seq
	want := stateJSON(t, writer)
	good := getCheckpoint(t, writer)

	fromCheckpoint := open(t, engine.Config{}, dial(t, url))
	st := fromCheckpoint.Stats()
	if st.CheckpointSeq != checkpointed || st.Folded != last-checkpointed || st.CheckpointRejected != "" {
		t.Fatalf("from checkpoint at %d (stream at %d): %+v", checkpointed, last, st)
	}
	if got := stateJSON(t, fromCheckpoint); got != want {
		t.Fatalf("state from checkpoint differs:\n got  %s\n want %s", got, want)
	}

	flip := append([]byte(nil), good...)
	flip[len(flip)-5] ^= 0xff
	outdated := []byte(`{"format":0,"schema":1,"seq":3}` + "\n")
	for name, value := range map[string][]byte{
		"corrupted state": flip,
		"garbage":         []byte("not a checkpoint"),
		"outdated format": outdated,
		"truncated":       good[:len(good)/2],
	} {
		putCheckpoint(t, writer, value)
		rebuilt := open(t, engine.Config{}, dial(t, url))
		st := rebuilt.Stats()
		if st.CheckpointSeq != 0 || st.Folded != last || st.CheckpointRejected == "" {
			t.Errorf("%s: %+v", name, st)
		}
		if got := stateJSON(t, rebuilt); got != want {
			t.Errorf("%s: rebuilt state differs", name)
		}
		rebuilt.Close(ctx)
	}

	// A checkpoint of another stream: the event at its sequence differs.
	// No engine may serve the stream it loses: close them (each writes
	// its checkpoint), then put back the good one.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fromCheckpoint.Close(ctx)
	writer.Close(ctx)
	kv, err := js.KeyValue(ctx, eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "projections", good); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "TIDEMARK"); err != nil {
		t.Fatal(err)
	}
	fresh := open(t, engine.Config{CheckpointEvery: -1}, dial(t, url))
	deploy(t, fresh, "prod", "d1", "v1", at(6))
	deploy(t, fresh, "qa", "d2", "v1", at(6))
	fresh.Close(ctx)
	again := open(t, engine.Config{}, dial(t, url))
	if st := again.Stats(); st.CheckpointRejected == "" || st.CheckpointSeq != 0 || st.Folded != st.Seq {
		t.Fatalf("foreign checkpoint used: %+v", st)
	}
}

// TestCheckpointWhen: while engine.Config.CheckpointWhen says no (a
// cluster member that is not the writer), the engine writes no checkpoint
// as it folds events; once it says yes, the next one due is written. One
// asked for (and Close's) is written either way.
func TestCheckpointWhen(t *testing.T) {
	url := jstest.Node(t).ClientURL()
	ctx := t.Context()
	var writer atomic.Bool
	e := open(t, engine.Config{CheckpointEvery: 2, CheckpointWhen: writer.Load}, dial(t, url))
	deploy(t, e, "prod", "d1", "v1", at(6))
	kv, err := e.Log().JetStream().KeyValue(ctx, eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "projections"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a checkpoint was written while CheckpointWhen said no: %v", err)
	}
	writer.Store(true)
	for h := 7; h <= 9; h++ {
		must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(h)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(h-1, h)}}))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := kv.Get(ctx, "projections"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint written once CheckpointWhen said yes")
		}
		time.Sleep(10 * time.Millisecond) // the keeper writes after the fold
	}
	if err := kv.Purge(ctx, "projections"); err != nil {
		t.Fatal(err)
	}
	writer.Store(false)
	must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(10)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(9, 10)}}))
	if err := e.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "projections"); err != nil {
		t.Fatalf("the checkpoint asked for was not written: %v", err)
	}
}

// TestCheckpointKeepsNewer: members share one checkpoint key, and a
// member that is behind (one stopping, or not the writer) never replaces
// a newer checkpoint of the stream with its older state; a stored one it
// cannot confirm (another stream's: the event at its sequence is not the
// one it names) it does replace.
func TestCheckpointKeepsNewer(t *testing.T) {
	url := jstest.Node(t).ClientURL()
	ctx := t.Context()
	writer := open(t, engine.Config{CheckpointEvery: 1_000_000}, dial(t, url))
	deploy(t, writer, "prod", "d1", "v1", at(6))
	for h := 7; h <= 9; h++ {
		must(t, writer.Handle(ctx, &commands.CompleteIntervals{Meta: meta(at(h)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(h-1, h)}}))
	}
	if err := writer.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	js := writer.Log().JetStream()
	newest, err := checkpoint.StoredSeq(ctx, js)
	if err != nil || newest != writer.Stats().Seq {
		t.Fatalf("the writer's checkpoint: seq %d (%v), want %d", newest, err, writer.Stats().Seq)
	}
	kv, err := js.KeyValue(ctx, eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	r, err := eventlog.OpenReader(ctx, js)
	if err != nil {
		t.Fatal(err)
	}

	// A member two events behind: its state folded to newest-3, then the
	// event at newest-2 applied as it would be.
	behind := newest - 2
	recs, err := r.Read(ctx, eventlog.ReadOptions{AtSeq: behind})
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Seq != behind {
		t.Fatalf("read to %d: %d records, %v", behind, len(recs), err)
	}
	p := live.New(r, replay.Fold(recs[:len(recs)-1]), quiet())
	if !p.ApplyOwn(behind, recs[len(recs)-1].Event) {
		t.Fatal("the event at the member's sequence was not applied")
	}
	k := &checkpoint.Keeper{Proj: p, KV: kv, Reader: r}
	if err := k.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.StoredSeq(ctx, js); got != newest {
		t.Fatalf("a member at seq %d replaced the checkpoint at %d: stored %d", behind, newest, got)
	}
	if k.Seq != newest {
		t.Fatalf("keeper.Seq %d, want the stored %d (nothing more to write until then)", k.Seq, newest)
	}

	// A member that cannot read the stream (a replica behind, an
	// election) cannot tell: it keeps the newer one.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js2, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	blind, err := eventlog.OpenReader(ctx, js2)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	k = &checkpoint.Keeper{Proj: p, KV: kv, Reader: blind}
	if err := k.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.StoredSeq(ctx, js); got != newest {
		t.Fatalf("a member that could not read the stream replaced the checkpoint at %d: stored %d", newest, got)
	}

	// A newer one this build could not load (its state does not match its
	// hash): replaced.
	entry, err := kv.Get(ctx, checkpoint.Key)
	if err != nil {
		t.Fatal(err)
	}
	broken := bytes.Clone(entry.Value())
	broken[len(broken)-5] ^= 0xff
	if _, err := kv.Put(ctx, checkpoint.Key, broken); err != nil {
		t.Fatal(err)
	}
	k = &checkpoint.Keeper{Proj: p, KV: kv, Reader: r}
	if err := k.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.StoredSeq(ctx, js); got != behind {
		t.Fatalf("a broken checkpoint at %d was kept over the member's at %d: stored %d", newest, behind, got)
	}

	// The stored one names another event at its sequence: replaced.
	st := replay.Fold(recs)
	st.Seq = newest
	foreign, err := checkpoint.Encode(st, "01J0000000000000000000FORE")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, checkpoint.Key, foreign); err != nil {
		t.Fatal(err)
	}
	k.Seq = 0
	if err := k.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.StoredSeq(ctx, js); got != behind {
		t.Fatalf("an unconfirmed checkpoint at %d was kept over the member's at %d: stored %d", newest, behind, got)
	}
}
