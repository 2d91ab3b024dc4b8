// Package replay rebuilds projections from the stream and re-evaluates
// recorded promotion decisions. It uses the same fold (projections.Apply)
// and the same policy (policy.Evaluate) as the live engine: there is no
// second implementation to drift.
package replay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Options bounds a Read.
type Options struct {
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
}

// DefaultStall is Options.Stall's default.
const DefaultStall = 2 * time.Second

// Read loads every event up to upTo (0: the stream's last sequence when
// called) with an ordered consumer from the start.
func Read(ctx context.Context, js jetstream.JetStream, upTo uint64) ([]events.Record, error) {
	return ReadWith(ctx, js, Options{AtSeq: upTo})
}

// ReadWith loads the prefix of the stream that opts select, from the
// stream start, with batched direct gets (no consumer, see direct.go), or
// an ordered consumer where the server or stream has none.
//
// It never waits for a message that is not there: it knows from the
// stream's state which sequences to expect, and a sequence the read skips,
// or one the consumer still has not delivered after Stall, is read directly
// or found missing. When the stream lost events, or holds messages that
// are not tidemark events, ReadWith returns every record it could read
// (a bad message as a record with Err) together with a *Damage naming
// them.
func ReadWith(ctx context.Context, js jetstream.JetStream, opts Options) ([]events.Record, error) {
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("replay: stream: %w", err)
	}
	state, d, err := CheckStream(ctx, stream, opts.AtSeq, opts.MinLastSeq)
	if err != nil {
		return nil, fmt.Errorf("replay: stream info: %w", err)
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
				// Start again with a consumer.
				d = &Damage{LastSeq: d.LastSeq, Missing: append([]Span(nil), d.Missing...)}
				r = &reader{opts: r.opts, d: d, upTo: upTo, next: 1}
			default:
				return nil, err
			}
		}
		if !direct {
			if err := r.consume(ctx, js, stream, end); err != nil {
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
	opts    Options
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
func (r *reader) consume(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, end uint64) error {
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: r.opts.CheckOnly})
	if err != nil {
		return fmt.Errorf("replay: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("replay: consumer: %w", err)
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
				return fmt.Errorf("replay: reading stream: %w", ctx.Err())
			}
			if stalled.Err() != nil {
				// Nothing for Stall: read the rest directly.
				return r.direct(ctx, stream, end)
			}
			return fmt.Errorf("replay: reading stream: %w", err)
		}
		timer.Reset(r.opts.Stall)
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("replay: metadata: %w", err)
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
			return fmt.Errorf("replay: reading seq %d: %w", seq, err)
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
	ev, derr := Decode(subject, data)
	if derr == nil && !r.opts.At.IsZero() && ev.OccurredAt.After(r.opts.At) {
		r.stopped = seq
		return true
	}
	if derr != nil {
		r.d.Bad = append(r.d.Bad, Bad{Seq: seq, Subject: subject, Err: derr, Reason: derr.Error()})
	}
	r.out = append(r.out, events.Record{Seq: seq, Subject: subject, Event: ev, Err: derr})
	if r.opts.Progress != nil {
		r.opts.Progress(seq, r.upTo)
	}
	return seq >= r.upTo
}

// Fold applies records to a fresh state (records with Err are skipped but
// still advance the sequence).
func Fold(recs []events.Record) *projections.State {
	st := projections.New()
	for _, r := range recs {
		foldOne(st, r)
	}
	return st
}

func foldOne(st *projections.State, r events.Record) {
	if r.Err != nil {
		projections.Skip(st, r.Seq, r.Subject)
		return
	}
	_ = projections.Apply(st, r.Seq, r.Event)
}

// Divergence is one field where a recomputed decision differs from the
// recorded one.
type Divergence struct {
	Plan       string `json:"plan"`
	Seq        uint64 `json:"seq"`
	Field      string `json:"field"`
	Recorded   string `json:"recorded"`
	Recomputed string `json:"recomputed"`
}

func (d Divergence) String() string {
	return fmt.Sprintf("plan %s (decision at seq %d): %s recorded %s, recomputed %s", d.Plan, d.Seq, d.Field, d.Recorded, d.Recomputed)
}

// Verify re-evaluates every recorded PromotionDecided and CatchUpRequested
// in recs: it rebuilds the view at the sequence the record names, runs the
// policy version it names on the plan as it was built (a catch-up retry
// against the request it answers), and compares outcome, codes, findings,
// per-model missing ranges and advance counts, and catch-up work.
func Verify(recs []events.Record) []Divergence {
	type pending struct {
		seq uint64
		at  uint64 // evaluated_at_seq
		ev  events.Payload
	}
	var decs []pending
	for _, r := range recs {
		if r.Err != nil {
			continue
		}
		switch p := r.Event.Payload.(type) {
		case events.PromotionDecided:
			decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p})
		case events.CatchUpRequested:
			decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p})
		}
	}
	sort.SliceStable(decs, func(i, j int) bool { return decs[i].at < decs[j].at })
	var out []Divergence
	st := projections.New()
	i := 0
	for _, p := range decs {
		for ; i < len(recs) && recs[i].Seq <= p.at; i++ {
			foldOne(st, recs[i])
		}
		switch ev := p.ev.(type) {
		case events.PromotionDecided:
			out = append(out, compareDecision(st, p.seq, ev)...)
		case events.CatchUpRequested:
			out = append(out, compareRequest(st, p.seq, ev)...)
		}
	}
	return out
}

