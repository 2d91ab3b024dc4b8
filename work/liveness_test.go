package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
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

// TestRosterRefusesJunk: what is not a heartbeat changes nothing: a name
// or kind that could not be shown as it is (CR and LF would start a new
// line of the dashboard's live stream; other control, separator and
// format characters hide or reorder text), or a user's claim to be the
// built-in worker.
func TestRosterRefusesJunk(t *testing.T) {
	r := &Roster{}
	for _, junk := range [][]byte{
		[]byte("{not json"),
		[]byte(`{"kind":"sql"}`),
		[]byte(`{"name":""}`),
		[]byte(`{"name":"` + strings.Repeat("x", 201) + `"}`),
		[]byte(`{"name":"a","kind":"` + strings.Repeat("x", 33) + `"}`),
		[]byte(`{"name":"a","done":-1}`),
		[]byte(`[]`),
		beat(t, Heartbeat{Name: "w\revent: x\rdata: injected\r\r"}),
		beat(t, Heartbeat{Name: "w\ndata: injected"}),
		beat(t, Heartbeat{Name: "w\x00"}),
		beat(t, Heartbeat{Name: "w\x7f"}),
		beat(t, Heartbeat{Name: "w\tx"}),
		beat(t, Heartbeat{Name: "w\u2028data: injected"}),
		beat(t, Heartbeat{Name: "w\u202egnp.exe"}),
		beat(t, Heartbeat{Name: "w\u200b"}),
		beat(t, Heartbeat{Name: "w\u0085"}),
		[]byte(`{"name":"w\ufffd"}`),
		beat(t, Heartbeat{Name: "w", Kind: "sql\r\ndata: x"}),
	} {
		if r.Observe(junk) {
			t.Errorf("accepted %.60q", junk)
		}
	}
	if r.ObserveFrom("mallory", beat(t, Heartbeat{Name: "builtin-host-1", Kind: KindBuiltin})) {
		t.Error("a user's heartbeat claimed to be the built-in worker")
	}
	if live := r.Live(); len(live) != 0 {
		t.Fatalf("live after junk: %+v", live)
	}
	for _, ok := range []string{"w1", "host-1234", "ümlaut ok", "a b"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
}

// TestRosterFloodedByOneUser: 10,000 fake heartbeats from one user (each
// a new name) leave that user MaxWorkersPerUser workers, its newest; the
// real worker of another user and the engine's own built-in worker stay
// live, and a second user's worker with the same name as one of the
// flood's is another worker.
func TestRosterFloodedByOneUser(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &Roster{Now: func() time.Time { return now }}
	for i := range 10_000 {
		now = now.Add(time.Microsecond)
		r.ObserveFrom("mallory", beat(t, Heartbeat{Name: fmt.Sprintf("fake-%05d", i), Kind: KindExec, EveryMS: 300_000}))
	}
	// The real workers start after the flood.
	if !r.ObserveFrom("", beat(t, Heartbeat{Name: "builtin-h-1", Kind: KindBuiltin, EveryMS: 5000})) ||
		!r.ObserveFrom("worker", beat(t, Heartbeat{Name: "real", Kind: KindSQL, EveryMS: 5000})) {
		t.Fatal("heartbeats refused")
	}
	r.ObserveFrom("mallory", beat(t, Heartbeat{Name: "real", Kind: KindExec, EveryMS: 300_000}))
	byUser := map[string][]string{}
	for _, w := range r.Live() {
		byUser[w.User] = append(byUser[w.User], w.Name)
	}
	if got := byUser[""]; len(got) != 1 || got[0] != "builtin-h-1" {
		t.Errorf("the built-in worker: %v", got)
	}
	if got := byUser["worker"]; len(got) != 1 || got[0] != "real" {
		t.Errorf("the real worker: %v", got)
	}
	if got := byUser["mallory"]; len(got) != MaxWorkersPerUser || got[len(got)-1] != "real" || got[0] != fmt.Sprintf("fake-%05d", 10_000-MaxWorkersPerUser+1) {
		t.Errorf("the flood holds %d: first %v", len(got), got[:min(3, len(got))])
	}
}

// TestRosterBounded: a roster holds at most MaxWorkers; full, a new
// worker takes the place of the least recently seen worker of the user
// holding the most, so every user's first workers stay.
func TestRosterBounded(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &Roster{Now: func() time.Time { return now }}
	r.ObserveFrom("", beat(t, Heartbeat{Name: "builtin-h-1", Kind: KindBuiltin, EveryMS: 5000}))
	r.ObserveFrom("worker", beat(t, Heartbeat{Name: "real", EveryMS: 5000}))
	users := MaxWorkers/MaxWorkersPerUser + 10
	for u := range users {
		for i := range MaxWorkersPerUser {
			now = now.Add(time.Microsecond)
			if !r.ObserveFrom(fmt.Sprintf("u%d", u), beat(t, Heartbeat{Name: fmt.Sprintf("w%d", i), EveryMS: 300_000})) {
				t.Fatalf("u%d/w%d refused", u, i)
			}
		}
	}
	live := r.Live()
	if len(live) != MaxWorkers {
		t.Fatalf("%d live, want %d", len(live), MaxWorkers)
	}
	seen := map[string]int{}
	for _, w := range live {
		seen[w.User]++
	}
	if seen[""] != 1 || seen["worker"] != 1 {
		t.Fatalf("the built-in worker %d, the real worker %d", seen[""], seen["worker"])
	}
	for u := range users {
		if seen[fmt.Sprintf("u%d", u)] == 0 {
			t.Fatalf("user u%d has no worker left", u)
		}
	}
	// Once they are silent, they expire and make room.
	now = now.Add(16 * time.Minute)
	if live := r.Live(); len(live) != 0 {
		t.Fatalf("%d live after 16 silent minutes", len(live))
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
	eventually(t, "w1 live with its counts", func() bool {
		live := r.Live()
		return len(live) == 1 && live[0].Name == "w1" && live[0].Kind == KindSQL && live[0].Done == 1 && live[0].Failed == 1 && live[0].InFlight == 1
	})
	if live := r.Live(); live[0].User != "" {
		t.Fatalf("the engine's own connection beat as user %q", live[0].User)
	}
	cancel()
	<-done
	eventually(t, "w1 gone after it stopped", func() bool { return len(r.Live()) == 0 })

	// A connection of user alice (its inbox prefix, as transport.Connect
	// sets it) beats on alice's subject: the roster lists it as hers.
	nc, err := nats.Connect(node.ClientURL(), transport.InboxOption("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = Beat(ctx, nc, "w2", KindExec, 20*time.Millisecond, &stats) }()
	eventually(t, "alice's w2 live", func() bool {
		live := r.Live()
		return len(live) == 1 && live[0].Name == "w2" && live[0].User == "alice"
	})
	if err := Beat(ctx, nc, "w\r\nx", KindExec, time.Millisecond, &stats); err == nil {
		t.Fatal("Beat sent a name with CR LF")
	}
}
