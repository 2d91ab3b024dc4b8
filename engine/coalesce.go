package engine

import (
	"context"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Coalesced group commit (Config.Coalesce). Under SyncAlways the server
// fsyncs every stored message, so a group of completions stored as one
// group message (eventlog.AppendGroup) costs one fsync instead of one per
// command. The group's condition is the stream's last sequence: the view's
// own when nothing is in flight (nothing else was appended since the view
// its commands were decided on, so each decision still holds: the group's
// commands are independent, group.go), or, behind group messages still in
// flight, the sequence the last of them will take AND that last one's
// message id (each group message has a fresh one): so it is stored only
// right after that group message, which in turn was stored only right
// after its own predecessor, down to the view. A group that fails fails
// every later one in the chain; all of them go the one-at-a-time way. A
// group message never follows plain messages in flight.

// MaxGroupsInFlight is how many coalesced groups a coalescing engine has
// in flight: one. With fewer groups, each is larger (the commands that
// arrive while the others are stored), and under SyncAlways a stored
// message costs the same fsync whatever it carries (docs/performance.md
// measured two: smaller groups, no gain).
const MaxGroupsInFlight = 1

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

// publishGroup publishes the group's events as one group message under
// the view's sequence. The caller holds cmdMu.
func (p *pendingGroup) publishGroup() {
	e := p.e
	p.evs = make([]events.Event, len(p.batch))
	for k, w := range p.batch {
		m := w.cmd.Header()
		p.evs[k] = e.commandEvents(m, commands.Digest(w.cmd), p.decided[k].Events)[0]
	}
	cond := eventlog.GroupCondition{LastSeq: p.base, MsgID: p.id, LastMsgID: p.chain}
	f, err := e.elog.AppendGroupAsync(p.evs, cond)
	if err != nil {
		e.log.Debug("group append failed; the commands go alone", "err", err)
		return
	}
	p.group = f
	e.tail = p.base + 1
}

// waitGroup collects the group message's ack, applies its events, answers
// its commands, and returns them all for the one-at-a-time path when it
// was not stored (or may not have been: that path re-reads first).
func (p *pendingGroup) waitGroup(ctx context.Context) []*waiter {
	seq, perr := p.collect(ctx)
	if seq == 0 {
		return p.batch
	}
	p.answer(seq, perr)
	return nil
}

// collect waits for the group message's ack, applies its events to the
// live projection and lands the group. It returns the sequence the group
// was stored at (0: not stored, or not known to be: its commands go the
// one-at-a-time way, which re-reads first) and the projection's error.
func (p *pendingGroup) collect(ctx context.Context) (uint64, error) {
	e := p.e
	var seq uint64
	timeout := time.NewTimer(eventlog.AppendTimeout)
	defer timeout.Stop()
	if p.group != nil { // nil: the publish failed
		select {
		case ack := <-p.group.Ok():
			if !ack.Duplicate { // a duplicate stored nothing
				seq = ack.Sequence
			}
		case err := <-p.group.Err():
			e.log.Debug("group append: the commands go alone", "n", len(p.batch), "err", eventlog.MapErr(err))
		case <-timeout.C:
		case <-ctx.Done():
		}
	}
	e.metrics.appendS.Observe(time.Since(p.started).Seconds())
	var perr error
	if seq != 0 {
		e.proj.ApplyOwnGroup(seq, p.evs, true)
		perr = e.waitFor(ctx, seq)
	}
	e.land(p)
	return seq, perr
}

// answer replies to the commands of a group stored at seq (perr: the
// projection did not catch up with it).
func (p *pendingGroup) answer(seq uint64, perr error) {
	for k, w := range p.batch {
		if perr != nil {
			w.finish(commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seq, perr)))
			continue
		}
		r := p.decided[k].Reply
		r.Accepted, r.Seq, r.Events = true, seq, 1
		w.finish(r)
	}
	p.e.metrics.groups.Observe(float64(len(p.batch)))
}
