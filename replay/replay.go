// Package replay rebuilds projections from the stream and re-evaluates
// recorded promotion decisions. It uses the same fold (projections.Apply)
// and the same policy (policy.Evaluate) as the live engine: there is no
// second implementation to drift.
package replay

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Record is one stored event with its stream position.
type Record struct {
	Seq     uint64
	Subject string
	Event   events.Event
	// Err is set when the bytes could not be decoded.
	Err error
}

// Read loads every event up to upTo (0: the stream's last sequence when
// called) with an ordered consumer from the start.
func Read(ctx context.Context, js jetstream.JetStream, upTo uint64) ([]Record, error) {
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("replay: stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: stream info: %w", err)
	}
	last := info.State.LastSeq
	if upTo == 0 || upTo > last {
		upTo = last
	}
	if upTo == 0 || info.State.Msgs == 0 {
		return nil, nil
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("replay: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("replay: consumer: %w", err)
	}
	defer it.Stop()
	var out []Record
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("replay: reading stream: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("replay: metadata: %w", err)
		}
		seq := md.Sequence.Stream
		if seq > upTo {
			return out, nil
		}
		ev, derr := events.Decode(msg.Data())
		out = append(out, Record{Seq: seq, Subject: msg.Subject(), Event: ev, Err: derr})
		if seq == upTo {
			return out, nil
		}
	}
}

// Fold applies records to a fresh state (records with Err are skipped but
// still advance the sequence).
func Fold(recs []Record) *projections.State {
	st := projections.New()
	for _, r := range recs {
		foldOne(st, r)
	}
	return st
}

func foldOne(st *projections.State, r Record) {
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

// Verify re-evaluates every recorded PromotionDecided in recs: it rebuilds
// the view at the sequence the decision names, runs the policy version the
// decision names on the plan as it was built, and compares outcome, codes,
// per-model missing ranges and advance counts.
func Verify(recs []Record) []Divergence {
	type pending struct {
		seq uint64
		d   events.PromotionDecided
	}
	var decs []pending
	for _, r := range recs {
		if d, ok := r.Event.Payload.(events.PromotionDecided); ok && r.Err == nil {
			decs = append(decs, pending{r.Seq, d})
		}
	}
	sort.SliceStable(decs, func(i, j int) bool { return decs[i].d.EvaluatedAtSeq < decs[j].d.EvaluatedAtSeq })
	var out []Divergence
	st := projections.New()
	i := 0
	for _, p := range decs {
		for ; i < len(recs) && recs[i].Seq <= p.d.EvaluatedAtSeq; i++ {
			foldOne(st, recs[i])
		}
		out = append(out, compare(st, p.seq, p.d)...)
	}
	return out
}

func compare(st *projections.State, seq uint64, rec events.PromotionDecided) []Divergence {
	div := func(field string, a, b any) Divergence {
		return Divergence{Plan: rec.Plan, Seq: seq, Field: field, Recorded: fmt.Sprint(a), Recomputed: fmt.Sprint(b)}
	}
	pl, ok := st.Plans[rec.Plan]
	if !ok {
		return []Divergence{div("plan", rec.Plan, fmt.Sprintf("<not built at seq %d>", rec.EvaluatedAtSeq))}
	}
	built := pl.Built
	built.Policy = rec.Policy
	got := policy.Evaluate(st, built)
	var out []Divergence
	if got.Outcome != rec.Outcome {
		out = append(out, div("outcome", rec.Outcome, got.Outcome))
	}
	if !reflect.DeepEqual(nonNil(got.Codes), nonNil(rec.Codes)) {
		out = append(out, div("codes", rec.Codes, got.Codes))
	}
	models := map[string]bool{}
	for m := range rec.Models {
		models[m] = true
	}
	for m := range got.Models {
		models[m] = true
	}
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		a, b := rec.Models[m], got.Models[m]
		if !interval.Set(a.Missing).Equal(interval.Set(b.Missing)) {
			out = append(out, div("models."+m+".missing", interval.Set(a.Missing), interval.Set(b.Missing)))
		}
		if a.Advances != b.Advances {
			out = append(out, div("models."+m+".advances", a.Advances, b.Advances))
		}
		if !reflect.DeepEqual(nonNil(a.Codes), nonNil(b.Codes)) {
			out = append(out, div("models."+m+".codes", a.Codes, b.Codes))
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
