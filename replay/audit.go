package replay

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Row is one line of the audit trail.
type Row struct {
	Seq uint64 `json:"seq"`
	// Index is the event's place in a group message (events.Record):
	// (Seq, Index) is its address.
	Index       int       `json:"index,omitempty"`
	At          time.Time `json:"at"`
	Type        string    `json:"type"`
	Env         string    `json:"env,omitempty"`
	Plan        string    `json:"plan,omitempty"`
	Models      []string  `json:"models,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	Causation   string    `json:"causation,omitempty"`
	Correlation string    `json:"correlation,omitempty"`
	// Summary says what happened in one line.
	Summary string `json:"summary"`
}

// Filter selects audit rows; zero fields match everything.
type Filter struct {
	Env, Model, Plan string
	Since, Until     time.Time
}

func (f Filter) match(r Row) bool {
	switch {
	case f.Env != "" && r.Env != f.Env:
		return false
	case f.Plan != "" && r.Plan != f.Plan:
		return false
	case !f.Since.IsZero() && r.At.Before(f.Since):
		return false
	case !f.Until.IsZero() && r.At.After(f.Until):
		return false
	}
	if f.Model == "" {
		return true
	}
	for _, m := range r.Models {
		if m == f.Model {
			return true
		}
	}
	return false
}

// Audit lists the records f selects as audit rows, in stream order.
// Plan builds, completions, audit results, invalidations, scheduler
// advances, catch-up requests, decisions, rollbacks, finalizations,
// repairs, restatements and table retirements all appear; events that
// could not be decoded appear as "undecodable", well-formed events on a
// subject not their own as "foreign".
func Audit(recs []events.Record, f Filter) []Row {
	var out []Row
	for _, r := range recs {
		row := describe(r)
		if f.match(row) {
			out = append(out, row)
		}
	}
	return out
}

func modelOf(snapshot string) string { m, _, _ := events.ParseSnapshotID(snapshot); return m }

func describe(r events.Record) Row {
	row := Row{Seq: r.Seq, Index: r.Index, At: r.Event.OccurredAt, Type: string(r.Event.Type), Actor: r.Event.Actor,
		Causation: r.Event.Causation, Correlation: r.Event.Correlation}
	if r.Err != nil {
		row.Type = "undecodable"
		if errors.Is(r.Err, events.ErrForeign) {
			row.Type = "foreign"
		}
		row.Summary = fmt.Sprintf("%s: %v", r.Subject, r.Err)
		return row
	}
	switch p := r.Event.Payload.(type) {
	case events.SnapshotRegistered:
		row.Models = []string{p.Model}
		row.Summary = fmt.Sprintf("registered %s (%s, cron %q, unit %s, table %s)", p.Snapshot, p.Kind, p.Cron, p.Unit, p.Table)
	case events.PlanBuilt:
		row.Env, row.Plan = p.Env, p.Plan
		var parts []string
		for _, c := range p.Candidates {
			row.Models = append(row.Models, c.Model)
			parts = append(parts, fmt.Sprintf("%s (incumbent %s, frontier %s)", c.Snapshot, orNone(c.Incumbent), ts(c.IncumbentFrontier)))
		}
		row.Summary = fmt.Sprintf("plan %s for %s at generation %d, policy %s: %s", p.Plan, p.Env, p.Generation, p.Policy.Name(), strings.Join(parts, "; "))
	case events.IntervalsCompleted:
		row.Models = []string{modelOf(p.Snapshot)}
		row.Plan = planOfRun(p.RunID)
		row.Summary = fmt.Sprintf("%s completed %s (%s)", p.Snapshot, interval.Set(p.Ranges), p.RunKind)
	case events.AuditRecorded:
		row.Models = []string{modelOf(p.Snapshot)}
		row.Summary = auditSummary(p)
	case events.IntervalsInvalidated:
		row.Models = []string{modelOf(p.Snapshot)}
		row.Plan = planOfRun(p.Reason)
		row.Summary = fmt.Sprintf("%s invalidated %s (%s)", p.Snapshot, interval.Set(p.Ranges), orNone(p.Reason))
	case events.SchedulerAdvanced:
		row.Env, row.Models = p.Env, []string{p.Model}
		row.Summary = fmt.Sprintf("tick %s advanced %s to %s, scheduled %s (generation %d)", ts(p.Tick), p.Snapshot, ts(p.Frontier), interval.Set(p.Ranges), p.Generation)
	case events.CatchUpRequested:
		row.Env, row.Plan = p.Env, p.Plan
		var parts []string
		for _, w := range p.Work {
			row.Models = append(row.Models, w.Model)
			if len(w.Ranges)+len(w.Recompute) > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", w.Snapshot, interval.NewSet(w.Ranges...).AddSet(w.Recompute)))
			}
		}
		row.Summary = fmt.Sprintf("catch-up for %s (view at seq %d): %s", p.Plan, p.EvaluatedAtSeq, strings.Join(parts, "; "))
	case events.PromotionDecided:
		row.Env, row.Plan = p.Env, p.Plan
		row.Models = slices.Sorted(maps.Keys(p.Models))
		retry := ""
		if p.CatchUpSeq > 0 {
			retry = fmt.Sprintf(", retry of the catch-up at seq %d", p.CatchUpSeq)
		}
		row.Summary = fmt.Sprintf("%s %s [%s] (view at seq %d, policy %s%s)", p.Plan, p.Outcome, strings.Join(p.Codes, ", "), p.EvaluatedAtSeq, p.Policy.Name(), retry)
	case events.EnvironmentFinalized:
		row.Env, row.Plan = p.Env, p.Plan
		row.Summary = fmt.Sprintf("%s finalized by %s at generation %d", p.Env, p.Plan, p.Generation)
	case events.EnvironmentRolledBack:
		row.Env = p.Env
		var parts []string
		for _, m := range p.Models {
			row.Models = append(row.Models, m.Model)
			parts = append(parts, fmt.Sprintf("%s (demoting %s)", m.Restored, m.Demoted))
		}
		closed := ""
		if len(p.Repairs) > 0 {
			closed = fmt.Sprintf("; %d open repair(s) of the demoted snapshots closed", len(p.Repairs))
		}
		row.Summary = fmt.Sprintf("%s rolled back from generation %d to generation %d's incumbents, now generation %d (view at seq %d): %s%s",
			p.Env, p.FromGeneration, p.ToGeneration, p.Generation, p.EvaluatedAtSeq, strings.Join(parts, "; "), closed)
	case events.TableRetired:
		row.Models = []string{modelOf(p.Table)}
		row.Summary = fmt.Sprintf("table %s retired (written by %s; view at seq %d): %s", p.Table, strings.Join(p.Snapshots, ", "), p.JudgedAtSeq, p.Reason)
	case events.RestatementRequested:
		row.Env = p.Env
		var parts []string
		for _, w := range p.Work {
			row.Models = append(row.Models, w.Model)
			parts = append(parts, fmt.Sprintf("%s %s", w.Snapshot, interval.Set(w.Ranges)))
		}
		row.Summary = fmt.Sprintf("restatement of %s %s in %s (generation %d, run %s): %s", p.Snapshot, interval.Set(p.Ranges), p.Env, p.Generation, p.Run, strings.Join(parts, "; "))
		if p.Reason != "" {
			row.Summary += " — " + p.Reason
		}
	case events.RepairCompleted:
		row.Env, row.Plan, row.Models = p.Env, p.Plan, []string{p.Model}
		row.Summary = fmt.Sprintf("repair of %s %s closed after %s (opened at seq %d)", p.Snapshot, interval.Set(p.Ranges), time.Duration(p.LatencyMS)*time.Millisecond, p.OpenSeq)
	default:
		row.Summary = r.Subject
	}
	return row
}

// auditSummary says what an audit result was, in one line.
func auditSummary(p events.AuditRecorded) string {
	kind := "non-blocking"
	if p.Blocking {
		kind = "blocking"
	}
	work := ""
	if p.Work != "" {
		work = ", " + p.Work
	}
	switch {
	case p.Error != "":
		return fmt.Sprintf("%s %s audit %s could not run over %s (counts as failed%s): %s", p.Snapshot, kind, p.Audit, interval.Set(p.Ranges), work, p.Error)
	case !p.Passed:
		return fmt.Sprintf("%s %s audit %s failed over %s: %d violating rows%s", p.Snapshot, kind, p.Audit, interval.Set(p.Ranges), p.Count, work)
	}
	return fmt.Sprintf("%s %s audit %s passed over %s%s", p.Snapshot, kind, p.Audit, interval.Set(p.Ranges), work)
}

// planOfRun returns the plan a backfill or catch-up run id names
// (events.PlanRunID), or "".
func planOfRun(id string) string {
	_, plan, _ := events.PlanOfRunID(id)
	return plan
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ModelView is what a decision saw of one candidate.
type ModelView struct {
	Model     string `json:"model"`
	Candidate string `json:"candidate"`
	Incumbent string `json:"incumbent,omitempty"`
	// Window is the check window [candidate start, incumbent frontier).
	Window            string   `json:"window,omitempty"`
	CapturedFrontier  string   `json:"captured_frontier,omitempty"`
	CandidateCoverage []string `json:"candidate_coverage"`
	IncumbentCoverage []string `json:"incumbent_coverage"`
	// FailedAudits lists the candidate's audits whose latest result had
	// failed on a range of its check window at the decision's view.
	FailedAudits []string `json:"failed_audits,omitempty"`
}

// Explanation is one recorded decision with the view it was based on.
type Explanation struct {
	Plan     events.PlanBuilt         `json:"plan"`
	Decision *events.PromotionDecided `json:"decision"`
	// DecisionSeq is the stream sequence of the decision.
	DecisionSeq uint64      `json:"decision_seq"`
	Views       []ModelView `json:"views"`
	// Divergences lists what re-evaluating the decision today changes.
	Divergences []Divergence `json:"divergences"`
}

// Explain returns the latest decision recorded for plan in recs, with the
// coverage of every candidate and incumbent at the sequence it was
// evaluated at.
func Explain(recs []events.Record, plan string) (*Explanation, error) {
	var dec *events.PromotionDecided
	var seq uint64
	for _, r := range recs {
		if d, ok := r.Event.Payload.(events.PromotionDecided); ok && r.Err == nil && d.Plan == plan {
			d := d
			dec, seq = &d, r.Seq
		}
	}
	st := projections.New()
	if dec == nil {
		for _, r := range recs {
			foldOne(st, r)
		}
		if _, ok := st.Plans[plan]; !ok {
			return nil, &NoPlanError{Plan: plan}
		}
		return nil, fmt.Errorf("replay: plan %q has no recorded decision", plan)
	}
	for _, r := range recs {
		if r.Seq > dec.EvaluatedAtSeq {
			break
		}
		foldOne(st, r)
	}
	pl, ok := st.Plans[plan]
	if !ok {
		return nil, fmt.Errorf("replay: plan %q was not built at seq %d", plan, dec.EvaluatedAtSeq)
	}
	x := &Explanation{Plan: pl.Built, Decision: dec, DecisionSeq: seq, Divergences: compareDecision(st, seq, *dec)}
	if x.Divergences == nil {
		x.Divergences = []Divergence{}
	}
	for _, c := range pl.Built.Candidates {
		v := ModelView{Model: c.Model, Candidate: c.Snapshot, Incumbent: c.Incumbent, CapturedFrontier: ts(c.IncumbentFrontier),
			CandidateCoverage: nonNil(st.Table(c.Table).Strings()), IncumbentCoverage: []string{}}
		if c.Incumbent != "" {
			v.IncumbentCoverage = nonNil(st.SnapshotCoverage(c.Incumbent).Strings())
		}
		if w, ok := policy.Window(st, c); ok {
			v.Window = w.String()
		}
		for _, f := range st.FailedAudits(c.Snapshot, policy.AuditWindow(st, c)) {
			kind := "non-blocking"
			if f.Blocking {
				kind = "blocking"
			}
			v.FailedAudits = append(v.FailedAudits, fmt.Sprintf("%s (%s) on %s: %d violating rows", f.Audit, kind, f.Ranges, f.Count))
		}
		x.Views = append(x.Views, v)
	}
	return x, nil
}

// NoPlanError is Explain's error for a plan the stream does not hold.
type NoPlanError struct{ Plan string }

func (e *NoPlanError) Error() string { return fmt.Sprintf("replay: no plan %q in the stream", e.Plan) }
