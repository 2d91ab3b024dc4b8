package engine

import (
	"context"

	"github.com/tidemark/tidemark/commands"
)

// The committer stores every completion, one group in flight (group.go).
// Once a group's acks are in, it applies the group, decides and publishes
// the next, and only then answers the group just stored (first, when
// another command holds cmdMu or commands wait for the one-at-a-time
// path): the next append starts as soon as the view holds the previous
// group, with no hand-off between goroutines (docs/performance.md: a
// group cycle was mostly goroutine wake-ups). A command that cannot go in
// a group goes the one-at-a-time way on the committer.

// committer is the committer goroutine's state.
type committer struct {
	kick    chan struct{} // capacity 1: the queue has grown
	stopped bool          // under Engine.queueMu: the committer exited; nothing is queued any more
}

// commit queues a completion for the committer and returns its reply.
func (e *Engine) commit(ctx context.Context, cmd commands.Command) commands.Reply {
	w := &waiter{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	e.queueMu.Lock()
	if e.co.stopped {
		e.queueMu.Unlock()
		return stopped()
	}
	e.queue = append(e.queue, w)
	e.queueMu.Unlock()
	select {
	case e.co.kick <- struct{}{}:
	default: // already kicked
	}
	<-w.done
	return w.reply
}

// stopped is the reply of an engine that is closing or closed.
func stopped() commands.Reply {
	return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", ErrStopped))
}

// commitLoop stores the queued completions, one group in flight at a
// time, until ctx ends; then it answers whatever is queued with
// ErrStopped.
func (e *Engine) commitLoop(ctx context.Context) {
	var p *pendingGroup // published, its acks not yet collected
	var alone []*waiter // for the one-at-a-time path
	for {
		if p != nil {
			alone = append(alone, p.collect(ctx)...)
		}
		stored := p
		answer := func() {
			if stored != nil {
				stored.answer()
			}
			stored = nil
		}
		p = nil
		if len(alone) > 0 {
			// Nothing is in flight now. The stored group is answered
			// first: the one-at-a-time path takes an append a command.
			answer()
			e.oneByOne(ctx, alone)
			alone = nil
		}
		if next := e.take(); len(next) > 0 {
			p, alone = e.publishNext(next, answer)
		}
		answer()
		if p != nil || len(alone) > 0 {
			continue
		}
		select {
		case <-e.co.kick:
		case <-ctx.Done():
			e.queueMu.Lock()
			e.co.stopped = true
			rest := e.queue
			e.queue = nil
			e.queueMu.Unlock()
			for _, w := range rest {
				w.finish(stopped())
			}
			return
		}
	}
}

// take takes up to MaxGroup commands from the queue.
func (e *Engine) take() []*waiter {
	e.queueMu.Lock()
	defer e.queueMu.Unlock()
	n := min(len(e.queue), MaxGroup)
	group := e.queue[:n:n]
	if e.queue = e.queue[n:]; len(e.queue) == 0 {
		e.queue = nil
	}
	return group
}

// publishNext decides group and publishes its independent commands
// (startGroup); it returns that group (nil: none) and the commands for
// the one-at-a-time path. When another command holds cmdMu (its own
// append may take an fsync), it calls answer first, so that the group
// just stored is not answered behind that command.
func (e *Engine) publishNext(group []*waiter, answer func()) (*pendingGroup, []*waiter) {
	if !e.cmdMu.TryLock() {
		answer()
		e.cmdMu.Lock()
	}
	defer e.cmdMu.Unlock()
	if e.closed {
		for _, w := range group {
			w.finish(stopped())
		}
		return nil, nil
	}
	return e.startGroup(group)
}

// oneByOne sends commands through the one-at-a-time path once nothing is
// in flight.
func (e *Engine) oneByOne(ctx context.Context, ws []*waiter) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	e.waitIdle(ctx)
	for _, w := range ws {
		if e.closed {
			w.finish(stopped())
			continue
		}
		w.finish(e.decideAndAppend(w.ctx, w.cmd))
	}
}

// waitIdle blocks until no group is in flight (or ctx ends). The caller
// holds cmdMu, which guards e.idle.
func (e *Engine) waitIdle(ctx context.Context) {
	if e.idle == nil {
		return
	}
	select {
	case <-e.idle:
	case <-ctx.Done():
	}
}
