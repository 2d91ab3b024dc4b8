// Package live keeps a projections.State current with the event log: a
// Projection folds every event eventlog.Reader.Tail delivers, in order,
// and is the state's only writer. Readers look at it under its read lock
// (Read), wait for a sequence (WaitFor) or a condition (Await), or watch
// for the next change (Watch).
//
// Invariants. The state at Seq is the fold of events 1..Seq (or of a
// checkpoint at its Seq and the events after it): an event is applied
// once, in stream order, and never one out of turn. A writer may apply
// the events it appended itself (ApplyOwn) only when each is the very
// next. A message is applied whole: a group message's events under one
// lock. The stream denies deletes, so a sequence the log skips or does not
// hold is lost: the projection then fails for good (Failed, Err, an error
// wrapping the *eventlog.Damage) rather than fold a state that is wrong.
// A wait never hangs on an event that is not there.
//
// Importers: engine (its live state), checkpoint, and whatever reads the
// state (web, scheduler). It imports eventlog, projections and events.
package live

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

// Stall bounds, while a wait is on a sequence: after StallProbe without
// progress it asks the stream whether the next sequence is there at all
// (missing: the projection fails with the damage at once); after
// StallLimit without progress although it is there, the wait gives up.
const (
	StallProbe = time.Second
	StallLimit = 30 * time.Second
)

// Projection is a projections.State kept current by Tail.
type Projection struct {
	r       *eventlog.Reader
	log     *slog.Logger
	mu      sync.RWMutex
	st      *projections.State
	changed chan struct{} // closed and replaced after every applied event
	err     error         // set when the projection stops for good
	failed  chan struct{} // closed when err is set
	lastID  string        // id of the last decoded event applied
	folded  uint64        // events applied since the projection started
	pending uint64        // events in the stream after the last one delivered
}

// Stats describes a projection.
type Stats struct {
	// Seq is the last sequence applied.
	Seq uint64 `json:"seq"`
	// Folded counts the events applied since New (not those the starting
	// state brought in).
	Folded uint64 `json:"folded"`
	// Lag is how many stored events were not applied yet at the last
	// delivery.
	Lag uint64 `json:"lag"`
}

// New returns a projection of r's stream that starts from the state from
// (nil: an empty one), which it then owns. Run folds the events after it.
func New(r *eventlog.Reader, from *projections.State, log *slog.Logger) *Projection {
	if from == nil {
		from = projections.New()
	}
	if log == nil {
		log = slog.Default()
	}
	return &Projection{r: r, log: log, st: from, changed: make(chan struct{}), failed: make(chan struct{})}
}

// Run folds the stream from the state's next sequence until ctx ends
// (then it returns nil) or the log cannot be followed (then the projection
// fails with the error, which Run returns).
func (p *Projection) Run(ctx context.Context) error {
	var held []eventlog.Entry // a group message's events, until its last
	// The owner's events applied on their acks are not decoded again.
	have := func(seq uint64) bool { return seq <= p.Seq() }
	err := p.r.WithLogger(p.log).WithHave(have).Tail(ctx, p.Seq()+1, func(e eventlog.Entry) error {
		if e.Count > 0 {
			// A group message is applied whole, under one lock: no reader
			// sees its sequence with some of its events missing.
			if len(held) > 0 && held[0].Seq != e.Seq {
				held = held[:0]
			}
			if held = append(held, e); e.Index < e.Count-1 {
				return nil
			}
			p.apply(held)
			held = held[:0]
		} else {
			p.apply([]eventlog.Entry{e})
		}
		p.mu.Lock()
		p.pending = e.Pending
		p.mu.Unlock()
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	err = fmt.Errorf("live: projection: %w", err)
	p.Fail(err)
	return err
}

// Read runs fn with the state under the read lock. fn must not keep or
// modify st.
func (p *Projection) Read(fn func(st *projections.State)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	fn(p.st)
}

// ReadLast is Read with the id of the event at st.Seq ("" when none was
// applied since New), for a checkpoint.
func (p *Projection) ReadLast(fn func(st *projections.State, lastID string)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	fn(p.st, p.lastID)
}

// Seq is the last sequence applied.
func (p *Projection) Seq() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st.Seq
}

// Stats returns the projection's statistics.
func (p *Projection) Stats() Stats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return Stats{Seq: p.st.Seq, Folded: p.folded, Lag: p.pending}
}

// Failed is closed when the projection has stopped for good (Err says
// why).
func (p *Projection) Failed() <-chan struct{} { return p.failed }

// Err is why the projection stopped for good (nil while it runs). A lost
// event makes it an error wrapping the *eventlog.Damage.
func (p *Projection) Err() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.err
}

