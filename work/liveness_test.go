package work

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/natsnode"
)

func beat(t *testing.T, hb Heartbeat) []byte {
	t.Helper()
	b, err := json.Marshal(hb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRosterLiveness: a worker is live from its heartbeat until it says
// it stopped, or until it has missed MissedBeats of its own intervals;
// a later heartbeat brings it back. The roster's clock is the test's.
func TestRosterLiveness(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &Roster{Now: func() time.Time { return now }}
	if !r.Observe(beat(t, Heartbeat{Name: "a", Kind: KindSQL, EveryMS: 1000, Done: 3, Failed: 1, InFlight: 2})) ||
		!r.Observe(beat(t, Heartbeat{Name: "b", Kind: KindExec, EveryMS: 10000})) {
		t.Fatal("heartbeats refused")
	}
	names := func() string {
		var out []string
		for _, w := range r.Live() {
			out = append(out, w.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "a,b" {
		t.Fatalf("live %q", got)
	}
	if w := r.Live()[0]; w.Kind != KindSQL || w.Done != 3 || w.Failed != 1 || w.InFlight != 2 || !w.LastSeen.Equal(now) {
		t.Fatalf("a: %+v", w)
	}
	// a beats every second: silent for 3s it is still live, past that gone.
	now = now.Add(3 * time.Second)
	if got := names(); got != "a,b" {
		t.Fatalf("after 3s: live %q", got)
	}
	now = now.Add(time.Millisecond)
	if got := names(); got != "b" {
		t.Fatalf("after 3.001s: live %q, want a dropped", got)
	}
	r.Observe(beat(t, Heartbeat{Name: "a", Kind: KindSQL, EveryMS: 1000}))
	if got := names(); got != "a,b" {
		t.Fatalf("a beat again: live %q", got)
	}
	// A stopping worker is dropped at once.
	r.Observe(beat(t, Heartbeat{Name: "b", Kind: KindExec, EveryMS: 10000, Stopped: true}))
	if got := names(); got != "a" {
		t.Fatalf("b stopped: live %q", got)
	}
	// An interval out of bounds is clamped: 0 counts as 50ms, an hour as 5m.
	r.Observe(beat(t, Heartbeat{Name: "fast", EveryMS: 0}))
	r.Observe(beat(t, Heartbeat{Name: "slow", EveryMS: 3600_000}))
	now = now.Add(151 * time.Millisecond)
	if got := names(); got != "a,slow" {
		t.Fatalf("fast silent 151ms: live %q", got)
	}
	now = now.Add(15 * time.Minute)
	if got := names(); got != "" {
		t.Fatalf("after 15m: live %q", got)
	}
}

// TestRosterRefusesJunk: what is not a heartbeat changes nothing.
func TestRosterRefusesJunk(t *testing.T) {
	r := &Roster{}
	for _, junk := range [][]byte{
		[]byte("{not json"),
		[]byte(`{"kind":"sql"}`),
		[]byte(`{"name":""}`),
		[]byte(`{"name":"` + strings.Repeat("x", 201) + `"}`),
		[]byte(`{"name":"a","kind":"` + strings.Repeat("x", 201) + `"}`),
		[]byte(`{"name":"a","done":-1}`),
		[]byte(`[]`),
	} {
		if r.Observe(junk) {
			t.Errorf("accepted %.40q", junk)
		}
	}
	if live := r.Live(); len(live) != 0 {
		t.Fatalf("live after junk: %+v", live)
	}
}

// TestRosterBounded: a roster holds at most MaxWorkers; a new name beyond
// that is refused while they are all live.
func TestRosterBounded(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &Roster{Now: func() time.Time { return now }}
	for i := range MaxWorkers {
		if !r.Observe(beat(t, Heartbeat{Name: "w" + string(rune('a'+i%26)) + time.Duration(i).String(), EveryMS: 1000})) {
			t.Fatalf("worker %d refused", i)
		}
	}
	if r.Observe(beat(t, Heartbeat{Name: "one-too-many", EveryMS: 1000})) {
		t.Fatal("a worker beyond MaxWorkers was accepted")
	}
	now = now.Add(time.Minute)
	if !r.Observe(beat(t, Heartbeat{Name: "one-too-many", EveryMS: 1000})) {
		t.Fatal("once the others expired, a new worker is refused")
	}
}

// TestBeatOverNATS: Beat's heartbeats reach a roster subscribed on the
// same server, carrying the counts; its last one (stopped) drops it.
func TestBeatOverNATS(t *testing.T) {
	node, err := natsnode.Start(t.Context(), natsnode.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	r := &Roster{}
	stop, err := r.Subscribe(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var stats Stats
	stats.Begin()
	stats.End(nil)
	stats.Begin()
	stats.End(errors.New("boom"))
	stats.Begin()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Beat(ctx, node.Conn(), "w1", KindSQL, 20*time.Millisecond, &stats) }()
	waitFor(t, "w1 live with its counts", func() bool {
		live := r.Live()
		return len(live) == 1 && live[0].Name == "w1" && live[0].Kind == KindSQL && live[0].Done == 1 && live[0].Failed == 1 && live[0].InFlight == 1
	})
	cancel()
	<-done
	waitFor(t, "w1 gone after it stopped", func() bool { return len(r.Live()) == 0 })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}
