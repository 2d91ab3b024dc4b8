package sqlrun

import (
	"context"
	"errors"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
	"github.com/tidemark/tidemark/warehouse"
)

// DiffSubject is the warehouse's diff request subject (`tidemark diff`).
const DiffSubject = "tidemark.wh.diff"

// DiffRequest asks to diff plan's candidates (one, when Model is set)
// against their incumbents.
type DiffRequest struct {
	Plan  string `json:"plan"`
	Model string `json:"model,omitempty"`
}

// DiffReply is the plan's diff, or why there is none: Error says why,
// and Code is the commands code of a refused request (not_found for an
// unknown plan or model; "" for a failure of the warehouse). Its JSON is
// what `tidemark diff -o json` prints (docs/events.md, "diff").
type DiffReply struct {
	Plan   string      `json:"plan"`
	Env    string      `json:"env"`
	Models []ModelDiff `json:"models"`
	Error  string      `json:"error,omitempty"`
	Code   string      `json:"code,omitempty"`
}

// ModelDiff is one candidate's diff: which snapshots and ranges were
// compared, then what the warehouse found (warehouse.TableDiff's keys,
// inline; absent when Skipped).
type ModelDiff struct {
	Model     string `json:"model"`
	Candidate string `json:"candidate"`
	Incumbent string `json:"incumbent,omitempty"`
	// Replaced: the plan was promoted, and Incumbent is the snapshot it
	// replaced.
	Replaced bool             `json:"replaced,omitempty"`
	Ranges   []interval.Range `json:"ranges"`
	// Skipped says why the rows were not compared (views.DiffTargets).
	Skipped string `json:"skipped,omitempty"`
	*warehouse.TableDiff
}

// Differs reports whether the candidate's rows differ from the
// incumbent's.
func (m ModelDiff) Differs() bool { return m.TableDiff != nil && !m.TableDiff.Empty() }

// DiffPlan compares the rows of plan's candidates (or only model's) with
// their incumbents' over the intervals both tables cover now
// (views.DiffTargets), in the warehouse (warehouse.DiffTables: read-only,
// sandboxed, bounded by ctx's deadline). An unknown plan or model is a
// *commands.Error, not_found.
func DiffPlan(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection, plan, model string) (DiffReply, error) {
	rep := DiffReply{Plan: plan, Models: []ModelDiff{}}
	var targets []views.DiffTarget
	var err error
	proj.Read(func(st *projections.State) {
		targets, err = views.DiffTargets(st, plan, model)
		if p := st.Plans[plan]; p != nil {
			rep.Env = p.Built.Env
		}
	})
	if err != nil {
		return rep, err
	}
	for _, t := range targets {
		md := ModelDiff{Model: t.Model, Candidate: t.Candidate, Incumbent: t.Incumbent, Replaced: t.Replaced, Ranges: t.Ranges, Skipped: t.Skip}
		if t.Skip == "" {
			rs := make([]warehouse.Range, len(t.Ranges))
			for i, r := range t.Ranges {
				rs[i] = warehouse.Range{Start: r.Start, End: r.End}
			}
			d, err := wh.DiffTables(ctx,
				warehouse.DiffSide{Table: TableName(t.CandidateTable), TimeColumn: t.CandidateTimeColumn},
				warehouse.DiffSide{Table: TableName(t.IncumbentTable), TimeColumn: t.IncumbentTimeColumn},
				rs, t.Grain)
			if err != nil {
				return rep, err
			}
			md.TableDiff = &d
		}
		rep.Models = append(rep.Models, md)
	}
	return rep, nil
}

// replyError fills rep's Error and Code from err.
func (rep *DiffReply) replyError(err error) {
	rep.Error = clip(err.Error())
	rep.Code = replyCode(err, "")
}

// replyCode is the code a reply gives err: a *commands.Error's own,
// unavailable when the warehouse's time ran out, else other ("": a
// failure of the warehouse).
func replyCode(err error, other commands.Code) string {
	var ce *commands.Error
	switch {
	case errors.As(err, &ce):
		return string(ce.Code)
	case errors.Is(err, warehouse.ErrTimeout):
		return string(commands.CodeUnavailable)
	}
	return string(other)
}
