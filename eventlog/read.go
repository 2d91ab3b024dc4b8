package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
)

// ReadOptions bounds a Read.
type ReadOptions struct {
	// AtSeq stops after this stream sequence (0: the stream's last
	// sequence when Read is called).
	AtSeq uint64
	// At, when set, stops before the first event that occurred after it
	// (event time, the command clock; an undecodable event does not stop
	// the read). The result is a prefix of the stream: history as it
	// stood at At.
	At time.Time
	// Progress, when set, is called as records arrive with the sequence
	// read and the last sequence to read.
	Progress func(seq, last uint64)
	// Stall is how long the read waits for the consumer's next message
	// before it reads the rest one sequence at a time with direct gets
	// (which tell a missing message from a slow one). Default
	// DefaultStall.
	Stall time.Duration
	// CheckOnly reads message headers only, decodes and returns no
	// records: the read just finds the sequences the stream lost.
	CheckOnly bool
	// MinLastSeq is a sequence the stream is known to have reached (a
	// projection checkpoint was taken there): a shorter stream lost its
	// tail, and the read reports it missing.
	MinLastSeq uint64
	// Each, when set, is handed every record in stream order as it is
	// read, and Read returns none: a fold over the whole stream then holds
	// its state, not the stream.
	Each func(events.Record)
}

// DefaultStall is ReadOptions.Stall's default.
const DefaultStall = 2 * time.Second

// Read loads the prefix of the stream that opts select, from the
// stream start, with batched direct gets (no consumer, see direct.go), or
// an ordered consumer where the server or stream has none.
//
// It never waits for a message that is not there: it knows from the
// stream's state which sequences to expect, and a sequence the read skips,
// or one the consumer still has not delivered after Stall, is read directly
// or found missing. When the stream lost events, or holds messages that
// are not tidemark events, Read returns every record it could read
// (a bad message as a record with Err) together with a *Damage naming
// them.
func (rd *Reader) Read(ctx context.Context, opts ReadOptions) ([]events.Record, error) {
	js, stream := rd.js, rd.stream
	state, d, err := checkStream(ctx, stream, opts.AtSeq, opts.MinLastSeq)
	if err != nil {
		return nil, fmt.Errorf("eventlog: stream info: %w", err)
	}
	if d == nil {
		d = &Damage{LastSeq: state.LastSeq}
	}
	upTo := opts.AtSeq
	if upTo == 0 || upTo > d.LastSeq {
		upTo = d.LastSeq
	}
	r := &reader{opts: opts, d: d, upTo: upTo, next: 1}
	if opts.Stall <= 0 {
		r.opts.Stall = DefaultStall
	}
	// The last sequence the stream claims to hold: the read ends there.
	end := upTo
	for end > 0 && r.known(end) {
		end--
	}
	if end > 0 {
		direct := false
		if info := stream.CachedInfo(); info != nil && info.Config.AllowDirect && !opts.CheckOnly {
			err := readDirect(ctx, js, events.StreamName, 1, end, r.opts.Stall, r.add)
			var ns notServed
			switch {
			case err == nil:
				direct = true
			case errors.As(err, &ns):
				// The rest, one sequence at a time from the stream leader,
				// which tells a lost message from a slow one.
				if err := r.direct(ctx, stream, end); err != nil {
					return nil, err
				}
				direct = true
			case errors.Is(err, errNoDirect):
				// Go on with a consumer: it starts at the stream's start,
				// and add skips what the direct gets brought already.
			default:
				return nil, err
			}
		}
		if !direct {
			if err := r.consume(ctx, rd, stream, end); err != nil {
				return nil, err
			}
		}
	}
	if r.stopped > 0 {
		// Stopped at opts.At: what lies after is not part of the read.
		kept := d.Missing[:0]
		for _, s := range d.Missing {
			if s.First < r.stopped {
				s.Last = min(s.Last, r.stopped-1)
				kept = append(kept, s)
			}
		}
		d.Missing = kept
	}
	d.normalize()
	if d.empty() {
		return r.out, nil
	}
	return r.out, d
}

type reader struct {
	opts    ReadOptions
	d       *Damage
	upTo    uint64
	next    uint64 // the next sequence expected
	stopped uint64 // the sequence opts.At stopped before (0: none)
	out     []events.Record
}

// known reports whether seq is already known to be missing.
func (r *reader) known(seq uint64) bool {
	for _, s := range r.d.Missing {
		if seq >= s.First && seq <= s.Last {
			return true
		}
	}
	return false
}

// consume reads up to end with an ordered consumer, then directly what it
// did not deliver in time.
func (r *reader) consume(ctx context.Context, rd *Reader, stream jetstream.Stream, end uint64) error {
	it, err := rd.consume(ctx, 1, r.opts.CheckOnly, nil)
	if err != nil {
		return err
	}
	defer it.Stop()
	// stalled is cancelled when nothing arrived for Stall (one timer,
	// reset on every delivery).
	stalled, stall := context.WithCancel(ctx)
	defer stall()
	timer := time.AfterFunc(r.opts.Stall, stall)
	defer timer.Stop()
	for r.next <= end {
		msg, err := it.Next(jetstream.NextContext(stalled))
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("eventlog: reading stream: %w", ctx.Err())
			}
			if stalled.Err() != nil {
				// Nothing for Stall: read the rest directly.
				return r.direct(ctx, stream, end)
			}
			return fmt.Errorf("eventlog: reading stream: %w", err)
		}
		timer.Reset(r.opts.Stall)
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("eventlog: metadata: %w", err)
		}
		if done := r.add(md.Sequence.Stream, msg.Subject(), msg.Data()); done {
			return nil
		}
	}
	return nil
}

// direct reads the sequences from r.next to end one by one.
func (r *reader) direct(ctx context.Context, stream jetstream.Stream, end uint64) error {
	for seq := r.next; seq <= end; seq++ {
		if r.known(seq) {
			continue
		}
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			r.d.miss(seq, seq)
			continue
		}
		if err != nil {
			return fmt.Errorf("eventlog: reading seq %d: %w", seq, err)
		}
		if done := r.add(seq, m.Subject, m.Data); done {
			return nil
		}
	}
	return nil
}

// add takes the message at seq; it reports whether the read is done.
func (r *reader) add(seq uint64, subject string, data []byte) bool {
	if seq < r.next {
		return false
	}
	if seq > r.upTo {
		return true
	}
	// A sequence the consumer skipped is one the server could not load.
	r.d.miss(r.next, seq-1)
	r.next = seq + 1
	if r.opts.CheckOnly {
		return seq >= r.upTo
	}
	recs := Expand(seq, subject, data)
	if !r.opts.At.IsZero() {
		// A group message is stored whole or not at all: it stops the
		// read when any of its events occurred after At.
		for _, rec := range recs {
			if rec.Err == nil && rec.Event.OccurredAt.After(r.opts.At) {
				r.stopped = seq
				return true
			}
		}
	}
	for _, rec := range recs {
		if rec.Err != nil {
			r.d.Bad = append(r.d.Bad, Bad{Seq: seq, Index: rec.Index, Subject: rec.Subject, Err: rec.Err, Reason: rec.Err.Error()})
		}
	}
	if r.opts.Each != nil {
		for _, rec := range recs {
			r.opts.Each(rec)
		}
	} else {
		r.out = append(r.out, recs...)
	}
	if r.opts.Progress != nil {
		r.opts.Progress(seq, r.upTo)
	}
	return seq >= r.upTo
}
