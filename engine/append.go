package engine

import (
	"context"
	"errors"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/projections"
)

// decideAndAppend decides one command and appends its events, re-deciding
// after a conflict. The caller holds cmdMu.
func (e *Engine) decideAndAppend(ctx context.Context, cmd commands.Command) commands.Reply {
	m := cmd.Header()
	digest := commands.Digest(cmd)
	var lastErr error
	for attempt := 0; attempt <= e.cfg.MaxRetries; attempt++ {
		var d decide.Decision
		var err error
		e.proj.Read(func(st *projections.State) {
			if d, err = decide.Decide(st, cmd); err == nil {
				e.fence(st, &d)
			}
		})
		if err != nil {
			return commands.Rejection(err)
		}
		if len(d.Events) == 0 {
			d.Reply.Accepted = true
			return d.Reply
		}
		evs := m.Events(e.ids, digest, d.Events)
		started := time.Now()
		actx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
		seq, err := e.elog.Append(actx, eventlog.MsgID(cmd.Kind(), m.ID, commands.IsInternalID(m.ID)), evs, d.Expect)
		cancel()
		e.metrics.appendS.Observe(time.Since(started).Seconds())
		switch {
		case err == nil:
			// The writer's own events are the stream's next ones: apply
			// them now, so the reply need not wait for the consumer (which
			// stalls for seconds when its server stops).
			first := seq + 1 - uint64(len(evs))
			for i, ev := range evs {
				if !e.proj.ApplyOwn(first+uint64(i), ev) {
					break
				}
			}
			if err := e.waitFor(ctx, seq); err != nil {
				return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seq, err))
			}
			d.Reply.Accepted, d.Reply.Seq, d.Reply.Events = true, seq, len(evs)
			return d.Reply
		case errors.Is(err, eventlog.ErrConflict), errors.Is(err, eventlog.ErrAmbiguous):
			lastErr = err
			if errors.Is(err, eventlog.ErrAmbiguous) {
				// Not the normal race of two writers: the server did not
				// answer the append in time (a slow or electing stream).
				e.log.Warn("append outcome unknown; re-reading the stream and deciding again", "kind", cmd.Kind(), "id", m.ID, "attempt", attempt, "err", err)
			} else {
				e.log.Debug("re-deciding", "kind", cmd.Kind(), "id", m.ID, "attempt", attempt, "err", err)
			}
			cctx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
			cerr := e.CatchUp(cctx)
			cancel()
			if cerr != nil && ctx.Err() == nil && attempt < e.cfg.MaxRetries {
				// The stream may be electing a leader: try again.
				e.log.Debug("re-reading the stream failed; retrying", "err", cerr)
				continue
			}
			if cerr != nil {
				return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "re-reading the stream: %v", cerr))
			}
		default:
			return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "append: %v", err))
		}
	}
	return commands.Rejection(commands.Errorf(commands.CodeConflict, "", "the state kept changing: gave up after %d attempts (nothing was appended; the last: %v)", e.cfg.MaxRetries+1, lastErr))
}
