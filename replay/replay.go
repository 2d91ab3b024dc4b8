// Package replay rebuilds projections from a history and re-evaluates
// recorded promotion decisions: Fold, Verify, Audit and Explain, pure
// functions over []events.Record (read from the log by eventlog.Reader).
// It uses the same fold (projections.Apply) and the same policy
// (policy.Evaluate) as the live engine: there is no second implementation
// to drift. It does no I/O and imports no NATS.
// Importers: cmd/tidemark, bench, scenario and tests.
package replay

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Fold applies records to a fresh state (records with Err are skipped but
// still advance the sequence).
func Fold(recs []events.Record) *projections.State {
	st := projections.New()
	for _, r := range recs {
		foldOne(st, r)
	}
	return st
}

// Folder returns a fresh state and the function that folds one record
// into it, as Fold does: for a reader that hands records one by one as it
// reads (eventlog.ReadOptions.Each), so that a rebuild holds the state,
// not the history.
func Folder() (*projections.State, func(events.Record)) {
	st := projections.New()
	return st, func(r events.Record) { foldOne(st, r) }
}

func foldOne(st *projections.State, r events.Record) {
	_ = projections.ApplyRecord(st, r)
}

// Divergence is one field where a recomputed decision differs from the
// recorded one. Plan names the decision's plan, or "env <name>" for a
// rollback.
type Divergence struct {
	Plan       string `json:"plan"`
	Seq        uint64 `json:"seq"`
	Field      string `json:"field"`
	Recorded   string `json:"recorded"`
	Recomputed string `json:"recomputed"`
}

func (d Divergence) String() string {
	if strings.HasPrefix(d.Plan, "env ") { // a rollback's
		return fmt.Sprintf("%s (rollback at seq %d): %s recorded %s, recomputed %s", d.Plan, d.Seq, d.Field, d.Recorded, d.Recomputed)
	}
	return fmt.Sprintf("plan %s (decision at seq %d): %s recorded %s, recomputed %s", d.Plan, d.Seq, d.Field, d.Recorded, d.Recomputed)
}

// Verify re-evaluates every recorded PromotionDecided, CatchUpRequested
// and EnvironmentRolledBack in recs: it rebuilds the view at the sequence
// the record names, runs the policy version it names on the plan as it
// was built (a catch-up retry against the request it answers; a rollback
// by policy.Rollback, to the generation it restored), and compares
// outcome, codes, findings, per-model missing ranges and advance counts,
// catch-up work, and a rollback's generations, models and closed repairs.
// Each RestatementRequested is decided again on its view at its clock
// (projections.Restatement) and its work compared.
func Verify(recs []events.Record) []Divergence {
	type pending struct {
		seq   uint64
		at    uint64 // evaluated_at_seq
		ev    events.Payload
		clock time.Time
	}
	var decs []pending
	for _, r := range recs {
		if r.Err != nil {
			continue
		}
		switch p := r.Event.Payload.(type) {
		case events.PromotionDecided:
			decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p, r.Event.OccurredAt})
		case events.CatchUpRequested:
			decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p, r.Event.OccurredAt})
		case events.EnvironmentRolledBack:
			decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p, r.Event.OccurredAt})
		case events.RestatementRequested:
			if p.EvaluatedAtSeq > 0 {
				decs = append(decs, pending{r.Seq, p.EvaluatedAtSeq, p, r.Event.OccurredAt})
			}
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
		case events.EnvironmentRolledBack:
			out = append(out, compareRollback(st, p.seq, ev)...)
		case events.RestatementRequested:
			out = append(out, compareRestatement(st, p.seq, ev, p.clock)...)
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

// compareRollback re-decides a recorded rollback on the view it read: the
// same rule (policy.Rollback), to the generation it restored. Divergences
// name the env as their plan ("env <name>").
func compareRollback(st *projections.State, seq uint64, rec events.EnvironmentRolledBack) []Divergence {
	d := &differ{plan: "env " + rec.Env, seq: seq}
	got, refusal := policy.Rollback(st, rec.Env, rec.ToGeneration, rec.EvaluatedAt)
	if refusal != nil {
		d.diff("outcome", "rolled back", "refused: "+refusal.Error())
		return d.out
	}
	d.diff("from_generation", rec.FromGeneration, got.FromGeneration)
	d.diff("to_generation", rec.ToGeneration, got.ToGeneration)
	d.diff("generation", rec.Generation, got.Generation)
	d.diff("models", fmt.Sprint(rec.Models), fmt.Sprint(got.Models))
	d.diff("repairs", fmt.Sprint(rec.Repairs), fmt.Sprint(got.Repairs))
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

// compareRestatement decides a restatement again on st (its view) at its
// clock and compares what it restates. Divergences name its run as their
// plan.
func compareRestatement(st *projections.State, seq uint64, rec events.RestatementRequested, at time.Time) []Divergence {
	d := &differ{plan: rec.Run, seq: seq}
	got := projections.Restatement(st, rec.Env, rec.Model, rec.Ranges, at)
	d.diff("snapshot", rec.Snapshot, got.Snapshot)
	d.diff("generation", rec.Generation, got.Generation)
	d.diff("ranges", interval.Set(rec.Ranges).String(), interval.Set(got.Ranges).String())
	d.diff("work", restateWork(rec.Work), restateWork(got.Work))
	return d.out
}

// restateWork renders a restatement's work comparably.
func restateWork(ws []events.RestateWork) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = fmt.Sprintf("%s|%s|%s|%s|%s", w.Model, w.Snapshot, w.Table, interval.Set(w.Ranges).String(), interval.Set(w.Invalidated).String())
	}
	return out
}

// findings renders findings comparably (ranges as text, nil as empty).
func findings(fs []events.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s|%d|%s", f.Code, f.Model, f.Snapshot, f.Related, interval.Set(f.Ranges).String(), f.Advances, f.Audit, f.Count, f.Message)
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
