package work

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/transport"
)

// Worker liveness. Every worker — `tidemark worker --exec`, `tidemark
// worker --warehouse`, serve's built-in worker, or any process speaking
// the protocol — publishes a Heartbeat (JSON, core NATS, no reply) every
// few seconds, and one with "stopped": true when it stops. The engine
// (serve) keeps a Roster of them: a worker is live from its first
// heartbeat until it says it stopped or stays silent for MissedBeats of
// its own intervals, and then it is dropped. The dashboard and /metrics
// show the live ones.
//
// Who sent a heartbeat. A worker of NATS user U beats on
// HeartbeatSubjectFor(U), tidemark.workers.heartbeat.U, as its commands go
// to tidemark.cmd.U.<kind>: with docs/auth.conf only U may publish there
// (and only U's account imports it), so the subject names the
// authenticated sender. The unnamed HeartbeatSubject is the engine's own
// (its built-in worker): under docs/auth.conf no client account imports
// it. The roster keys workers by (user, name), holds at most
// MaxWorkersPerUser of one user, and, full, makes room by dropping the
// least recently seen worker of the user holding the most: a flood from
// one user evicts only that user's workers, and every other user's (and
// the built-in worker) stays. Without --auth every client may publish on
// every subject: the user a subject names is then only a label.
const (
	HeartbeatSubject = "tidemark.workers.heartbeat"
	// DefaultHeartbeat is the interval workers beat at.
	DefaultHeartbeat = 5 * time.Second
	// MissedBeats is how many intervals a worker may stay silent before it
	// is dropped from the roster.
	MissedBeats = 3
	// Bounds of a heartbeat's fields: longer names are refused, intervals
	// are clamped, and a roster holds at most MaxWorkers, at most
	// MaxWorkersPerUser of one user.
	maxNameLen        = 200
	maxKindLen        = 32
	minEvery          = 50 * time.Millisecond
	maxEvery          = 5 * time.Minute
	MaxWorkers        = 10000
	MaxWorkersPerUser = 64
)

// HeartbeatSubjectFor is the subject user's workers beat on:
// tidemark.workers.heartbeat.<user>, or HeartbeatSubject with no user
// (the engine's own connection).
func HeartbeatSubjectFor(user string) string {
	if user == "" {
		return HeartbeatSubject
	}
	return HeartbeatSubject + "." + user
}

// The worker kinds heartbeats name.
const (
	KindExec    = "exec"
	KindSQL     = "sql"
	KindBuiltin = "builtin"
)

// CheckName refuses a worker name (or kind) that could not be shown as
// it is: empty, longer than 200 bytes, not UTF-8, or holding a rune that
// is not printable (control characters such as CR and LF, line and
// paragraph separators, format characters such as bidi overrides, any
// space but ' '). The dashboard, its live stream and /metrics show names
// as they are.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("work: worker name %q: want 1 to %d bytes", name, maxNameLen)
	}
	for i, c := range name {
		if c == utf8.RuneError || !unicode.IsPrint(c) {
			return fmt.Errorf("work: worker name %q: byte %d is not a printable character", name, i)
		}
	}
	return nil
}

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
// when that is flushed. It beats on the subject of the connection's user
// (HeartbeatSubjectFor, the user of its reply inbox prefix:
// transport.InboxOption, as every tidemark client connects), the unnamed
// one for a connection without. A name CheckName refuses is not
// published: Beat returns the error at once.
func Beat(ctx context.Context, nc *nats.Conn, name, kind string, every time.Duration, stats *Stats) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	if every <= 0 {
		every = DefaultHeartbeat
	}
	subject := HeartbeatSubjectFor(transport.UserOf(nc))
	started := time.Now().UTC()
	send := func(stopped bool) {
		done, failed, inFlight := stats.Counts()
		b, err := json.Marshal(Heartbeat{Name: name, Kind: kind, Started: started, At: time.Now().UTC(), EveryMS: every.Milliseconds(),
			Done: done, Failed: failed, InFlight: inFlight, Stopped: stopped})
		if err == nil {
			_ = nc.Publish(subject, b)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for send(false); ; {
		select {
		case <-ctx.Done():
			send(true)
			_ = nc.FlushTimeout(time.Second)
			return nil
		case <-t.C:
			send(false)
		}
	}
}

// checkKind refuses a kind that could not be shown as it is (CheckName's
// rules, at most 32 bytes); empty is allowed.
func checkKind(kind string) error {
	if kind == "" {
		return nil
	}
	if len(kind) > maxKindLen || CheckName(kind) != nil {
		return fmt.Errorf("work: worker kind %q: want at most %d printable bytes", kind, maxKindLen)
	}
	return nil
}

// Worker is a live worker as the roster knows it: its last heartbeat,
// the user whose subject it came on ("" for the engine's own,
// HeartbeatSubject) and when it arrived (on the roster's clock).
type Worker struct {
	Heartbeat
	User     string
	LastSeen time.Time
}

// Roster is the live workers, fed by their heartbeats. Safe for
// concurrent use.
type Roster struct {
	// Now is the roster's clock; default time.Now.
	Now func() time.Time

	mu sync.Mutex
	// users holds each user's workers by name ("" : the engine's own).
	users map[string]map[string]Worker
	n     int
	// swept is when every user's silent workers were last dropped.
	swept time.Time
	// since is when Subscribe began listening (zero: never).
	since time.Time
}

// Settled reports whether the roster has listened since Subscribe for as
// long as it takes to drop a silent worker beating at DefaultHeartbeat
// (MissedBeats of it): only then does an empty roster mean that no such
// worker runs. Before, a worker that runs may not have been heard yet (a
// restarted serve). A roster never subscribed (fed by Observe) is settled.
func (r *Roster) Settled() bool {
	r.mu.Lock()
	since := r.since
	r.mu.Unlock()
	return since.IsZero() || r.now().Sub(since) >= MissedBeats*DefaultHeartbeat
}

func (r *Roster) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Subscribe feeds the roster with the heartbeats published on nc until
// stop is called: the engine's own (HeartbeatSubject) and every user's
// (HeartbeatSubjectFor), each under the user its subject names.
func (r *Roster) Subscribe(nc *nats.Conn) (stop func(), err error) {
	own, err := nc.Subscribe(HeartbeatSubject, func(m *nats.Msg) { r.ObserveFrom("", m.Data) })
	if err != nil {
		return nil, err
	}
	prefix := HeartbeatSubject + "."
	users, err := nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		if user := strings.TrimPrefix(m.Subject, prefix); transport.ValidUser(user) == nil {
			r.ObserveFrom(user, m.Data)
		}
	})
	if err != nil {
		_ = own.Unsubscribe()
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		_ = own.Unsubscribe()
		_ = users.Unsubscribe()
		return nil, err
	}
	r.mu.Lock()
	r.since = r.now()
	r.mu.Unlock()
	return func() { _ = own.Unsubscribe(); _ = users.Unsubscribe() }, nil
}

