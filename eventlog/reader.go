package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
)

// Reader reads the event stream: a prefix (Read), one event (Get), or
// every event from a sequence on, as it is appended (Tail). It creates
// and writes nothing on the server but Tail's ordered consumer.
type Reader struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	log    *slog.Logger
	have   func(seq uint64) bool // WithHave
}

// OpenReader opens the event stream for reading. It creates and changes
// nothing, so it opens a damaged store too (Read then reports what the
// stream lost). A server without the stream is an error wrapping
// jetstream.ErrStreamNotFound.
func OpenReader(ctx context.Context, js jetstream.JetStream) (*Reader, error) {
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("eventlog: stream %s: %w", events.StreamName, err)
	}
	return &Reader{js: js, stream: stream, log: slog.Default()}, nil
}

// WithLogger returns a reader like r that logs to log (Tail's transient
// consumer errors).
func (r *Reader) WithLogger(log *slog.Logger) *Reader {
	c := *r
	c.log = log
	return &c
}

// WithHave returns a copy of the reader whose Tail does not decode the
// events have reports the caller holds already (the projection's own,
// applied when their appends were acknowledged): their entries carry the
// sequence, subject and pending count, and a zero Event. A group message
// the caller holds is one such entry (subject GroupSubject, no Index or
// Count), not one per event.
func (r *Reader) WithHave(have func(seq uint64) bool) *Reader {
	c := *r
	c.have = have
	return &c
}

