package views

import (
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Freshness is how far behind one env's incumbent is: the time from the
// end of its newest covered interval (its frontier) to at.
type Freshness struct {
	Env, Model, Snapshot string
	// Frontier is zero when the incumbent covers nothing yet.
	Frontier time.Time
	// Age is at − Frontier (0 when nothing is covered: see Frontier).
	Age time.Duration
}

// Fresh lists every env's incumbents with their freshness at at, by env
// and model.
func Fresh(st *projections.State, at time.Time) []Freshness {
	var out []Freshness
	for name, env := range st.Envs {
		for model, id := range env.Incumbents {
			f := Freshness{Env: name, Model: model, Snapshot: id, Frontier: st.Frontier(id)}
			if !f.Frontier.IsZero() && at.After(f.Frontier) {
				f.Age = at.Sub(f.Frontier)
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
	for id, pl := range st.Plans {
		if pl.Accepted() || (pl.Decision != nil && !pl.CatchUpOpen()) {
			continue
		}
		p := Progress{Plan: id, Env: pl.Built.Env, Cancelled: pl.Cancelled != nil, Failures: PlanFailures(st, pl)}
		for _, c := range pl.Built.Candidates {
			want := interval.NewSet(c.Backfill...)
			left := want.SubtractSet(st.Table(c.Table))
			p.Total += duration(want)
			p.Done += duration(want) - duration(left)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plan < out[j].Plan })
	return out
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
				Cancelled: p.Cancelled, Failures: p.Failures})
		}
	}
	return out
}
