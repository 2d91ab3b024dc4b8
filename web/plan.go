package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
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
	// InFlight: the plan is not accepted, nor decided without a catch-up
	// open (views.InFlight).
	InFlight bool
	// Percent and Done are the backfill's progress in all ("6h of 48h");
	// Candidates per candidate.
	Percent    int
	Done       string
	Candidates []candidateProgress
	// Work is the plan's work per model, Failures the latest failure of
	// it per candidate (with its text), Audits the candidates' failed
	// audits in the window their promotion judges now.
	Work     []workView
	Failures []failureView
	Audits   []auditView
	// Decision is the plan's latest decision (nil: not promoted yet).
	Decision *events.PromotionDecided
}

// candidateProgress is one candidate's backfill progress as the plan
// page shows it.
type candidateProgress struct {
	Model, Snapshot string
	Percent         int
	Done            string
}

// percent is a fraction as a whole percentage, rounded.
func percent(f float64) int { return int(f*100 + 0.5) }

// diffTimeout is how long a plan page waits for its diff unless
// Server.DiffTimeout says.
const diffTimeout = 10 * time.Second

// plan serves /plans/{id}: the plan as built (candidates, incumbents,
// backfill sets), its state, its backfill's progress per candidate and
// its work per model, its work's failures with their text, its
// candidates' failed audits, its latest decision, and each candidate's
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
		p.Plan, p.BuiltSeq, p.DecisionSeq, p.Decision = pl.Built, pl.BuiltSeq, pl.DecisionSeq, pl.Decision
		p.InFlight = !pl.Accepted() && (pl.Decision == nil || pl.CatchUpOpen())
		pr := views.PlanProgress(st, pl)
		p.Percent, p.Done = percent(pr.Fraction()), fmt.Sprintf("%s of %s", pr.Done, pr.Total)
		for _, c := range pr.Candidates {
			p.Candidates = append(p.Candidates, candidateProgress{Model: c.Model, Snapshot: c.Snapshot, Percent: percent(c.Fraction()),
				Done: fmt.Sprintf("%s of %s", c.Done, c.Total)})
		}
		for _, m := range pr.Models {
			p.Work = append(p.Work, newWorkView(m))
		}
		for _, f := range pr.Failures {
			p.Failures = append(p.Failures, failureView{Model: f.Model, Final: f.Final, Text: f.Snapshot + ": " + failureText(f)})
		}
		for _, a := range pr.Audits {
			p.Audits = append(p.Audits, newAuditView(a))
		}
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
