package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/replay"
)

// openAuthed opens an engine on dir as serve does with docs/auth.conf;
// on failure the node is closed already, and closeAll closes both.
func openAuthed(ctx context.Context, dir string, checkpointEvery int) (e *engine.Engine, closeAll func(), err error) {
	cfg := authConfig(dir)
	cfg.Listen = "127.0.0.1:-1"
	node, err := natsnode.Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	e, err = engine.Open(ctx, node.Conn(), engine.Config{CheckpointEvery: checkpointEvery, Logger: quiet(), TrustCommandTime: true})
	if err != nil {
		node.Close()
		return nil, nil, err
	}
	return e, func() { e.Close(context.Background()); node.Close() }, nil
}

// storeWithHistory writes a deployment's events into a new store and
// stops it; it returns the data dir, the stream's block file and the id
// of the event at each sequence (ids[seq-1]; the last is the stream's
// last sequence).
func storeWithHistory(t *testing.T, checkpointEvery int) (dir, blk string, ids []string) {
	t.Helper()
	dir = t.TempDir()
	e, closeAll, err := openAuthed(t.Context(), dir, checkpointEvery)
	if err != nil {
		t.Fatal(err)
	}
	deploy(t, e, "prod", "d1", "v1", at(6))
	deploy(t, e, "qa", "d2", "v1", at(6))
	recs, err := jstest.ReadLog(t.Context(), e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ids = append(ids, r.Event.ID)
	}
	closeAll()
	blks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "jetstream", "*", "streams", events.StreamName, "msgs", "*.blk"))
	if len(blks) != 1 {
		t.Fatalf("want one block file, got %v", blks)
	}
	return dir, blks[0], ids
}

// TestCorruptStoreRefused: an engine opened (as serve does, with auth) on
// a store whose block file was truncated or corrupted while it was
// stopped refuses to start within seconds, with ErrDamaged and the
// missing sequences; it never waits for them. With a checkpoint past the
// damage, it starts on the checkpoint, finds the damage under it in the
// background, stops its projection and refuses commands.
func TestCorruptStoreRefused(t *testing.T) {
	const bound = 15 * time.Second
	truncate := func(t *testing.T, blk string, _ []string) {
		fi, _ := os.Stat(blk)
		if err := os.Truncate(blk, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	corrupt := func(seq func(n int) int) func(t *testing.T, blk string, ids []string) {
		return func(t *testing.T, blk string, ids []string) { jstest.CorruptEvent(t, blk, ids[seq(len(ids))-1]) }
	}
	last := func(n int) int { return n }
	middle := func(n int) int { return n / 2 }
	for _, c := range []struct {
		name       string
		checkpoint int
		damage     func(t *testing.T, blk string, ids []string)
		want       func(n int) string // the missing spans, given the last seq
	}{
		{"tail truncated", 0, truncate, func(n int) string { return fmt.Sprintf("-%d]", n) }},
		{"tail truncated, no checkpoint", -1, truncate, func(n int) string { return fmt.Sprintf("-%d]", n) }},
		{"last event corrupted, no checkpoint", -1, corrupt(last), func(n int) string { return fmt.Sprintf("[%d]", n) }},
		{"middle event corrupted, no checkpoint", -1, corrupt(middle), func(n int) string { return fmt.Sprintf("[%d]", middle(n)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, blk, ids := storeWithHistory(t, c.checkpoint)
			c.damage(t, blk, ids)
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			defer cancel()
			e, closeAll, err := openAuthed(ctx, dir, c.checkpoint)
			if e != nil {
				closeAll()
			}
			if ctx.Err() != nil {
				t.Fatalf("Open still waiting after %s: %v", bound, err)
			}
			d, ok := eventlog.IsDamage(err)
			if !errors.Is(err, engine.ErrDamaged) || !ok || d.LastSeq != uint64(len(ids)) {
				t.Fatalf("Open: %v", err)
			}
			if got, want := fmt.Sprint(d.Missing), c.want(len(ids)); !strings.HasSuffix(got, want) {
				t.Fatalf("missing %s, want …%s (stream's last seq %d)", got, want, len(ids))
			}
		})
	}

	t.Run("middle event corrupted under the checkpoint", func(t *testing.T) {
		dir, blk, ids := storeWithHistory(t, 0)
		jstest.CorruptEvent(t, blk, ids[middle(len(ids))-1])
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		e, closeAll, err := openAuthed(ctx, dir, 0)
		if err != nil {
			t.Fatalf("Open on the checkpoint: %v", err)
		}
		defer closeAll()
		select {
		case <-e.Failed():
		case <-ctx.Done():
			t.Fatalf("the damage under the checkpoint was not found within %s", bound)
		}
		d, _ := eventlog.IsDamage(e.Err())
		if !errors.Is(e.Err(), engine.ErrDamaged) || d == nil || fmt.Sprint(d.Missing) != fmt.Sprintf("[%d]", middle(len(ids))) {
			t.Fatalf("projection stopped with %v", e.Err())
		}
		before := lastSeq(t, e)
		r := e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(7)), Model: "events", Version: "v9", Cron: "@hourly", Start: t0})
		if r.Accepted || !strings.Contains(r.Err().Error(), "missing") {
			t.Fatalf("a command on the damaged store: %+v", r)
		}
		if after := lastSeq(t, e); after != before {
			t.Fatalf("a command refused on the damaged store appended seq %d-%d", before+1, after)
		}
	})
}

// TestForeignMessageNamed: a message an admin publishes into the event
// stream that is not a tidemark event is skipped by the engine (it
// cannot be removed: the stream denies deletes) and named, sequence and
// subject, by every reader, including the auditor's.
func TestForeignMessageNamed(t *testing.T) {
	node := authNode(t, "")
	e := open(t, engine.Config{}, node)
	clientURL := node.ClientURL()
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	admin, _ := asUser(t, clientURL, "admin")
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := ajs.Publish(ctx, "tidemark.evt.x", []byte(`{"accepted":true}`))
	if err != nil {
		t.Fatal(err)
	}
	// The engine skips it and goes on.
	if err := e.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, e.Handle(ctx, &commands.Status{}))
	deploy(t, e, "qa", "d2", "v1", at(7))

	auditor, _ := asUser(t, clientURL, "auditor")
	js, err := jetstream.New(auditor)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := jstest.ReadLog(ctx, js)
	d, ok := eventlog.IsDamage(err)
	if !ok || len(d.Missing) != 0 || len(d.Bad) != 1 || d.Bad[0].Seq != ack.Sequence || d.Bad[0].Subject != "tidemark.evt.x" ||
		!strings.Contains(err.Error(), "seq "+strconv.FormatUint(ack.Sequence, 10)+" on tidemark.evt.x") {
		t.Fatalf("auditor's read: %v", err)
	}
	if n := uint64(len(recs)); n != lastSeq(t, e) {
		t.Fatalf("read %d records of %d", n, lastSeq(t, e))
	}
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
}
