package main

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
)

// storeState is what JetStream says about a stopped store: the event
// stream's state, the checkpoint bucket's underlying stream's state, and
// every checkpoint key's revision. It is compared at the JetStream level,
// not as file bytes: the embedded server that opens a data dir may
// rewrite its own index and meta files.
type storeState struct {
	Stream, Bucket streamState
	Keys           map[string]uint64
}

type streamState struct {
	Msgs, Bytes, FirstSeq, LastSeq uint64
	Deleted                        int
}

func readStoreState(t *testing.T, dir string) storeState {
	t.Helper()
	ctx := t.Context()
	st, err := openStore(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	js := st.JetStream()
	state := func(name string) streamState {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		x := info.State
		return streamState{Msgs: x.Msgs, Bytes: x.Bytes, FirstSeq: x.FirstSeq, LastSeq: x.LastSeq, Deleted: x.NumDeleted}
	}
	out := storeState{Stream: state(events.StreamName), Bucket: state("KV_" + eventlog.BucketName), Keys: map[string]uint64{}}
	kv, err := js.KeyValue(ctx, eventlog.BucketName)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		out.Keys[k] = e.Revision()
	}
	return out
}

// TestReadersLeaveStoreUnchanged runs the read-only verbs on a stopped
// store and checks, through JetStream, that the TIDEMARK stream and the
// TIDEMARK_CHECKPOINTS bucket are as they were.
func TestReadersLeaveStoreUnchanged(t *testing.T) {
	dir := scenarioDir(t, "trailing-gap.yaml")
	before := readStoreState(t, dir)
	if before.Stream.LastSeq == 0 || len(before.Keys) == 0 {
		t.Fatalf("the scenario left no events or no checkpoint keys: %+v", before)
	}
	for _, args := range [][]string{
		{"status", "--data-dir", dir},
		{"replay", "--data-dir", dir, "--verify"},
		{"audit", "--data-dir", dir},
		{"audit", "explain", "p1", "--data-dir", dir},
	} {
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if after := readStoreState(t, dir); !reflect.DeepEqual(before, after) {
			t.Fatalf("%v changed the store:\n before %s\n after  %s", args, show(before), show(after))
		}
	}
}

func show(s storeState) string { return fmt.Sprintf("%+v", s) }
