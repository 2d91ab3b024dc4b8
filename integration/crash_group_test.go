package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/transport"
)

// TestCrashSafetyGroups: `tidemark serve` (fsync on, so it coalesces
// group commits into group messages) is SIGKILLed at random points while
// 16 clients send completions concurrently, with retries. Every
// acknowledged completion is stored exactly once, some group message
// holds several, every hour is covered, and the restored projections
// equal a fold from scratch.
func TestCrashSafetyGroups(t *testing.T) {
	const clients, snaps = 16, 40
	hours := 40
	if testing.Short() {
		hours = 8
	}
	bin := buildTidemark(t)
	dataDir := t.TempDir()
	port := jstest.FreePorts(t, 1)[0]
	var mu sync.Mutex
	proc, err := startServeProc(bin, dataDir, port)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		mu.Lock()
		if proc != nil {
			proc.kill()
		}
		mu.Unlock()
	}()
	connect := func() *transport.Client {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		c := transport.NewClient(nc)
		c.Timeout = 2 * time.Second
		return c
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// send retries cmd until it is acknowledged.
	send := func(c *transport.Client, cmd commands.Command) error {
		for attempt := 0; ; attempt++ {
			if attempt > 500 || ctx.Err() != nil {
				return fmt.Errorf("%s: not acknowledged after %d attempts", cmd.Header().ID, attempt)
			}
			if r, err := c.Do(ctx, cmd); err == nil && r.Accepted {
				return nil
			}
			time.Sleep(10 * time.Millisecond) // retry pacing, bounded by the attempt count
		}
	}
	admin := connect()
	for s := 0; s < snaps; s++ {
		if err := send(admin, &commands.RegisterSnapshot{Meta: commands.Meta{ID: fmt.Sprintf("reg-%d", s)}, Model: "cg", Version: fmt.Sprintf("v%d", s), Cron: "@hourly", Start: t0}); err != nil {
			t.Fatal(err)
		}
	}
	// The engine is killed each time another seventh of the completions
	// has been acknowledged, by the client whose ack crossed the mark,
	// while the others keep sending: groups are in flight.
	var kills, acked atomic.Int32
	var killerErr error
	step := int32(snaps * hours / 7)
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if killerErr != nil {
			return
		}
		proc.kill()
		kills.Add(1)
		proc, killerErr = startServeProc(bin, dataDir, port)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		client := connect()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < snaps*hours; i += clients {
				h := i / snaps
				cmd := &commands.CompleteIntervals{Meta: commands.Meta{ID: fmt.Sprintf("cg-%d", i)}, Model: "cg", Version: fmt.Sprintf("v%d", i%snaps),
					Ranges: []interval.Range{rng(h, h+1)}}
				if err := send(client, cmd); err != nil {
					errs <- err
					return
				}
				if n := acked.Add(1); n%step == 0 && n/step < 7 {
					kill()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if killerErr != nil {
		t.Fatal(killerErr)
	}
	if kills.Load() == 0 {
		t.Fatal("the engine was never killed")
	}
	mu.Lock()
	proc.kill()
	if proc, err = startServeProc(bin, dataDir, port); err == nil {
		err = proc.stop()
	}
	proc = nil
	mu.Unlock()
	if err != nil {
		t.Fatalf("clean restart: %v", err)
	}

	e := open(t, engine.Config{}, nodeOn(t, dataDir))
	recs, err := jstest.ReadLog(ctx, e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	groups := 0
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("undecodable event at %d.%d: %v", r.Seq, r.Index, r.Err)
		}
		if _, ok := r.Event.Payload.(events.IntervalsCompleted); ok {
			stored[r.Event.Causation]++
		}
		if r.Count > 1 && r.Index == 0 {
			groups++
		}
	}
	for i := 0; i < snaps*hours; i++ {
		if id := fmt.Sprintf("cg-%d", i); stored[id] != 1 {
			t.Fatalf("acknowledged %s is stored %d times", id, stored[id])
		}
	}
	if groups == 0 {
		t.Fatal("no group message of several completions was stored")
	}
	e.Projection().Read(func(st *projections.State) {
		for s := 0; s < snaps; s++ {
			if cov := st.SnapshotCoverage(fmt.Sprintf("cg@v%d", s)); !cov.Equal(interval.NewSet(rng(0, hours))) {
				t.Errorf("cg@v%d covers %v", s, cov)
			}
		}
	})
	rebuilt, _ := json.Marshal(replay.Fold(recs))
	if live := stateJSON(t, e); live != string(rebuilt) {
		t.Fatal("restored projections differ from a fold from scratch")
	}
	// An engine that does not coalesce, on a stream with group messages:
	// the server's per-subject sequences miss the grouped events, so its
	// appends must go under the stream condition, or they never land.
	for _, c := range []commands.Command{
		&commands.InvalidateIntervals{Meta: commands.Meta{ID: "after-1", At: at(hours + 2)}, Model: "cg", Version: "v0", Ranges: []interval.Range{rng(0, 1)}},
		&commands.CompleteIntervals{Meta: commands.Meta{ID: "after-2", At: at(hours + 2)}, Model: "cg", Version: "v0", Ranges: []interval.Range{rng(0, 1)}},
	} {
		if r := e.Handle(ctx, c); r.Err() != nil || !r.Accepted {
			t.Fatalf("%s on a grouped snapshot, by an engine that does not coalesce: %+v %v", c.Kind(), r, r.Err())
		}
	}
	t.Logf("%d completions acknowledged across %d SIGKILLs in %d group messages; each stored once", snaps*hours, kills.Load(), groups)
}
