package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/transport"
	"github.com/vmihailenco/msgpack/v5"
)

// The transport limit: what a command path costs with nothing of tidemark
// in it. A minimal service written with nats.go only (and msgpack for the
// body) receives a complete_intervals request, decodes it, publishes one
// event on the snapshot's subject under an expected last subject sequence
// (the per-subject condition tidemark's appends carry), awaits the ack and
// replies; 16 clients each await their reply, as on tidemark's side. It
// runs on a server of its own with the same stream settings (R1 file
// store, eventlog.StreamConfig) and no engine reading it.

// limitSubject is the limit service's request subject.
const limitSubject = "bench.limit.complete_intervals"

// limitCommand is the body the limit service decodes: complete_intervals'
// wire shape.
type limitCommand struct {
	ID     string       `msgpack:"id"`
	At     time.Time    `msgpack:"at,omitempty"`
	Model  string       `msgpack:"model"`
	Ver    string       `msgpack:"version"`
	Ranges []limitRange `msgpack:"ranges"`
	Kind   string       `msgpack:"run_kind,omitempty"`
}

// limitRange is a range on the wire: [start, end] in unix seconds.
type limitRange [2]int64

// limitEvent is the event the limit service appends.
type limitEvent struct {
	Type   string       `msgpack:"type"`
	At     time.Time    `msgpack:"at"`
	Cause  string       `msgpack:"causation"`
	Snap   string       `msgpack:"snapshot"`
	Ranges []limitRange `msgpack:"ranges"`
	Kind   string       `msgpack:"run_kind,omitempty"`
}

// limitReply is its reply.
type limitReply struct {
	Accepted bool   `msgpack:"accepted"`
	Seq      uint64 `msgpack:"seq,omitempty"`
	Error    string `msgpack:"error,omitempty"`
}

// limitService is the minimal service. Each request runs on a goroutine
// of its own (as tidemark's service hands each command to one).
type limitService struct {
	js  jetstream.JetStream
	sub *nats.Subscription
	wg  sync.WaitGroup

	mu    sync.Mutex
	last  map[string]uint64      // subject → its last stored sequence
	locks map[string]*sync.Mutex // subject → held from reading last to its ack
}

func startLimitService(nc *nats.Conn) (*limitService, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s := &limitService{js: js, last: map[string]uint64{}, locks: map[string]*sync.Mutex{}}
	s.sub, err = nc.QueueSubscribe(limitSubject, "limit", func(m *nats.Msg) {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serve(m) }()
	})
	if err != nil {
		return nil, err
	}
	return s, nc.Flush()
}

func (s *limitService) stop() {
	_ = s.sub.Unsubscribe()
	s.wg.Wait()
}

func (s *limitService) serve(m *nats.Msg) {
	seq, err := s.handle(m.Data)
	r := limitReply{Accepted: err == nil, Seq: seq}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := msgpack.Marshal(&r)
	_ = m.Respond(b)
}

func (s *limitService) handle(body []byte) (uint64, error) {
	var c limitCommand
	if err := msgpack.Unmarshal(body, &c); err != nil {
		return 0, err
	}
	if c.ID == "" || c.Model == "" || c.Ver == "" || len(c.Ranges) == 0 {
		return 0, errors.New("limit: incomplete command")
	}
	subj := events.SnapshotSubject(c.Model, c.Ver)
	b, err := msgpack.Marshal(&limitEvent{Type: "intervals_completed", At: c.At, Cause: c.ID, Snap: c.Model + "@" + c.Ver, Ranges: c.Ranges, Kind: c.Kind})
	if err != nil {
		return 0, err
	}
	// One append per subject at a time, so that each carries the right
	// expected sequence (as tidemark keeps a subject in flight once).
	s.mu.Lock()
	lock := s.locks[subj]
	if lock == nil {
		lock = &sync.Mutex{}
		s.locks[subj] = lock
	}
	s.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	s.mu.Lock()
	last := s.last[subj]
	s.mu.Unlock()
	msg := nats.NewMsg(subj)
	msg.Data = b
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	f, err := s.js.PublishMsgAsync(msg)
	if err != nil {
		return 0, err
	}
	var ack *jetstream.PubAck
	select {
	case ack = <-f.Ok():
	case err := <-f.Err():
		return 0, err
	case <-time.After(eventlog.AppendTimeout):
		return 0, errors.New("limit: no ack")
	}
	s.mu.Lock()
	s.last[subj] = max(s.last[subj], ack.Sequence)
	s.mu.Unlock()
	return ack.Sequence, nil
}

