package engine

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Group commit. Completions are the hot path: workers report them from
// many connections at once. Each waits in a queue for the committer
// (committer.go), which decides the queued commands against one view,
// publishes the independent ones as one group, collects its acks, applies
// what was stored to the live projection and answers.
//
// Independent means one event each, on distinct snapshot subjects, tables
// and command ids, with no repair debt closing: no decision reads what
// another in the group writes, so deciding them against one view is the
// same as deciding them in turn. Every other command goes the
// one-at-a-time way, which re-reads and re-decides; so does every command
// whose append failed or may have.
//
// The group's form. Under Config.Coalesce, or once the stream holds a
// group message, it is one group message (eventlog.AppendGroup)
// conditional on the view's sequence: one fsync under SyncAlways.
// Otherwise each command is a message of its own, all pipelined, each
// under its per-subject condition and the fencing token it meets if every
// message before it is stored: the view's sequence plus the messages sent
// before it (the stream stores one writer's publishes in order). What
// lies between is the group's own completions, which write none of its
// subjects; if one append fails, every later one fails its token too. Not
// an atomic batch: on a single-replica file store the server stages each
// in a file store of its own, which costs more than the fsyncs it saves
// (docs/performance.md).

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

// groupKey is a subject, table or command id a group's command touches.
type groupKey struct {
	kind byte // 's'ubject, 't'able, 'i'd
	name string
}

// pendingGroup is a group published and not yet answered.
type pendingGroup struct {
	e       *Engine
	batch   []*waiter
	decided []decide.Decision
	evs     []events.Event           // the event each command stores
	futures []jetstream.PubAckFuture // one per message; nil: not published
	token   string                   // the group message's (eventlog.Log.PublishGroup)
	seqs    []uint64                 // where each command's event is stored (0: not, or not known)
	perr    error                    // the projection did not catch up with the group
	base    uint64                   // the view's sequence, the first message's fencing token
	group   bool                     // one group message
	started time.Time
	idle    chan struct{} // closed once the group is applied (or failed)
}

// fence replaces d's per-subject conditions with the stream's last
// sequence st.Seq when per-subject conditions cannot be used: when this
// engine coalesces (a group message's events are not stored on their own
// subjects), or when the stream already holds a group message (the
// server's per-subject last sequences then miss its events). The stream
// condition implies every per-subject one. The caller holds the view.
func (e *Engine) fence(st *projections.State, d *decide.Decision) {
	if len(d.Expect.Subjects) == 0 || (!e.cfg.Coalesce && st.Groups == 0) {
		return
	}
	d.Expect = events.ExpectStream(st.Seq)
}

// startGroup decides queued commands against one view, answers the
// rejected and the duplicates, and publishes the independent ones. It
// returns the published group (nil if none), whose acks collect waits
// for, and the commands for the one-at-a-time path. The caller holds
// cmdMu, with nothing in flight.
func (e *Engine) startGroup(queue []*waiter) (*pendingGroup, []*waiter) {
	n := len(queue)
	p := &pendingGroup{e: e, batch: make([]*waiter, 0, n), decided: make([]decide.Decision, 0, n)}
	var alone []*waiter
	seen := make(map[groupKey]bool, 3*n)
	e.proj.Read(func(st *projections.State) {
		p.base, p.group = st.Seq, e.cfg.Coalesce || st.Groups > 0
		for _, w := range queue {
			idKey := groupKey{'i', w.cmd.Header().ID}
			if seen[idKey] {
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
			keys := [...]groupKey{idKey, {'s', c.Subject()}, {'t', c.Table}}
			if seen[keys[1]] || seen[keys[2]] {
				alone = append(alone, w)
				continue
			}
			for _, k := range keys {
				seen[k] = true
			}
			p.batch, p.decided = append(p.batch, w), append(p.decided, d)
		}
	})
	if len(p.batch) == 0 {
		return nil, alone
	}
	p.idle = make(chan struct{})
	e.idle = p.idle
	p.publish()
	return p, alone
}

// publish sends the group's messages in its form (see the top of this
// file) without waiting for their acks. The caller holds cmdMu.
func (p *pendingGroup) publish() {
	e := p.e
	p.started = time.Now()
	p.evs = make([]events.Event, len(p.batch))
	for k, w := range p.batch {
		p.evs[k] = w.cmd.Header().Events(e.ids, commands.Digest(w.cmd), p.decided[k].Events)[0]
	}
	if p.group {
		var err error
		if p.token, err = e.elog.PublishGroup(p.evs, eventlog.GroupCondition{LastSeq: p.base}); err != nil {
			e.log.Debug("group append failed; the commands go alone", "err", err)
		}
		return
	}
	p.futures = make([]jetstream.PubAckFuture, len(p.batch))
	next := p.base
	for k, ev := range p.evs {
		exp := p.decided[k].Expect
		token := next
		exp.LastSeq = &token
		// No message id: the token alone stops a second copy (a retry
		// finds the stream past it), and the server keeps no dedupe entry
		// per append.
		if f, err := e.elog.AppendAsync("", ev, exp); err == nil {
			p.futures[k] = f
			next++
		}
	}
}

// collect waits for every ack of the group, applies the events stored to
// the live projection in stream order, waits until it holds them, and
// marks the group landed. It returns the commands not stored (or not
// known to be), for the one-at-a-time path, which re-reads first.
func (p *pendingGroup) collect(ctx context.Context) []*waiter {
	e := p.e
	p.seqs = make([]uint64, len(p.batch))
	actx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
	defer cancel()
	if p.token != "" {
		var err error
		if p.seqs[0], err = e.elog.AwaitGroup(actx, p.token); err != nil {
			e.log.Debug("group append: the commands go alone", "err", err)
		}
	}
	for k, f := range p.futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if ack.Duplicate { // nothing was stored
				e.log.Debug("group append: a duplicate ack; the command goes alone", "seq", ack.Sequence)
				continue
			}
			p.seqs[k] = ack.Sequence
		case err := <-f.Err():
			e.log.Debug("group append: the command goes alone", "err", eventlog.MapErr(err))
		case <-actx.Done():
		}
	}
	e.metrics.appendS.Observe(time.Since(p.started).Seconds())
	var last uint64
	if p.group {
		if last = p.seqs[0]; last != 0 {
			for k := range p.seqs {
				p.seqs[k] = last
			}
			e.proj.ApplyOwnGroup(last, p.evs, true)
		}
	} else {
		// Each message's token puts it right after the one before it: the
		// stored ones come in stream order. One the projection cannot
		// apply now (its predecessor's ack was lost) the consumer applies.
		for k, seq := range p.seqs {
			if seq != 0 {
				e.proj.ApplyOwn(seq, p.evs[k])
				last = max(last, seq)
			}
		}
	}
	if last != 0 {
		p.perr = e.waitFor(ctx, last)
	}
	close(p.idle)
	var alone []*waiter
	for k, w := range p.batch {
		if p.seqs[k] == 0 {
			alone = append(alone, w)
		}
	}
	return alone
}

// answer replies to the group's stored commands (collect returned the
// others).
func (p *pendingGroup) answer() {
	n := 0
	for k, w := range p.batch {
		switch seq := p.seqs[k]; {
		case seq == 0:
		case p.perr != nil:
			w.finish(commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seq, p.perr)))
		default:
			r := p.decided[k].Reply
			r.Accepted, r.Seq, r.Events = true, seq, 1
			w.finish(r)
			n++
		}
	}
	if n > 0 {
		p.e.metrics.groups.Observe(float64(n))
	}
}