// WaitFor blocks until the state has applied seq. It never waits for an
// event that is not there: when nothing was applied for StallProbe it
// probes the stream, and a sequence the stream lost fails the projection
// with the damage at once; when the events are there but still not
// delivered after StallLimit, it gives up.
func (p *Projection) WaitFor(ctx context.Context, seq uint64) error {
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
			timer = time.NewTimer(StallProbe)
		} else {
			timer.Reset(StallProbe)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("live: waiting for projection to reach seq %d (at %d): %w", seq, cur, ctx.Err())
		case <-ch:
		case <-timer.C:
			perr := p.probe(ctx, cur+1, seq)
			if d, ok := eventlog.IsDamage(perr); ok {
				// Twice in a row, a stall probe apart: a server that just
				// became the stream's leader does not count as damage.
				if suspect == cur+1 {
					p.log.Error("the event stream lost events", "err", d)
					p.Fail(d)
					continue
				}
				suspect = cur + 1
				continue
			}
			suspect = 0
			if perr != nil {
				p.log.Warn("projection stalled; cannot probe the stream", "at", cur, "want", seq, "err", perr)
			}
			if stalled := time.Since(since); stalled >= StallLimit {
				return fmt.Errorf("live: the projection applied nothing for %s at seq %d although the stream holds seq %d", stalled.Round(time.Second), cur, cur+1)
			}
		}
	}
}

// probe is the stall check: nil when the events from..to are all there
// (the consumer is just slow), else the damage.
func (p *Projection) probe(ctx context.Context, from, to uint64) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.r.Probe(pctx, from, to)
}

// Watch returns a channel closed when the next event is applied (or the
// projection fails), and the failure, if it has failed. Take it before
// reading the state, so no change is missed between the read and the
// wait.
func (p *Projection) Watch() (<-chan struct{}, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.changed, p.err
}

// Await blocks until cond holds on the state (checked after every applied
// event), the projection fails, or ctx ends.
func (p *Projection) Await(ctx context.Context, cond func(st *projections.State) bool) error {
	for {
		changed, err := p.Watch()
		ok := false
		p.Read(func(st *projections.State) { ok = cond(st) })
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

// apply folds the events of one stored message (one, or a group
// message's, in order).
func (p *Projection) apply(es []eventlog.Entry) {
	seq, pending := es[0].Seq, es[0].Pending
	p.mu.RLock()
	applied := seq <= p.st.Seq
	p.mu.RUnlock()
	if applied {
		return // the writer's own event, applied when its append was acknowledged
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if last, err := p.r.LastSeq(ctx); err == nil {
			d.LastSeq = max(last, seq)
		}
		cancel()
		p.log.Error("the event stream lost events", "err", d)
		p.Fail(d)
		return
	}
	var bad []eventlog.Entry
	for _, e := range es {
		p.folded++
		p.lastID = e.Event.ID
		if e.Err != nil {
			bad = append(bad, e)
		}
		if err := projections.ApplyRecord(p.st, e.Record); err != nil {
			p.log.Warn("event not applied", "seq", seq, "index", e.Index, "err", err)
		}
	}
	p.notify()
	p.mu.Unlock()
	for _, e := range bad {
		p.log.Warn("event skipped", "seq", seq, "index", e.Index, "subject", e.Subject, "err", e.Err)
	}
}

// ApplyOwn applies an event the caller appended, acknowledged at seq,
// without waiting for Tail to deliver it back: only when it is the very
// next event (nothing from another writer lies between), else it reports
// false and Run applies it as usual. ev must be the event exactly as
// stored (not a duplicate's ack, whose stored event is the first
// attempt's).
func (p *Projection) ApplyOwn(seq uint64, ev events.Event) bool {
	return p.ApplyOwnGroup(seq, []events.Event{ev}, false)
}

// ApplyOwnGroup is ApplyOwn for the events of one message: a group
// message (eventlog.AppendGroup) when group, else one event. They are
// applied together, under one lock.
func (p *Projection) ApplyOwnGroup(seq uint64, evs []events.Event, group bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil || seq != p.st.Seq+1 || len(evs) == 0 {
		return false
	}
	p.applyNext(seq, evs, group)
	p.notify()
	return true
}

// applyNext applies the events of the message at seq, the state's next
// sequence (a group message's when group). The caller holds mu for
// writing and notifies.
func (p *Projection) applyNext(seq uint64, evs []events.Event, group bool) {
	for i, ev := range evs {
		p.folded++
		p.lastID = ev.ID
		r := events.Record{Seq: seq, Subject: ev.Payload.Subject(), Event: ev}
		if group {
			r.Index, r.Count = i, len(evs)
		}
		if err := projections.ApplyRecord(p.st, r); err != nil {
			p.log.Warn("event not applied", "seq", seq, "index", i, "err", err)
		}
	}
}

// notify wakes whoever watches for the next change. The caller holds mu.
func (p *Projection) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Fail stops the projection for good with err (the first failure stays):
// it applies nothing more, and every wait returns err. The owner fails it
// when it finds the log damaged by other means (events lost under a
// checkpoint).
func (p *Projection) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	p.err = err
	close(p.failed)
	p.notify()
}
