package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/lease"
	"github.com/tidemark/tidemark/transport"
)

// One writer. Of the engines sharing a stream, the one holding the writer
// lease (package lease) decides and appends; the others forward every
// command that writes to it (transport.Forward) and answer queries from
// their own projections, after waiting for the client's after_seq. The
// lease is for liveness; safety is the fencing token every append carries
// (the stream sequence its decision read, decide.Decision.Expect): a
// deposed writer that has not noticed yet fails its append and, after
// re-reading, forwards.
//
// Taking the lease, the engine first folds everything the stream holds
// (what the previous writer acknowledged), then serves forwarded commands.
// Losing it, it stops serving them before anything else.

// roleLoop follows the lease: it serves forwarded commands while this
// engine holds it.
func (e *Engine) roleLoop(ctx context.Context) {
	var w *transport.Writer
	defer func() {
		e.setWriting(false)
		if w != nil {
			w.Stop()
		}
	}()
	for {
		changed := e.lease.Changed()
		held, _ := e.lease.Held()
		switch {
		case held && w == nil:
			if err := e.catchUpAsWriter(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				e.log.Warn("writer lease held but the stream could not be read; retrying", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			sw, err := transport.ServeWriter(e.nc, e, 0, 0, e.log)
			if err != nil {
				e.log.Warn("serving forwarded commands", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			w = sw
			e.setWriting(true)
		case !held && w != nil:
			e.setWriting(false)
			w.Stop()
			w = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// catchUpAsWriter folds what the stream holds, bounded.
func (e *Engine) catchUpAsWriter(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
	defer cancel()
	return e.CatchUp(cctx)
}

func (e *Engine) setWriting(on bool) {
	e.roleMu.Lock()
	defer e.roleMu.Unlock()
	if e.writing == on {
		return
	}
	e.writing = on
	close(e.roleChanged)
	e.roleChanged = make(chan struct{})
}

// Writing reports whether this engine is the writer now, and a channel
// closed when that changes. The loops that issue commands on their own
// (scheduler, catch-up driver, work publisher) run only on the writer.
func (e *Engine) Writing() (bool, <-chan struct{}) {
	e.roleMu.Lock()
	defer e.roleMu.Unlock()
	return e.writing, e.roleChanged
}

// Writer is the lease's holder as this engine last saw it.
func (e *Engine) Writer() lease.Holder {
	_, h := e.lease.Held()
	return h
}

// AwaitWriting blocks until this engine is the writer (or ctx ends).
func (e *Engine) AwaitWriting(ctx context.Context) error {
	for {
		on, changed := e.Writing()
		if on {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// forward sends cmd to the writer. The engine's own commands (reserved
// ids: a scheduler tick, a catch-up retry) go too: the forwarding subject
// lies in the engine's account, out of every client's reach. Like a
// command carried out here, the reply comes once this engine's projection
// has applied what it stored (read-your-writes on this engine too).
func (e *Engine) forward(ctx context.Context, cmd commands.Command) commands.Reply {
	r, err := transport.Forward(ctx, e.nc, cmd)
	if err != nil {
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	if r.Seq > 0 {
		if err := e.waitFor(ctx, r.Seq); err != nil {
			return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "stored at seq %d by the writer, but this engine did not apply it: %v", r.Seq, err))
		}
	}
	return r
}

// awaitSeq waits until the projection has applied seq (a client's
// after_seq): read-your-writes on any engine. A sequence the stream does
// not hold yet is refused at once.
func (e *Engine) awaitSeq(ctx context.Context, seq uint64) error {
	if seq <= e.proj.Seq() {
		return nil
	}
	last, err := e.LastSeq(ctx)
	if err != nil {
		return commands.Errorf(commands.CodeUnavailable, "", "%v", err)
	}
	if seq > last {
		return commands.Errorf(commands.CodeInvalid, "after_seq", "after_seq %d is beyond the stream's last sequence %d", seq, last)
	}
	if err := e.waitFor(ctx, seq); err != nil {
		return commands.Errorf(commands.CodeUnavailable, "", "waiting for seq %d: %v", seq, err)
	}
	return nil
}

// nodeName names this engine in the lease: the server's name and a fresh
// id, unique per Open.
func nodeName(server string) string {
	return fmt.Sprintf("%s/%s", server, commands.NewID())
}
