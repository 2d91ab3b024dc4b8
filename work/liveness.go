package work

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Worker liveness. Every worker — `tidemark worker --exec`, `tidemark
// worker --warehouse`, serve's built-in worker, or any process speaking
// the protocol — publishes a Heartbeat (JSON, core NATS, no reply) on
// HeartbeatSubject every few seconds, and one with "stopped": true when it
// stops. The engine (serve) keeps a Roster of them: a worker is live from
// its first heartbeat until it says it stopped or stays silent for
// MissedBeats of its own intervals, and then it is dropped. The dashboard
// and /metrics show the live ones.
const (
	HeartbeatSubject = "tidemark.workers.heartbeat"
	// DefaultHeartbeat is the interval workers beat at.
	DefaultHeartbeat = 5 * time.Second
	// MissedBeats is how many intervals a worker may stay silent before it
	// is dropped from the roster.
	MissedBeats = 3
	// Bounds of a heartbeat's fields: longer names are refused, intervals
	// are clamped, and a roster holds at most MaxWorkers.
	maxNameLen = 200
	minEvery   = 50 * time.Millisecond
	maxEvery   = 5 * time.Minute
	MaxWorkers = 10000
)

// The worker kinds heartbeats name.
const (
	KindExec    = "exec"
	KindSQL     = "sql"
	KindBuiltin = "builtin"
)

// Heartbeat is what a worker says of itself.
type Heartbeat struct {
	// Name identifies the worker (its events' worker:<name>).
	Name string `json:"name"`
	// Kind is exec, sql or builtin.
	Kind string `json:"kind"`
	// Started is when the worker started; At when it sent this.
	Started time.Time `json:"started"`
	At      time.Time `json:"at"`
	// EveryMS is its heartbeat interval in milliseconds.
	EveryMS int64 `json:"every_ms"`
	// Done and Failed count the work items (deliveries) it finished and
	// the ones that failed; InFlight is how many it is computing now.
	Done     uint64 `json:"done"`
	Failed   uint64 `json:"failed"`
	InFlight int64  `json:"in_flight"`
	// Stopped: the worker is stopping, drop it now.
	Stopped bool `json:"stopped,omitempty"`
}

// Stats counts a worker's items, safe for concurrent use.
type Stats struct {
	done, failed atomic.Uint64
	inFlight     atomic.Int64
}

// Begin marks an item started; its end is End.
func (s *Stats) Begin() { s.inFlight.Add(1) }

// End marks an item begun with Begin finished, done when err is nil.
func (s *Stats) End(err error) {
	s.inFlight.Add(-1)
	if err == nil {
		s.done.Add(1)
	} else {
		s.failed.Add(1)
	}
}

// Counts are the current counts.
func (s *Stats) Counts() (done, failed uint64, inFlight int64) {
	return s.done.Load(), s.failed.Load(), s.inFlight.Load()
}

// Counting wraps r so that s counts every run: in flight while it runs,
// then done or failed. The wrapper keeps r's ActorName.
func (s *Stats) Counting(r Runner) Runner { return countingRunner{r: r, s: s} }

type countingRunner struct {
	r Runner
	s *Stats
}

func (c countingRunner) Run(ctx context.Context, item Item, at time.Time) error {
	c.s.Begin()
	err := c.r.Run(ctx, item, at)
	c.s.End(err)
	return err
}

func (c countingRunner) ActorName() string {
	if a, ok := c.r.(interface{ ActorName() string }); ok {
		return a.ActorName()
	}
	return ""
}

// Beat publishes name's heartbeat on nc every interval (DefaultHeartbeat
// when <= 0) until ctx ends, then a last one with Stopped set. It returns
// when that is flushed.
func Beat(ctx context.Context, nc *nats.Conn, name, kind string, every time.Duration, stats *Stats) {
	if every <= 0 {
		every = DefaultHeartbeat
	}
	started := time.Now().UTC()
	send := func(stopped bool) {
		done, failed, inFlight := stats.Counts()
		b, err := json.Marshal(Heartbeat{Name: name, Kind: kind, Started: started, At: time.Now().UTC(), EveryMS: every.Milliseconds(),
			Done: done, Failed: failed, InFlight: inFlight, Stopped: stopped})
		if err == nil {
			_ = nc.Publish(HeartbeatSubject, b)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for send(false); ; {
		select {
		case <-ctx.Done():
			send(true)
			_ = nc.FlushTimeout(time.Second)
			return
		case <-t.C:
			send(false)
		}
	}
}

// Worker is a live worker as the roster knows it: its last heartbeat and
// when it arrived (on the roster's clock).
type Worker struct {
	Heartbeat
	LastSeen time.Time
}

// Roster is the live workers, fed by their heartbeats. Safe for
// concurrent use.
type Roster struct {
	// Now is the roster's clock; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	workers map[string]Worker
}

func (r *Roster) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Subscribe feeds the roster with the heartbeats published on nc until
// stop is called.
func (r *Roster) Subscribe(nc *nats.Conn) (stop func(), err error) {
	sub, err := nc.Subscribe(HeartbeatSubject, func(m *nats.Msg) { r.Observe(m.Data) })
	if err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Observe records one heartbeat message. A message that is not a
// heartbeat (not JSON, no name, a name longer than 200 bytes) is ignored
// and reported false; so is a new worker beyond MaxWorkers.
func (r *Roster) Observe(data []byte) bool {
	var hb Heartbeat
	if err := json.Unmarshal(data, &hb); err != nil || hb.Name == "" || len(hb.Name) > maxNameLen || len(hb.Kind) > maxNameLen {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if hb.Stopped {
		delete(r.workers, hb.Name)
		return true
	}
	if r.workers == nil {
		r.workers = map[string]Worker{}
	}
	if _, known := r.workers[hb.Name]; !known && len(r.workers) >= MaxWorkers {
		r.expire()
		if len(r.workers) >= MaxWorkers {
			return false
		}
	}
	r.workers[hb.Name] = Worker{Heartbeat: hb, LastSeen: r.now()}
	return true
}

// expire drops the workers silent for MissedBeats of their intervals.
func (r *Roster) expire() {
	now := r.now()
	for name, w := range r.workers {
		if now.Sub(w.LastSeen) > MissedBeats*w.Every() {
			delete(r.workers, name)
		}
	}
}

// Every is the worker's heartbeat interval, clamped to 50ms..5m.
func (w Worker) Every() time.Duration {
	return min(max(time.Duration(w.EveryMS)*time.Millisecond, minEvery), maxEvery)
}

// Live is the live workers, by name.
func (r *Roster) Live() []Worker {
	r.mu.Lock()
	r.expire()
	out := make([]Worker, 0, len(r.workers))
	for _, w := range r.workers {
		out = append(out, w)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
