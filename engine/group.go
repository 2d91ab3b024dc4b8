package engine

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Group commit. Completions are the hot path: workers report them from
// many connections at once. A completion waits in a queue; the leader
// (holder of the lead token, then of cmdMu) takes the whole queue,
// decides every command in it against the same view, publishes the
// independent ones together (all in flight at once, each under its own
// fencing token and per-subject condition, without a message id: see
// publish), and lets go of leadership
// before it waits for their acks, so the next group is decided while this
// one is being stored.
//
// Independent means one event each, on distinct snapshot subjects and
// distinct tables, with no repair debt closing, and touching no subject,
// table or command id of a group still in flight: no decision reads what
// another in flight writes, so deciding them against one view is the
// same as deciding them in turn. Every other command (other kinds, a
// completion closing debt, one whose subject is in flight) waits until
// nothing is in flight and goes through the one-at-a-time path, which
// re-reads and re-decides; so does any append that fails.
//
// The group is not one atomic batch, although under SyncAlways that would
// be one fsync for the group: on a single-replica file store the server
// stages every atomic batch in a file store of its own, which costs more
// than the fsyncs it saves at the group sizes concurrent clients form
// (measured: docs/performance.md). Under Config.Coalesce the group is one
// group message instead (coalesce.go).

// MaxGroup bounds the commands appended in one group.
const MaxGroup = 100

type waiter struct {
	ctx   context.Context
	cmd   commands.Command
	reply commands.Reply
	done  chan struct{} // closed once reply is set
}

func (w *waiter) finish(r commands.Reply) {
	w.reply = r
	close(w.done)
}

// flight is what the groups being stored touch. Guarded by Engine.flightMu.
type flight struct {
	keys map[flightKey]int // → groups holding it
	n    int               // groups in flight
	idle chan struct{}     // closed when n drops to 0; nil while n is 0
	// chain is the message id of the last group message published while
	// groups are in flight ("": none, or the last group published was not
	// one): the next group message is conditional on it (coalesce.go).
	chain string
}

// flightKey is a subject, table or command id a group touches.
type flightKey struct {
	kind byte // 's'ubject, 't'able, 'i'd
	name string
}

func (f *flight) busy(keys ...flightKey) bool {
	for _, k := range keys {
		if f.keys[k] > 0 {
			return true
		}
	}
	return false
}