// limitServer starts a bare server on a fresh temp dir with the event
// stream as tidemark configures it (sync: SyncAlways) and no engine.
func limitServer(ctx context.Context, sync bool) (*natsnode.Node, func(), error) {
	dir, err := os.MkdirTemp("", "tidemark-bench-limit-*")
	if err != nil {
		return nil, nil, err
	}
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: dir, SyncAlways: sync, Name: "tidemark-bench-limit"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done := func() { node.Close(); os.RemoveAll(dir) }
	js, err := jetstream.New(node.Conn())
	if err == nil {
		_, err = js.CreateOrUpdateStream(ctx, eventlog.StreamConfig(1, false))
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return node, done, nil
}

// limitSide is the limit service on a server of its own, with its
// clients.
type limitSide struct {
	conns []*nats.Conn
	close func()
	// nodes are the connections of a limit cluster's nodes (none for a
	// single server).
	nodes []*nats.Conn
}

func startLimit(ctx context.Context) (*limitSide, error) {
	node, done, err := limitServer(ctx, false)
	if err != nil {
		return nil, err
	}
	return limitOn(node, done)
}

// limitOn starts the limit service and its clients on node's server; its
// close stops them, then calls done.
func limitOn(node *natsnode.Node, done func()) (*limitSide, error) {
	svc, err := startLimitService(node.Conn())
	if err != nil {
		done()
		return nil, err
	}
	l := &limitSide{}
	l.close = func() {
		for _, nc := range l.conns {
			nc.Close()
		}
		svc.stop()
		done()
	}
	for range benchClients {
		nc, err := nats.Connect("", nats.InProcessServer(node.Server()))
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, nc)
	}
	return l, nil
}

// run sends the completions [from, from+n) over snaps snapshots from the
// clients, each awaiting its reply, and returns the rate.
func (l *limitSide) run(from, n, snaps int) (float64, error) {
	return parallel(len(l.conns), n, func(w, i int) error {
		i += from
		body, err := commands.Encode(completion(i, snaps, fmt.Sprintf("limit-%d", i)), false)
		if err != nil {
			return err
		}
		m, err := l.conns[w].Request(limitSubject, body, 10*time.Second)
		if err != nil {
			return err
		}
		var r limitReply
		if err := msgpack.Unmarshal(m.Data, &r); err != nil {
			return err
		}
		if !r.Accepted {
			return fmt.Errorf("limit service refused command %d: %s", i, r.Error)
		}
		return nil
	})
}

// sideBySide measures tidemark's command throughput (clients cs) and the
// transport limit's in alternating rounds of total/rounds commands each,
// so that a change in the machine's load falls on both sides alike. It
// returns both rates (commands over the time each side took).
func sideBySide(ctx context.Context, cs []*transport.Client, lim *limitSide, total, rounds, snaps int, prefix string) (sides, error) {
	per := max(total/rounds, 1)
	var tmTime, limTime float64
	var tmCPU, limCPU time.Duration
	for r := 0; r < rounds; r++ {
		c0 := cpuTime()
		rate, err := throughputFrom(ctx, cs, r*per, per, snaps, prefix)
		if err != nil {
			return sides{}, err
		}
		c1 := cpuTime()
		tmTime += float64(per) / rate
		if rate, err = lim.run(r*per, per, snaps); err != nil {
			return sides{}, err
		}
		limCPU += cpuTime() - c1
		tmCPU += c1 - c0
		limTime += float64(per) / rate
	}
	n := float64(per * rounds)
	return sides{tidemark: n / tmTime, limit: n / limTime, tidemarkCPU: tmCPU / time.Duration(n), limitCPU: limCPU / time.Duration(n)}, nil
}

// sides are the two sides' rates and the process's CPU time per command
// on each.
type sides struct {
	tidemark, limit       float64
	tidemarkCPU, limitCPU time.Duration
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
