package views

import (
	"slices"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Freshness is how far behind one env's incumbent is: the time from the
// end of its newest covered interval (its frontier) to at, and how far
// its frontier is behind its readiness frontier.
type Freshness struct {
	Env, Model, Snapshot string
	// Frontier is zero when the incumbent covers nothing yet.
	Frontier time.Time
	// Age is at − Frontier, or at − the incumbent's start (floored to its
	// unit) while it covers nothing; 0 when that is not before at.
	Age time.Duration
	// Ready is the incumbent's readiness frontier at at: the end of what
	// its schedule has made ready (interval.Schedule.ReadyFrontier; zero
	// before its first tick).
	Ready time.Time
	// Late is how far the incumbent's frontier (its start, floored to its
	// unit, while it covers nothing) is behind Ready: 0 when it is not.
	Late time.Duration
}

// Fresh lists every env's incumbents with their freshness at at, by env
// and model.
func Fresh(st *projections.State, at time.Time) []Freshness {
	var out []Freshness
	for name, env := range st.Envs {
		for model, id := range env.Incumbents {
			f := Freshness{Env: name, Model: model, Snapshot: id, Frontier: st.Frontier(id)}
			from := f.Frontier
			sn, ok := st.Snapshots[id]
			if ok {
				f.Ready = sn.Schedule.ReadyFrontier(at)
				if from.IsZero() {
					from = sn.Schedule.Unit().Floor(sn.Start)
				}
			}
			if !from.IsZero() && at.After(from) {
				f.Age = at.Sub(from)
			}
			if !f.Ready.IsZero() && f.Ready.After(from) {
				f.Late = f.Ready.Sub(from)
			}
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Env != out[j].Env {
			return out[i].Env < out[j].Env
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// Progress is how much of a plan's backfill its candidates' tables cover,
// and what went wrong with its work.
type Progress struct {
	Plan, Env string
	// Total and Done are the backfill's length and the part covered.
	Total, Done time.Duration
	// Cancelled: the plan was cancelled (its work is computed no more).
	Cancelled bool
	// Failures are the latest failures of the plan's work, per candidate
	// (PlanFailures).
	Failures []commands.RunFailure
	// Models is the progress of the plan's work per model (PlanWork).
	Models []commands.ModelProgress
	// Audits are the candidates' failed audits within the window their
	// promotion judges now (policy.AuditWindow), in candidate order.
	Audits []commands.AuditStatus
	// Candidates is each candidate's share of the backfill, in
	// candidate order.
	Candidates []CandidateProgress
}

// CandidateProgress is how much of one candidate's backfill set its
// table covers.
type CandidateProgress struct {
	Model, Snapshot string
	// Total and Done are the backfill set's length and the part covered.
	Total, Done time.Duration
}

// Fraction is Done/Total (1 for an empty backfill).
func (c CandidateProgress) Fraction() float64 {
	if c.Total <= 0 {
		return 1
	}
	return float64(c.Done) / float64(c.Total)
}

// Fraction is Done/Total (1 for an empty backfill).
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 1
	}
	return float64(p.Done) / float64(p.Total)
}

// InFlight lists the plans in flight (not accepted, and not decided or
// with a catch-up open) with their backfill progress, by plan.
func InFlight(st *projections.State) []Progress {
	var out []Progress
	for _, pl := range st.Plans {
		if pl.Accepted() || (pl.Decision != nil && !pl.CatchUpOpen()) {
			continue
		}
		out = append(out, PlanProgress(st, pl))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plan < out[j].Plan })
	return out
}

// PlanProgress is pl's backfill progress, whether it is in flight or
// decided: per candidate and in all, its work per model, its failures
// and its candidates' failed audits.
func PlanProgress(st *projections.State, pl *projections.Plan) Progress {
	p := Progress{Plan: pl.Built.Plan, Env: pl.Built.Env, Cancelled: pl.Cancelled != nil, Failures: PlanFailures(st, pl), Models: PlanWork(st, pl)}
	for _, c := range pl.Built.Candidates {
		p.Audits = append(p.Audits, FailedAudits(st, c.Model, c.Snapshot, policy.AuditWindow(st, c))...)
	}
	for _, c := range pl.Built.Candidates {
		want := interval.NewSet(c.Backfill...)
		left := want.SubtractSet(st.Table(c.Table))
		cp := CandidateProgress{Model: c.Model, Snapshot: c.Snapshot, Total: duration(want), Done: duration(want) - duration(left)}
		p.Candidates = append(p.Candidates, cp)
		p.Total += cp.Total
		p.Done += cp.Done
	}
	return p
}

// PlanFailures lists, per candidate of pl in order, the latest failure of
// the plan's own work (its backfill or catch-up: the run id names the
// plan), the latest final one when there is one.
func PlanFailures(st *projections.State, pl *projections.Plan) []commands.RunFailure {
	var out []commands.RunFailure
	ours := func(f events.RunFailed) bool {
		_, plan, ok := events.PlanOfRunID(f.RunID)
		return ok && plan == pl.Built.Plan
	}
	for _, c := range pl.Built.Candidates {
		f := st.Failures[c.Snapshot]
		switch {
		case f == nil:
		case f.LastFinalSeq > pl.BuiltSeq && ours(f.LastFinal):
			out = append(out, Failure(c.Model, f.LastFinal, f.LastFinalSeq))
		case f.LastSeq > pl.BuiltSeq && ours(f.Last):
			out = append(out, Failure(c.Model, f.Last, f.LastSeq))
		}
	}
	return out
}

// PlanWork lists the progress of pl's own work per model: its backfill
// item, then its latest catch-up item once one was requested, each in
// candidate order (WorkProgress).
func PlanWork(st *projections.State, pl *projections.Plan) []commands.ModelProgress {
	order := make([]string, len(pl.Built.Candidates))
	for i, c := range pl.Built.Candidates {
		order[i] = c.Snapshot
	}
	out := WorkProgress(st, events.WorkID(pl.BuiltSeq, events.RunBackfill), order)
	if pl.CatchUp != nil {
		out = append(out, WorkProgress(st, events.WorkID(pl.CatchUpSeq, events.RunCatchUp), order)...)
	}
	return out
}

// WorkProgress is the progress of work item id per snapshot it has a
// step for (StepProgress): those in order first, in that order, then the
// others by id. Nil when there is no such item.
func WorkProgress(st *projections.State, id string, order []string) []commands.ModelProgress {
	w := st.Work[id]
	if w == nil {
		return nil
	}
	var rest []string
	for sn := range w.Steps {
		if !slices.Contains(order, sn) {
			rest = append(rest, sn)
		}
	}
	sort.Strings(rest)
	var out []commands.ModelProgress
	for _, sn := range append(slices.Clone(order), rest...) {
		if step, ok := w.Steps[sn]; ok && !step.Empty() {
			out = append(out, StepProgress(st.Snapshots[sn], sn, w, step, w.Done[sn]))
		}
	}
	return out
}

// StepProgress is the progress of item w's step for snapshot id (sn its
// registration; nil when unknown: then each range is one batch and no
// interval is counted): step cut into batches as workers cut it
// (interval.Batches by the snapshot's unit and, for a version with SQL,
// its batch_size), those done covered by done (nil: nothing done), and
// the pace over [w.At, done.Last]. The ETA is the intervals left over the
// intervals done per second (batches when the unit is unknown): 0 once
// every batch is done, unknown until something is done after w.At.
func StepProgress(sn *projections.Snapshot, id string, w *projections.Work, step interval.Set, done *projections.StepDone) commands.ModelProgress {
	m := commands.ModelProgress{Snapshot: id, RunKind: w.RunKind, DueAt: w.At}
	var unit interval.Unit
	size := 0
	if sn != nil {
		m.Model, unit = sn.Model, sn.Unit
		if sn.SQL != "" {
			size = sn.BatchSize
		}
	}
	var got interval.Set
	if done != nil {
		got = done.Ranges
		m.Rows, m.LastDoneAt = done.Rows, done.Last
	}
	for _, b := range interval.Batches(unit, size, step) {
		m.Batches++
		if got.Covers(b) {
			m.BatchesDone++
		}
	}
	for _, r := range step {
		m.Intervals += unit.Count(r)
	}
	for _, r := range got {
		m.IntervalsDone += unit.Count(r)
	}
	// The ETA counts intervals; batches when the unit is unknown.
	total, finished := m.Intervals, m.IntervalsDone
	if total == 0 {
		total, finished = m.Batches, m.BatchesDone
	}
	if m.BatchesDone == m.Batches || finished >= total {
		m.ETAMS = new(int64)
	}
	elapsed := m.LastDoneAt.Sub(m.DueAt)
	if done == nil || elapsed <= 0 {
		return m
	}
	m.RowsPerSecond = float64(m.Rows) / elapsed.Seconds()
	m.IntervalsPerSecond = float64(m.IntervalsDone) / elapsed.Seconds()
	if m.ETAMS == nil && finished > 0 {
		eta := time.Duration(float64(elapsed) * float64(total-finished) / float64(finished)).Milliseconds()
		m.ETAMS = &eta
	}
	return m
}

func duration(s interval.Set) time.Duration {
	var d time.Duration
	for _, r := range s {
		d += r.Duration()
	}
	return d
}

// Plans is InFlight as the status reply carries it, only env's plans when
// env is set; never nil.
func Plans(st *projections.State, env string) []commands.PlanProgress {
	out := []commands.PlanProgress{}
	for _, p := range InFlight(st) {
		if env == "" || p.Env == env {
			out = append(out, commands.PlanProgress{Plan: p.Plan, Env: p.Env, BackfillMS: p.Total.Milliseconds(), DoneMS: p.Done.Milliseconds(),
				Cancelled: p.Cancelled, Failures: p.Failures, Models: p.Models, Audits: p.Audits})
		}
	}
	return out
}

// Restating lists env's restatements in flight (every env's when env is
// empty), by sequence: those whose environment is still at the
// generation they read (decide.StaleRestatement: otherwise their work is
// given up) and some of whose work is neither recorded done nor covered
// by its table (the scheduler may compute the same intervals), each with
// its work's progress per model, in its order (WorkProgress).
func Restating(st *projections.State, env string) []commands.RestateProgress {
	var out []commands.RestateProgress
	for id, req := range st.Restatements {
		if (env != "" && req.Env != env) || st.Env(req.Env).Generation != req.Generation {
			continue
		}
		w := st.Work[id]
		left := false
		var order []string
		for _, rw := range req.Work {
			order = append(order, rw.Snapshot)
			todo := interval.NewSet(rw.Ranges...).SubtractSet(st.Table(rw.Table))
			if w != nil && w.Done[rw.Snapshot] != nil {
				todo = todo.SubtractSet(w.Done[rw.Snapshot].Ranges)
			}
			left = left || !todo.Empty()
		}
		if !left {
			continue
		}
		seq, _, _ := events.ParseWorkID(id)
		out = append(out, commands.RestateProgress{Env: req.Env, Model: req.Model, Snapshot: req.Snapshot, Ranges: req.Ranges, Run: req.Run, Seq: seq,
			Models: WorkProgress(st, id, order)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}
