package web

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// PlanDiff is one candidate's diff (`tidemark diff`) as the plan page
// shows it: the counts, or why its rows were not compared.
type PlanDiff struct {
	Model, Candidate, Incumbent string
	// Skipped says why the rows were not compared ("" when they were).
	Skipped                                                                 string
	CandidateRows, IncumbentRows, OnlyInCandidate, OnlyInIncumbent, Changed int64
	// Grain is the key changed rows were matched on (nil: none).
	Grain []string
}

// Differs reports whether the candidate's rows differ from the
// incumbent's.
func (d PlanDiff) Differs() bool { return d.Skipped == "" && d.OnlyInCandidate+d.OnlyInIncumbent > 0 }

// planPage is what plan.html renders: a plan's build, its latest
// decision, and its candidates' diffs.
type planPage struct {
	Plan     events.PlanBuilt
	BuiltSeq uint64
	// State is "built", "accepted", "rejected", "finalized" or
	// "cancelled"; DecisionSeq links the latest decision (0: none).
	State       string
	DecisionSeq uint64
	// Diffs are the candidates' diffs; DiffNote says why there are none
	// (no warehouse, or the diff failed or ran out of time).
	Diffs    []PlanDiff
	DiffNote string
}

// diffTimeout is how long a plan page waits for its diff unless
// Server.DiffTimeout says.
const diffTimeout = 10 * time.Second

// plan serves /plans/{id}: the plan as built (candidates, incumbents,
// backfill sets), its state and latest decision, and each candidate's
// diff against its incumbent (Server.Diff), computed on request within
// DiffTimeout, one page's diff at a time.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var p planPage
	found := false
	s.Proj.Read(func(st *projections.State) {
		pl := st.Plans[id]
		if pl == nil {
			return
		}
		found = true
		p.Plan, p.BuiltSeq, p.DecisionSeq = pl.Built, pl.BuiltSeq, pl.DecisionSeq
		switch {
		case pl.Cancelled != nil:
			p.State = "cancelled"
		case pl.Finalized:
			p.State = "finalized"
		case pl.Decision != nil:
			p.State = string(pl.Decision.Outcome)
		default:
			p.State = "built"
		}
	})
	if !found {
		http.Error(w, "no plan "+id, http.StatusNotFound)
		return
	}
	if s.Diff == nil {
		p.DiffNote = "no warehouse: this server computes no rows, so there is nothing to diff"
	} else {
		timeout := s.DiffTimeout
		if timeout <= 0 {
			timeout = diffTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		select {
		case s.diffs <- struct{}{}:
			diffs, err := s.Diff(ctx, id)
			<-s.diffs
			if err != nil {
				p.DiffNote = "the diff failed: " + err.Error()
			}
			p.Diffs = diffs
		case <-ctx.Done():
			p.DiffNote = "the diff was not computed: another page's diff took the " + timeout.String() + " it may wait"
		}
		cancel()
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "plan.html", p); err != nil {
		s.Logger.Error("plan page", "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