// LastSeq is the stream's last sequence as the server reports it now.
func (r *Reader) LastSeq(ctx context.Context) (uint64, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("eventlog: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// Get reads the event stored at seq: for a group message (GroupSubject),
// the last of its events (GetAll has them all). A message that is not a
// tidemark event is a record with Err (events.DecodeAt); a sequence the
// stream does not hold is an error wrapping jetstream.ErrMsgNotFound.
func (r *Reader) Get(ctx context.Context, seq uint64) (events.Record, error) {
	recs, err := r.GetAll(ctx, seq)
	if err != nil {
		return events.Record{}, err
	}
	return recs[len(recs)-1], nil
}

// GetAll reads every event stored at seq: one, or a group message's
// events in order (Expand).
func (r *Reader) GetAll(ctx context.Context, seq uint64) ([]events.Record, error) {
	m, err := r.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("eventlog: reading seq %d: %w", seq, err)
	}
	return Expand(seq, m.Subject, m.Data), nil
}

// Check returns the stream's last sequence and the sequences up to upTo
// (0: all) that it reports missing: before its first sequence, deleted
// (the stream refuses deletes, so only damage deletes), or lost while the
// server recovered the store; and, when minLast is above the stream's
// last sequence (a checkpoint was taken at minLast: the stream held that
// many events), the lost tail. The Damage is nil when nothing is missing.
func (r *Reader) Check(ctx context.Context, upTo, minLast uint64) (uint64, *Damage, error) {
	st, d, err := checkStream(ctx, r.stream, upTo, minLast)
	if err != nil {
		return 0, nil, fmt.Errorf("eventlog: stream info: %w", err)
	}
	return st.LastSeq, d, nil
}

// maxProbe bounds the direct gets of one Probe.
const maxProbe = 10_000

// Probe checks, for a reader whose Tail has delivered nothing after
// from-1 for a while, whether the stream holds from..to at all: nil when
// it holds from (the consumer is just slow), else the damage: what the
// stream's state reports missing, or the run of sequences from on that
// no direct get finds (up to the first one found, to, or maxProbe
// sequences).
func (r *Reader) Probe(ctx context.Context, from, to uint64) error {
	st, d, err := checkStream(ctx, r.stream, to, 0)
	if err != nil {
		return err
	}
	if d != nil {
		return d
	}
	d = &Damage{LastSeq: st.LastSeq}
	for seq := from; seq <= to && seq < from+maxProbe; seq++ {
		_, err := r.stream.GetMsg(ctx, seq)
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
		d.miss(seq, seq)
	}
	d.normalize()
	if d.empty() {
		return nil
	}
	return d
}

// Entry is one event Tail delivers: the record, its place in its command's
// atomic batch or in its group message (Batch of BatchLen, 1-based; 0 of 0
// for a single event, BatchHeader), and how many messages the stream held
// after its message at delivery.
type Entry struct {
	events.Record
	Batch, BatchLen int
	Pending         uint64
}

// Last reports whether e is the last event of its command's append.
func (e Entry) Last() bool { return e.Batch >= e.BatchLen }

// Tail calls fn with every event from sequence from on (1 or 0: from the
// start), in stream order, each once, waiting for new ones as they are
// appended; with subjects, only the events on those subjects (an event in a
// group message by its own subject). It is the log's only ordered
// consumer. A message that is not a tidemark event is delivered as a
// record with Err (Expand); a group message's events are delivered one by
// one, Batch i of BatchLen n. Tail returns fn's error as soon as fn
// returns one, or ctx's when ctx ends.
//
// A sequence the stream cannot deliver is skipped by the consumer: a
// caller that needs every event checks that Seq follows the previous one
// (the stream denies deletes, so a gap is lost events).
func (r *Reader) Tail(ctx context.Context, from uint64, fn func(Entry) error, subjects ...string) error {
	filter := subjects
	if len(subjects) > 0 && !matchAny(subjects, GroupSubject) {
		filter = append(slices.Clone(subjects), GroupSubject)
	}
	it, err := r.consume(ctx, from, false, filter, jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("eventlog: tail: %w", err)
			}
			r.log.Warn("eventlog: tail", "err", err)
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			r.log.Warn("eventlog: tail: no metadata", "err", err)
			continue
		}
		if msg.Subject() == GroupSubject {
			if r.have != nil && r.have(md.Sequence.Stream) {
				// Held already: one entry for the whole message, nothing
				// split or decoded.
				if err := fn(Entry{Record: events.Record{Seq: md.Sequence.Stream, Subject: GroupSubject}, Pending: md.NumPending}); err != nil {
					return err
				}
				continue
			}
			for _, rec := range Expand(md.Sequence.Stream, msg.Subject(), msg.Data()) {
				e := Entry{Record: rec, Pending: md.NumPending}
				if rec.Count > 0 {
					e.Batch, e.BatchLen = rec.Index+1, rec.Count
				}
				if rec.Err == nil && !matchAny(subjects, rec.Subject) {
					continue
				}
				if err := fn(e); err != nil {
					return err
				}
			}
			continue
		}
		e := Entry{Record: events.Record{Seq: md.Sequence.Stream, Subject: msg.Subject()}, Pending: md.NumPending}
		if r.have == nil || !r.have(e.Seq) {
			e.Event, e.Err = events.DecodeAt(msg.Subject(), msg.Data())
		}
		if h := msg.Headers().Get(BatchHeader); h != "" {
			if _, err := fmt.Sscanf(h, "%d/%d", &e.Batch, &e.BatchLen); err != nil {
				e.Batch, e.BatchLen = 0, 0
			}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// consume opens the stream's ordered consumer from sequence from (0 or 1:
// the start), on subjects (none: all), headers only or not. Tail and
// Read's fallback read through it; nothing else creates a consumer on the
// event stream.
func (r *Reader) consume(ctx context.Context, from uint64, headersOnly bool, subjects []string, opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubjects: subjects, HeadersOnly: headersOnly}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := r.js.OrderedConsumer(ctx, events.StreamName, cfg)
	if err != nil {
		return nil, fmt.Errorf("eventlog: consumer: %w", err)
	}
	it, err := cons.Messages(opts...)
	if err != nil {
		return nil, fmt.Errorf("eventlog: consumer: %w", err)
	}
	return it, nil
}
