package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// projector keeps a live projections.State folded from the stream by an
// ordered consumer. It is the only writer of its state.
type projector struct {
	mu      sync.RWMutex
	st      *projections.State
	changed chan struct{} // closed and replaced after every applied event
	err     error         // set when the consumer stops for good
	log     *slog.Logger
	lastID  string // id of the last decoded event applied
	folded  uint64 // events applied since the projector started
	pending uint64 // events in the stream after the last one delivered
	// probe, when set, tells a stalled wait whether the stream still
	// holds from..to (nil) or lost some of them (a *eventlog.Damage).
	probe func(ctx context.Context, from, to uint64) error
	// lastSeq, when set, is the stream's last sequence (for reports).
	lastSeq func(ctx context.Context) (uint64, error)
	failed  chan struct{} // closed when err is set
}

// lag is how many stored events the projection has not applied yet, as of
// the last delivery.
func (p *projector) lag() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.pending
}

func newProjector(log *slog.Logger) *projector {
	return &projector{st: projections.New(), changed: make(chan struct{}), failed: make(chan struct{}), log: log}
}

// read runs fn with the state under the read lock. fn must not keep st.
func (p *projector) read(fn func(st *projections.State)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	fn(p.st)
}

func (p *projector) seq() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st.Seq
}

// waitFor blocks until the state has applied seq. It never waits for an
// event that is not there: when nothing was applied for stallProbe it
// probes the stream, and a sequence the stream lost fails the projection
// with the damage at once; when the events are there but still not
// delivered after stallLimit, it gives up.
func (p *projector) waitFor(ctx context.Context, seq uint64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last, suspect uint64
	var since time.Time
	for {
		p.mu.RLock()
		cur, ch, err := p.st.Seq, p.changed, p.err
		p.mu.RUnlock()
		if cur >= seq {
			return nil
		}
		if err != nil {
			return err
		}
		if since.IsZero() || cur != last {
			last, since = cur, time.Now()
		}
		if timer == nil {
			timer = time.NewTimer(stallProbe)
		} else {
			timer.Reset(stallProbe)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: waiting for projection to reach seq %d (at %d): %w", seq, cur, ctx.Err())
		case <-ch:
		case <-timer.C:
			if p.probe == nil {
				continue
			}
			perr := p.probe(ctx, cur+1, seq)
			if d, ok := eventlog.IsDamage(perr); ok {
				// Twice in a row, a stall probe apart: a server that just
				// became the stream's leader does not count as damage.
				if suspect == cur+1 {
					p.log.Error("the event stream lost events", "err", d)
					p.fail(damaged(d))
					continue
				}
				suspect = cur + 1
				continue
			}
			suspect = 0
			if perr != nil {
				p.log.Warn("projection stalled; cannot probe the stream", "at", cur, "want", seq, "err", perr)
			}
			if stalled := time.Since(since); stalled >= stallLimit {
				return fmt.Errorf("engine: the projection applied nothing for %s at seq %d although the stream holds seq %d", stalled.Round(time.Second), cur, cur+1)
			}
		}
	}
}

// watch returns a channel closed when the next event is applied (or the
// projection fails). Take it before reading the state, so no change is
// missed between the read and the wait.
func (p *projector) watch() (<-chan struct{}, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.changed, p.err
}

// apply folds the event delivered at seq, with pending more after it.
func (p *projector) apply(e eventlog.Entry) {
	seq, subject, pending, ev, derr := e.Seq, e.Subject, e.Pending, e.Event, e.Err
	p.mu.RLock()
	applied := seq <= p.st.Seq
	p.mu.RUnlock()
	if applied {
		return // this engine's own event, applied when its append was acknowledged
	}
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	if seq > p.st.Seq+1 {
		// The consumer skipped sequences: the server could not load them.
		// The stream denies deletes, so they are lost events; the
		// projection cannot be right without them.
		d := &eventlog.Damage{LastSeq: seq + pending, Missing: []eventlog.Span{{First: p.st.Seq + 1, Last: seq - 1}}}
		p.mu.Unlock()
		if p.lastSeq != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if last, err := p.lastSeq(ctx); err == nil {
				d.LastSeq = max(last, seq)
			}
			cancel()
		}
		p.log.Error("the event stream lost events", "err", d)
		p.fail(damaged(d))
		return
	}
	if seq > p.st.Seq {
		p.folded++
		p.lastID = ev.ID
	}
	if derr != nil {
		projections.Skip(p.st, seq, subject)
	} else if err := projections.Apply(p.st, seq, ev); err != nil {
		p.log.Warn("event not applied", "seq", seq, "err", err)
	}
	p.notify()
	p.mu.Unlock()
	if derr != nil {
		p.log.Warn("event skipped", "seq", seq, "subject", subject, "err", derr)
	}
}

// applyOwn applies an event this engine appended, acknowledged at seq,
// without waiting for the consumer to deliver it back: only when it is the
// very next event (nothing from another writer lies between), else it
// reports false and the consumer applies it as usual. ev must be the event
// exactly as stored (not a duplicate's ack, whose stored event is the
// first attempt's).
func (p *projector) applyOwn(seq uint64, ev events.Event) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil || seq != p.st.Seq+1 {
		return false
	}
	p.folded++
	p.lastID = ev.ID
	if err := projections.Apply(p.st, seq, ev); err != nil {
		p.log.Warn("event not applied", "seq", seq, "err", err)
	}
	p.notify()
	return true
}

// notify wakes whoever watches for the next change. The caller holds mu.
func (p *projector) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// fail stops the projection for good with err (the first failure stays).
func (p *projector) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	p.err = err
	close(p.failed)
	p.notify()
}

// run folds the stream from the state's next sequence until ctx ends.
func (p *projector) run(ctx context.Context, r *eventlog.Reader) error {
	err := r.Tail(ctx, p.seq()+1, func(e eventlog.Entry) error {
		p.apply(e)
		p.mu.Lock()
		p.pending = e.Pending
		p.mu.Unlock()
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("engine: projection: %w", err)
}

// Watch returns a channel closed at the next change of the live projection
// (an applied event), and the projection's failure, if it has failed.
func (e *Engine) Watch() (<-chan struct{}, error) { return e.proj.watch() }

// Await blocks until cond holds on the live projection (checked after
// every applied event) or ctx ends.
func (e *Engine) Await(ctx context.Context, cond func(st *projections.State) bool) error {
	for {
		changed, err := e.proj.watch()
		ok := false
		e.View(func(st *projections.State) { ok = cond(st) })
		if ok {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
