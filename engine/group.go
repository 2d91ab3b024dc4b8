package engine

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Group commit. Completions are the hot path: workers report them from
// many connections at once. A completion waits in a queue; whoever holds
// cmdMu takes the whole queue, decides every command in it against the
// same view, and appends the independent ones together, all publishes in
// flight at once (one round trip for the group). Independent means one
// event each, on distinct snapshot subjects and distinct tables, with no
// repair debt closing: no decision in the group reads what another
// writes, so deciding them against one view is the same as deciding them
// in turn. Anything else, and any append that fails, goes through the
// one-at-a-time path, which re-reads and re-decides. (An atomic batch
// would buy one fsync for the group under SyncAlways, but costs
// milliseconds per batch on this server: measured, small groups got
// slower.)

// MaxGroup bounds the commands appended in one batch.
const MaxGroup = 100

type waiter struct {
	ctx   context.Context
	cmd   commands.Command
	reply commands.Reply
	done  bool // written and read under cmdMu
}

// combine queues cmd and either finds it handled by the holder of cmdMu
// or, holding cmdMu itself, handles the queue.
func (e *Engine) combine(ctx context.Context, cmd commands.Command) commands.Reply {
	w := &waiter{ctx: ctx, cmd: cmd}
	e.queueMu.Lock()
	e.queue = append(e.queue, w)
	e.queueMu.Unlock()
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	for !w.done {
		e.queueMu.Lock()
		group := e.queue
		if len(group) > MaxGroup {
			group, e.queue = group[:MaxGroup:MaxGroup], group[MaxGroup:]
		} else {
			e.queue = nil
		}
		e.queueMu.Unlock()
		if e.closed {
			for _, g := range group {
				g.reply, g.done = commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", ErrStopped)), true
			}
			continue
		}
		e.commitGroup(ctx, group)
	}
	return w.reply
}

// commitGroup handles a queue of commands. The caller holds cmdMu.
func (e *Engine) commitGroup(ctx context.Context, group []*waiter) {
	var batch []*waiter
	var decided []decision
	var alone []*waiter
	subjects, tables, ids := map[string]bool{}, map[string]bool{}, map[string]bool{}
	e.proj.read(func(st *projections.State) {
		for _, w := range group {
			m := w.cmd.Header()
			if seq, ok := st.Commands[m.ID]; ok {
				w.reply, w.done = duplicateReply(st, w.cmd, seq), true
				continue
			}
			d, err := e.decide(st, w.cmd)
			if err != nil {
				w.reply, w.done = commands.Rejection(err), true
				continue
			}
			c, single := d.payloads[0].(events.IntervalsCompleted)
			if len(d.payloads) != 1 || !single || d.expect.stream != nil || ids[m.ID] || subjects[c.Subject()] || tables[c.Table] {
				alone = append(alone, w)
				continue
			}
			ids[m.ID], subjects[c.Subject()], tables[c.Table] = true, true, true
			batch, decided = append(batch, w), append(decided, d)
		}
	})
	if len(batch) == 1 {
		alone, batch = append(batch, alone...), nil
	}
	if len(batch) > 1 {
		alone = append(e.appendGroup(ctx, batch, decided), alone...)
	}
	for _, w := range alone {
		w.reply, w.done = e.decideAndAppend(w.ctx, w.cmd), true
	}
}

// appendGroup appends one event per waiter, each its own conditional
// publish (its subject's expected sequence, its command's message id), all
// in flight at once: one round trip for the group. The events are
// independent, so each stands or falls alone; the ones that failed are
// returned for the one-at-a-time path.
func (e *Engine) appendGroup(ctx context.Context, batch []*waiter, decided []decision) []*waiter {
	futures := make([]jetstream.PubAckFuture, len(batch))
	var failed []*waiter
	started := time.Now()
	for k, w := range batch {
		m := w.cmd.Header()
		msgs, err := commandMsgs(m.ID, e.commandEvents(m, decided[k].payloads), decided[k].expect)
		if err != nil {
			failed = append(failed, w)
			continue
		}
		if futures[k], err = e.js.PublishMsgAsync(msgs[0]); err != nil {
			futures[k] = nil
			failed = append(failed, w)
		}
	}
	timeout := time.NewTimer(AppendTimeout)
	defer timeout.Stop()
	var last uint64
	seqs := make([]uint64, len(batch))
	for k, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			seqs[k] = ack.Sequence
			last = max(last, ack.Sequence)
		case err := <-f.Err():
			e.log.Debug("group append: one command goes alone", "id", batch[k].cmd.Header().ID, "err", err)
			failed = append(failed, batch[k])
		case <-timeout.C:
			failed = append(failed, batch[k])
		case <-ctx.Done():
			failed = append(failed, batch[k])
		}
	}
	e.metrics.appendS.Observe(time.Since(started).Seconds())
	if last > 0 {
		if err := e.proj.waitFor(ctx, last); err != nil {
			for k, w := range batch {
				if seqs[k] > 0 {
					w.reply = commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seqs[k], err))
					w.done = true
				}
			}
			return failed
		}
	}
	n := 0
	for k, w := range batch {
		if seqs[k] == 0 {
			continue
		}
		r := decided[k].reply
		r.Accepted, r.Seq, r.Events = true, seqs[k], 1
		w.reply, w.done = r, true
		n++
	}
	e.metrics.groups.Observe(float64(n))
	return failed
}