type differ struct {
	plan string
	seq  uint64
	out  []Divergence
}

func (d *differ) diff(field string, recorded, recomputed any) {
	if reflect.DeepEqual(recorded, recomputed) {
		return
	}
	d.out = append(d.out, Divergence{Plan: d.plan, Seq: d.seq, Field: field, Recorded: fmt.Sprint(recorded), Recomputed: fmt.Sprint(recomputed)})
}

// built returns the plan as built, with the recorded policy.
func built(st *projections.State, d *differ, pol events.Policy, at uint64) (events.PlanBuilt, bool) {
	pl, ok := st.Plans[d.plan]
	if !ok {
		d.diff("plan", d.plan, fmt.Sprintf("<not built at seq %d>", at))
		return events.PlanBuilt{}, false
	}
	b := pl.Built
	b.Policy = pol
	return b, true
}

func compareDecision(st *projections.State, seq uint64, rec events.PromotionDecided) []Divergence {
	d := &differ{plan: rec.Plan, seq: seq}
	plan, ok := built(st, d, rec.Policy, rec.EvaluatedAtSeq)
	if !ok {
		return d.out
	}
	if err := policy.Supported(rec.Policy); err != nil {
		d.diff("policy", rec.Policy.Version, err.Error())
		return d.out
	}
	var got policy.Decision
	if rec.CatchUpSeq > 0 {
		pl := st.Plans[rec.Plan]
		if pl.CatchUp == nil || pl.CatchUpSeq != rec.CatchUpSeq {
			d.diff("catch_up_seq", rec.CatchUpSeq, pl.CatchUpSeq)
			return d.out
		}
		got = policy.Retry(st, plan, *pl.CatchUp)
	} else {
		got = policy.Evaluate(st, plan)
		if got.NeedsCatchUp() {
			d.diff("outcome", rec.Outcome, "catch-up requested")
			return d.out
		}
	}
	d.diff("outcome", rec.Outcome, got.Outcome)
	d.diff("codes", nonNil(rec.Codes), nonNil(got.Codes))
	d.diff("findings", findings(rec.Findings), findings(got.Findings))
	for _, m := range modelNames(rec.Models, got.Models) {
		a, b := rec.Models[m], got.Models[m]
		d.diff("models."+m+".missing", interval.Set(a.Missing).String(), interval.Set(b.Missing).String())
		d.diff("models."+m+".advances", a.Advances, b.Advances)
		d.diff("models."+m+".codes", nonNil(a.Codes), nonNil(b.Codes))
	}
	d.diff("repairs", repairs(rec.Repairs), repairs(got.Repairs))
	return d.out
}

// repairs renders repair work comparably.
func repairs(ws []events.RepairWork) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%s|%s|%s|%s", w.Model, w.Snapshot, w.Table, interval.Set(w.Ranges).String())
	}
	return out
}

func compareRequest(st *projections.State, seq uint64, rec events.CatchUpRequested) []Divergence {
	d := &differ{plan: rec.Plan, seq: seq}
	plan, ok := built(st, d, rec.Policy, rec.EvaluatedAtSeq)
	if !ok {
		return d.out
	}
	if err := policy.Supported(rec.Policy); err != nil {
		d.diff("policy", rec.Policy.Version, err.Error())
		return d.out
	}
	got := policy.Evaluate(st, plan)
	if !got.NeedsCatchUp() {
		d.diff("outcome", "catch-up requested", got.Outcome)
		return d.out
	}
	d.diff("findings", findings(rec.Findings), findings(got.Findings))
	want := map[string]events.CatchUpWork{}
	for _, w := range rec.Work {
		want[w.Model] = w
	}
	have := map[string]events.CatchUpWork{}
	for _, w := range got.CatchUp {
		have[w.Model] = w
	}
	for _, m := range modelNames(want, have) {
		a, b := want[m], have[m]
		d.diff("work."+m+".ranges", interval.Set(a.Ranges).String(), interval.Set(b.Ranges).String())
		d.diff("work."+m+".recompute", interval.Set(a.Recompute).String(), interval.Set(b.Recompute).String())
		d.diff("work."+m+".advances", a.Advances, b.Advances)
		d.diff("work."+m+".incumbent_frontier", a.IncumbentFrontier.UTC().String(), b.IncumbentFrontier.UTC().String())
	}
	return d.out
}

// findings renders findings comparably (ranges as text, nil as empty).
func findings(fs []events.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s", f.Code, f.Model, f.Snapshot, f.Related, interval.Set(f.Ranges).String(), f.Advances, f.Message)
	}
	return out
}

func modelNames[V any](a, b map[string]V) []string {
	set := map[string]bool{}
	for m := range a {
		set[m] = true
	}
	for m := range b {
		set[m] = true
	}
	names := make([]string, 0, len(set))
	for m := range set {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