// Observe records one heartbeat message on the engine's own subject
// (ObserveFrom with no user).
func (r *Roster) Observe(data []byte) bool { return r.ObserveFrom("", data) }

// ObserveFrom records one heartbeat message of user ("" : the engine's
// own, HeartbeatSubject). A message that is not a heartbeat (not JSON,
// a name CheckName refuses, a kind longer than 32 bytes or not
// printable, the kind builtin from a user) is ignored and reported
// false. A new worker of a user holding MaxWorkersPerUser live ones
// replaces that user's least recently seen; one beyond MaxWorkers
// replaces the least recently seen worker of the user holding the most
// (itself when that is its own user).
func (r *Roster) ObserveFrom(user string, data []byte) bool {
	var hb Heartbeat
	if err := json.Unmarshal(data, &hb); err != nil || CheckName(hb.Name) != nil || checkKind(hb.Kind) != nil {
		return false
	}
	if user != "" && hb.Kind == KindBuiltin {
		return false // the built-in worker beats on the engine's own subject
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.users[user]
	if hb.Stopped {
		if _, known := ws[hb.Name]; known {
			r.drop(user, hb.Name)
		}
		return true
	}
	now := r.now()
	if _, known := ws[hb.Name]; !known {
		if len(ws) >= MaxWorkersPerUser {
			r.expireUser(user, now)
			if ws = r.users[user]; len(ws) >= MaxWorkersPerUser {
				r.drop(user, oldest(ws))
			}
		}
		if r.n >= MaxWorkers {
			if now.Sub(r.swept) >= minEvery {
				r.expire(now)
			}
			if r.n >= MaxWorkers {
				r.evictFor(user)
			}
		}
	}
	if r.users == nil {
		r.users = map[string]map[string]Worker{}
	}
	if r.users[user] == nil {
		r.users[user] = map[string]Worker{}
	}
	if _, known := r.users[user][hb.Name]; !known {
		r.n++
	}
	r.users[user][hb.Name] = Worker{Heartbeat: hb, User: user, LastSeen: now}
	return true
}

// evictFor drops one worker to make room for a new one of user: the least
// recently seen of the user holding the most workers, user's own when it
// holds as many.
func (r *Roster) evictFor(user string) {
	victim, most := user, len(r.users[user])
	for u, ws := range r.users {
		if len(ws) > most {
			victim, most = u, len(ws)
		}
	}
	if most > 0 {
		r.drop(victim, oldest(r.users[victim]))
	}
}

// oldest is the name of the least recently seen worker of ws (by name
// among equals).
func oldest(ws map[string]Worker) string {
	var name string
	var seen time.Time
	for n, w := range ws {
		if name == "" || w.LastSeen.Before(seen) || w.LastSeen.Equal(seen) && n < name {
			name, seen = n, w.LastSeen
		}
	}
	return name
}

func (r *Roster) drop(user, name string) {
	ws := r.users[user]
	if _, ok := ws[name]; !ok {
		return
	}
	delete(ws, name)
	r.n--
	if len(ws) == 0 {
		delete(r.users, user)
	}
}

// expire drops the workers silent for MissedBeats of their intervals.
func (r *Roster) expire(now time.Time) {
	r.swept = now
	for user := range r.users {
		r.expireUser(user, now)
	}
}

func (r *Roster) expireUser(user string, now time.Time) {
	for name, w := range r.users[user] {
		if now.Sub(w.LastSeen) > MissedBeats*w.Every() {
			r.drop(user, name)
		}
	}
}

// Every is the worker's heartbeat interval, clamped to 50ms..5m.
func (w Worker) Every() time.Duration {
	return min(max(time.Duration(w.EveryMS)*time.Millisecond, minEvery), maxEvery)
}

// Live is the live workers, by user ("" first) and name.
func (r *Roster) Live() []Worker {
	r.mu.Lock()
	r.expire(r.now())
	out := make([]Worker, 0, r.n)
	for _, ws := range r.users {
		for _, w := range ws {
			out = append(out, w)
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Name < out[j].Name
	})
	return out
}
