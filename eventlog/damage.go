package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// The event stream refuses message deletion and purges and has no limits
// (StreamConfig): every sequence from 1 to the last one holds an
// event for good. So a reader can tell exactly what a damaged store lost:
// a sequence the server reports deleted, one before its first sequence,
// one it listed as lost while recovering, or one it never delivers is
// missing; and since all are known up front, no reader has to wait for
// them.

// Span is the stream sequences First..Last (inclusive).
type Span struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

func (s Span) String() string {
	if s.First == s.Last {
		return fmt.Sprint(s.First)
	}
	return fmt.Sprintf("%d-%d", s.First, s.Last)
}

// Bad is a stored message this build cannot take as a tidemark event:
// undecodable (malformed, an unknown type or a newer schema: written by
// something else, or by a newer build), or a well-formed event on a
// subject it does not belong to (foreign).
type Bad struct {
	Seq uint64 `json:"seq"`
	// Index is the event's place in a group message (GroupSubject).
	Index   int    `json:"index,omitempty"`
	Subject string `json:"subject"`
	Err     error  `json:"-"`
	// Reason is Err's text (for JSON).
	Reason string `json:"reason"`
}

func (b Bad) String() string {
	if b.Index > 0 {
		return fmt.Sprintf("seq %d.%d on %s (%v)", b.Seq, b.Index, b.Subject, b.Err)
	}
	return fmt.Sprintf("seq %d on %s (%v)", b.Seq, b.Subject, b.Err)
}

// Damage is an event stream that lost events or holds messages that are
// not tidemark events. Readers return it with everything they could read:
// the records stand, with a gap where each missing sequence was and an
// Err on each bad one.
type Damage struct {
	// LastSeq is the stream's last sequence as the server reported it.
	LastSeq uint64 `json:"last_seq"`
	// Missing are the sequences the stream should hold and does not
	// deliver, in order.
	Missing []Span `json:"missing,omitempty"`
	// Bad are the messages that are not tidemark events, in order.
	Bad []Bad `json:"bad,omitempty"`
}

// Lost counts the missing sequences.
func (d *Damage) Lost() uint64 {
	var n uint64
	for _, s := range d.Missing {
		n += s.Last - s.First + 1
	}
	return n
}

// maxNamed bounds how many spans and bad messages Error lists.
const maxNamed = 50

func (d *Damage) Error() string {
	var parts []string
	if len(d.Missing) > 0 {
		spans := make([]string, 0, min(len(d.Missing), maxNamed))
		for _, s := range d.Missing[:min(len(d.Missing), maxNamed)] {
			spans = append(spans, s.String())
		}
		if n := len(d.Missing) - maxNamed; n > 0 {
			spans = append(spans, fmt.Sprintf("and %d more spans", n))
		}
		parts = append(parts, fmt.Sprintf("the event stream is damaged: %d of its %d events are missing (seq %s)", d.Lost(), d.LastSeq, strings.Join(spans, ", ")))
	}
	if len(d.Bad) > 0 {
		bad := make([]string, 0, min(len(d.Bad), maxNamed))
		for _, b := range d.Bad[:min(len(d.Bad), maxNamed)] {
			bad = append(bad, b.String())
		}
		if n := len(d.Bad) - maxNamed; n > 0 {
			bad = append(bad, fmt.Sprintf("and %d more", n))
		}
		parts = append(parts, fmt.Sprintf("%d message(s) in the event stream are undecodable or foreign: %s", len(d.Bad), strings.Join(bad, "; ")))
	}
	return strings.Join(parts, "; ")
}

// empty reports whether nothing is wrong.
func (d *Damage) empty() bool { return len(d.Missing) == 0 && len(d.Bad) == 0 }

// miss records First..Last as missing (nothing when Last < First).
func (d *Damage) miss(first, last uint64) {
	if last < first || first == 0 {
		return
	}
	d.Missing = append(d.Missing, Span{first, last})
}

// normalize sorts and merges the missing spans.
func (d *Damage) normalize() {
	slices.SortFunc(d.Missing, func(a, b Span) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	var out []Span
	for _, s := range d.Missing {
		if n := len(out); n > 0 && s.First <= out[n-1].Last+1 {
			out[n-1].Last = max(out[n-1].Last, s.Last)
			continue
		}
		out = append(out, s)
	}
	d.Missing = out
}

// checkStream returns the stream's state and the sequences up to upTo
// (0: all) that it reports missing: before its first sequence, deleted
// (the stream refuses deletes, so only damage deletes), or lost while the
// server recovered the store; and, when minLast is above the stream's
// last sequence (a checkpoint was taken at minLast: the stream held that
// many events), the lost tail. The Damage is nil when nothing is missing.
func checkStream(ctx context.Context, stream jetstream.Stream, upTo, minLast uint64) (jetstream.StreamState, *Damage, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, nil, err
	}
	st := info.State
	if st.NumDeleted > 0 {
		if info, err = stream.Info(ctx, jetstream.WithDeletedDetails(true)); err != nil {
			return st, nil, err
		}
		st = info.State
	}
	d := stateDamage(st, upTo, minLast)
	if d.empty() {
		return st, nil, nil
	}
	return st, d, nil
}

func stateDamage(st jetstream.StreamState, upTo, minLast uint64) *Damage {
	last := st.LastSeq
	var lost []uint64
	if st.Lost != nil {
		lost = st.Lost.Msgs
	}
	for _, seq := range lost {
		// A store that lost its tail and its index may report a shorter
		// stream: what the server lists as lost still counts.
		last = max(last, seq)
	}
	tail := last + 1
	last = max(last, minLast)
	if upTo == 0 || upTo > last {
		upTo = last
	}
	d := &Damage{LastSeq: last}
	if upTo > 0 && st.FirstSeq > 1 {
		d.miss(1, min(st.FirstSeq-1, upTo))
	}
	for _, seq := range append(slices.Clone(st.Deleted), lost...) {
		if seq <= upTo {
			d.miss(seq, seq)
		}
	}
	d.miss(tail, upTo)
	d.normalize()
	return d
}

// IsDamage reports whether err is (or wraps) a *Damage, and returns it.
func IsDamage(err error) (*Damage, bool) {
	var d *Damage
	ok := errors.As(err, &d)
	return d, ok
}
