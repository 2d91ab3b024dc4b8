package views

import (
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// DiffTarget is one candidate of a plan as `tidemark diff` compares it:
// its snapshot and table, the incumbent it is compared with and its
// table, the ranges both tables cover, and the grain that matches their
// rows. Skip, when set, says why its rows are not compared (Ranges is
// then empty).
type DiffTarget struct {
	Model string
	// Candidate and Incumbent are snapshot ids; Incumbent is "" when the
	// model has none.
	Candidate, Incumbent string
	// CandidateTable and IncumbentTable are the tables they write (table
	// ids: the projection's names, which the warehouse maps to its own).
	CandidateTable, IncumbentTable string
	// CandidateTimeColumn and IncumbentTimeColumn place each side's rows
	// in time.
	CandidateTimeColumn, IncumbentTimeColumn string
	// Grain is the candidate's grain, else the incumbent's (nil: none).
	Grain []string
	// Ranges are the ranges both tables cover now.
	Ranges []interval.Range
	// Replaced is set when the candidate serves the env now (the plan was
	// promoted): Incumbent is then the snapshot the plan captured, the
	// one it replaced.
	Replaced bool
	// Skip says why the rows are not compared, or is "".
	Skip string
}

// The reasons a DiffTarget is skipped.
const (
	SkipSameTable  = "writes its incumbent's table (forward_only): nothing to compare"
	SkipNoIncumb   = "has no incumbent: nothing to compare"
	SkipNotSQL     = "is not an SQL model on both sides: its rows are not in the warehouse"
	SkipNoCoverage = "no interval is covered by both tables"
	SkipRetired    = "a table was retired (dropped by the janitor): nothing to compare"
)

// DiffTargets lists what `tidemark diff` compares for plan: every
// candidate in the plan's order, or only model when it is set. A
// candidate is compared with the incumbent its env serves now (with the
// incumbent the plan captured when the candidate is that incumbent: a
// promoted plan is compared with what it replaced), over the ranges both
// tables cover now. An unknown plan, or a model the plan does not
// change, is a *commands.Error, not_found, naming the field.
func DiffTargets(st *projections.State, plan, model string) ([]DiffTarget, error) {
	p := st.Plans[plan]
	if p == nil {
		return nil, commands.Errorf(commands.CodeNotFound, "plan", "no plan %q", plan)
	}
	env := st.Envs[p.Built.Env]
	out := []DiffTarget{}
	for _, c := range p.Built.Candidates {
		if model != "" && c.Model != model {
			continue
		}
		t := DiffTarget{Model: c.Model, Candidate: c.Snapshot, CandidateTable: c.Table, Ranges: []interval.Range{}}
		if env != nil {
			t.Incumbent = env.Incumbents[c.Model]
		}
		if t.Incumbent == c.Snapshot {
			t.Incumbent, t.Replaced = c.Incumbent, true
		}
		cand, inc := st.Snapshots[c.Snapshot], st.Snapshots[t.Incumbent]
		if cand != nil {
			t.CandidateTimeColumn, t.Grain = cand.TimeColumn, cand.Grain
		}
		if inc != nil {
			t.IncumbentTable, t.IncumbentTimeColumn = inc.Table, inc.TimeColumn
			if len(t.Grain) == 0 {
				t.Grain = inc.Grain
			}
		}
		switch {
		case inc == nil:
			t.Skip = SkipNoIncumb
		case t.IncumbentTable == t.CandidateTable:
			t.Skip = SkipSameTable
		case cand == nil || cand.SQL == "" || inc.SQL == "":
			t.Skip = SkipNotSQL
		case retired(st, t.CandidateTable) || retired(st, t.IncumbentTable):
			t.Skip = SkipRetired
		default:
			a, b := st.Table(t.CandidateTable), st.Table(t.IncumbentTable)
			both := a.SubtractSet(a.SubtractSet(b))
			if both.Empty() {
				t.Skip = SkipNoCoverage
			} else {
				t.Ranges = append(t.Ranges, both.Ranges()...)
			}
		}
		out = append(out, t)
	}
	if model != "" && len(out) == 0 {
		return nil, commands.Errorf(commands.CodeNotFound, "model", "plan %s has no candidate for model %q", plan, model)
	}
	return out, nil
}

// retired reports whether the janitor retired table.
func retired(st *projections.State, table string) bool {
	_, ok := st.Retired[table]
	return ok
}