// combine queues a completion and returns its reply once some leader
// (possibly this goroutine) has handled it. Leadership is a token, not
// cmdMu itself, so a waiter whose command is done returns at once instead
// of queueing for the lock only to find nothing left to do.
func (e *Engine) combine(ctx context.Context, cmd commands.Command) commands.Reply {
	w := &waiter{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	e.queueMu.Lock()
	e.queue = append(e.queue, w)
	e.queueMu.Unlock()
	for {
		select {
		case <-w.done:
			return w.reply
		case e.lead <- struct{}{}:
		}
		e.queueMu.Lock()
		group := e.queue
		if len(group) > MaxGroup {
			group, e.queue = group[:MaxGroup:MaxGroup], group[MaxGroup:]
		} else {
			e.queue = nil
		}
		e.queueMu.Unlock()
		if len(group) == 0 {
			// w was taken by another leader and is in flight.
			<-e.lead
			<-w.done
			return w.reply
		}
		e.cmdMu.Lock()
		if e.closed {
			e.cmdMu.Unlock()
			<-e.lead
			for _, g := range group {
				g.finish(commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", ErrStopped)))
			}
			continue
		}
		pending, alone := e.startGroup(group)
		e.cmdMu.Unlock()
		<-e.lead
		if pending != nil {
			alone = append(pending.wait(ctx), alone...)
		}
		e.oneByOne(ctx, alone)
	}
}

// oneByOne sends commands through the one-at-a-time path once nothing is
// in flight.
func (e *Engine) oneByOne(ctx context.Context, ws []*waiter) {
	if len(ws) == 0 {
		return
	}
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	e.waitIdle(ctx)
	for _, w := range ws {
		if e.closed {
			w.finish(commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", ErrStopped)))
			continue
		}
		w.finish(e.decideAndAppend(w.ctx, w.cmd))
	}
}

// pendingGroup is a group published and not yet acknowledged.
type pendingGroup struct {
	e       *Engine
	batch   []*waiter
	decided []decide.Decision
	keys    []flightKey
	futures []jetstream.PubAckFuture // one per waiter; nil: not published
	evs     []events.Event           // the event each waiter's message stores
	started time.Time
	base    uint64                 // the stream's last sequence before the group's first append
	group   jetstream.PubAckFuture // the group message (Config.Coalesce); nil: one message each
	// coalesce: the group is stored as one group message (coalesce.go),
	// with message id id, conditional on the group message chain.
	coalesce  bool
	id, chain string
}

// startGroup decides a queue of commands, answers the rejected and the
// duplicates, and publishes the independent ones. The caller holds cmdMu.
// It returns the published group (nil if none), which must be waited for,
// and the commands for the one-at-a-time path.
func (e *Engine) startGroup(group []*waiter) (*pendingGroup, []*waiter) {
	p := &pendingGroup{e: e, batch: make([]*waiter, 0, len(group)), decided: make([]decide.Decision, 0, len(group)), keys: make([]flightKey, 0, 3*len(group))}
	var alone []*waiter
	seen := make(map[flightKey]bool, 3*len(group))
	e.flightMu.Lock()
	e.proj.Read(func(st *projections.State) {
		// The fencing token of the group's first append: the view's
		// sequence, or, behind groups still in flight, the sequence their
		// appends end at.
		p.base = st.Seq
		if e.flight.n > 0 {
			p.base = e.tail
		}
		if p.coalesce = e.cfg.Coalesce || st.Groups > 0; p.coalesce && e.flight.n > 0 && e.flight.chain == "" {
			// A group message follows only group messages in flight (it
			// is conditional on the last one's id): go alone.
			alone = append(alone, group...)
			return
		}
		for _, w := range group {
			m := w.cmd.Header()
			idKey := flightKey{'i', m.ID}
			if e.flight.busy(idKey) || seen[idKey] {
				alone = append(alone, w)
				continue
			}
			d, err := decide.Decide(st, w.cmd)
			if err != nil {
				w.finish(commands.Rejection(err))
				continue
			}
			aggregate := len(d.Expect.Subjects) > 0 // before fence replaces the condition
			e.fence(st, &d)
			if len(d.Events) == 0 {
				d.Reply.Accepted = true // a duplicate: what it got the first time
				w.finish(d.Reply)
				continue
			}
			c, single := d.Events[0].(events.IntervalsCompleted)
			if len(d.Events) != 1 || !single || !aggregate {
				alone = append(alone, w)
				continue
			}
			keys := [...]flightKey{idKey, {'s', c.Subject()}, {'t', c.Table}}
			if e.flight.busy(keys[:]...) || seen[keys[1]] || seen[keys[2]] {
				alone = append(alone, w)
				continue
			}
			for _, k := range keys {
				seen[k] = true
			}
			p.batch, p.decided, p.keys = append(p.batch, w), append(p.decided, d), append(p.keys, keys[:]...)
		}
	})
	if len(p.batch) > 0 {
		if e.flight.keys == nil {
			e.flight.keys = map[flightKey]int{}
		}
		e.flight.n++
		if e.flight.idle == nil {
			e.flight.idle = make(chan struct{})
		}
		for _, k := range p.keys {
			e.flight.keys[k]++
		}
		p.chain, e.flight.chain = e.flight.chain, ""
		if p.coalesce {
			p.id = "g:" + e.ids.New(time.Now())
			e.flight.chain = p.id
		}
	}
	e.flightMu.Unlock()
	if len(p.batch) == 0 {
		return nil, alone
	}
	p.publish()
	return p, alone
}

// waitIdle blocks until no group is in flight (or ctx ends).
func (e *Engine) waitIdle(ctx context.Context) {
	e.flightMu.Lock()
	idle := e.flight.idle
	e.flightMu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// land removes a finished group from the flight.
func (e *Engine) land(p *pendingGroup) {
	e.flightMu.Lock()
	defer e.flightMu.Unlock()
	for _, k := range p.keys {
		if e.flight.keys[k]--; e.flight.keys[k] == 0 {
			delete(e.flight.keys, k)
		}
	}
	if e.flight.n--; e.flight.n == 0 {
		close(e.flight.idle)
		e.flight.idle = nil
		e.flight.chain = ""
	}
}

// publish sends the group's messages, one publish each, all in flight at
// once. Each carries the fencing token it will meet if every append before
// it is stored: the group's base plus the messages sent before it (the
// stream stores one writer's publishes in order). Its decision was made on
// the view at the group's base; what lies between is the group's (and
// earlier groups') own completions, which write none of its subjects
// (decide.Decision). If one append fails, every later one fails its token
// too, and all of them go the one-at-a-time way. The caller holds cmdMu,
// which orders the groups and guards tail.
func (p *pendingGroup) publish() {
	e := p.e
	p.started = time.Now()
	if p.coalesce {
		p.publishGroup()
		return
	}
	p.futures = make([]jetstream.PubAckFuture, len(p.batch))
	p.evs = make([]events.Event, len(p.batch))
	next := p.base
	for k, w := range p.batch {
		m := w.cmd.Header()
		evs := e.commandEvents(m, commands.Digest(w.cmd), p.decided[k].Events)
		exp := p.decided[k].Expect
		token := next
		exp.LastSeq = &token
		p.evs[k] = evs[0]
		// No message id: the token alone stops a second copy (a retry
		// finds the stream past it), and the server keeps no dedupe
		// entry per append.
		if f, err := e.elog.AppendAsync("", evs[0], exp); err == nil {
			p.futures[k] = f
			next++
		}
	}
	e.tail = next
}

// wait collects the acks, waits for the projection to apply them, answers
// the stored commands, and returns the rest for the one-at-a-time path.
func (p *pendingGroup) wait(ctx context.Context) []*waiter {
	e := p.e
	if p.group != nil {
		return p.waitGroup(ctx)
	}
	seqs := make([]uint64, len(p.batch))
	var last uint64
	var fresh []int // acknowledged and not duplicates
	timeout := time.NewTimer(eventlog.AppendTimeout)
	defer timeout.Stop()
	for k, f := range p.futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				// Nothing was stored: the stream holds a message with this
				// id. The one-at-a-time path re-decides and proves it.
				e.log.Debug("group append: a duplicate ack; the command goes alone", "id", p.batch[k].cmd.Header().ID, "seq", ack.Sequence)
				continue
			}
			seqs[k] = ack.Sequence
			last = max(last, ack.Sequence)
			fresh = append(fresh, k)
		case err := <-f.Err():
			e.log.Debug("group append: one command goes alone", "id", p.batch[k].cmd.Header().ID, "err", err)
		case <-timeout.C:
		case <-ctx.Done():
		}
	}
	e.metrics.appendS.Observe(time.Since(p.started).Seconds())
	// Apply the group's own events in stream order; one acknowledged ahead
	// of an earlier group still collecting its acks is held until that
	// group applies its own (live.HoldOwn): the replies need not wait for
	// the consumer.
	slices.SortFunc(fresh, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
	for _, k := range fresh {
		e.proj.HoldOwn(seqs[k], p.evs[k])
	}
	var perr error
	if last > 0 {
		perr = e.waitFor(ctx, last)
	}
	var failed []*waiter
	n := 0
	for k, w := range p.batch {
		switch {
		case seqs[k] == 0:
			failed = append(failed, w)
		case perr != nil:
			w.finish(commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seqs[k], perr)))
		default:
			r := p.decided[k].Reply
			r.Accepted, r.Seq, r.Events = true, seqs[k], 1
			w.finish(r)
			n++
		}
	}
	if n > 0 {
		e.metrics.groups.Observe(float64(n))
	}
	e.land(p)
	return failed
}
