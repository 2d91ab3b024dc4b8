package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

// decisionPage is what decision.html renders: one recorded promotion
// decision, read from the log at its sequence, with the plan's captured
// candidates (what the check compared against).
type decisionPage struct {
	Seq        uint64
	D          events.PromotionDecided
	Models     []decisionModel
	Candidates []events.Candidate
	// Latest is false when the plan has been decided again since.
	Latest bool
	// LatestSeq is the plan's most recent decision's sequence.
	LatestSeq uint64
	// Next says what to do about a rejection (views.NextSteps on the
	// view it was evaluated on); NextNote why there is none.
	Next     []views.NextStep
	NextNote string
}

type decisionModel struct {
	Model, Snapshot string
	Codes           []string
	Missing         string
	Advances        int
}

// errNotDecision answers a sequence that holds another event.
var errNotDecision = errors.New("not a promotion decision")

// decision serves /decisions/{seq}: the decision recorded at seq, its
// codes per model, every finding, and the candidates as captured at plan
// build. It reads the event from the log, so a decision superseded by a
// later promotion of the same plan still has its page.
func (s *Server) decision(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		http.Error(w, "seq: want a positive stream sequence", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	p, err := s.decisionAt(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, errNotDecision):
		http.Error(w, fmt.Sprintf("no decision at seq %d: %v", seq, err), http.StatusNotFound)
		return
	case err != nil:
		s.Logger.Error("decision page", "seq", seq, "err", err)
		http.Error(w, "reading the log failed", http.StatusServiceUnavailable)
		return
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "decision.html", p); err != nil {
		s.Logger.Error("decision page", "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// maxDecisionPages bounds the decision pages kept worked out (decided).
const maxDecisionPages = 256

// decisionAt is the page of the decision at seq: what the log holds of it
// (the decision and, for a rejection, its next steps on the view it
// read) is worked out once per seq and kept (decided), as neither ever
// changes; the plan's candidates and latest decision are read from the
// projection each time.
func (s *Server) decisionAt(ctx context.Context, seq uint64) (decisionPage, error) {
	s.decidedMu.Lock()
	p, ok := s.decided[seq]
	s.decidedMu.Unlock()
	if !ok {
		var err error
		if p, err = s.decisionRead(ctx, seq); err != nil {
			return decisionPage{}, err
		}
		if p.NextNote == "" { // a failed read of the view is tried again
			s.decidedMu.Lock()
			if len(s.decided) >= maxDecisionPages {
				clear(s.decided)
			}
			s.decided[seq] = p
			s.decidedMu.Unlock()
		}
	}
	p.Latest = true
	s.Proj.Read(func(st *projections.State) {
		if pl := st.Plans[p.D.Plan]; pl != nil {
			p.Candidates = pl.Built.Candidates
			p.LatestSeq = pl.DecisionSeq
			p.Latest = pl.DecisionSeq == seq
		}
	})
	return p, nil
}

// decisionRead reads the decision at seq from the log and, for a
// rejection, folds the log to the view it read (one fold at a time:
// views, waiting within ctx) for its next steps.
func (s *Server) decisionRead(ctx context.Context, seq uint64) (decisionPage, error) {
	rec, err := s.Log.Get(ctx, seq)
	if err != nil {
		return decisionPage{}, err
	}
	if rec.Err != nil {
		return decisionPage{}, fmt.Errorf("%w: %v", errNotDecision, rec.Err)
	}
	d, ok := rec.Event.Payload.(events.PromotionDecided)
	if !ok {
		return decisionPage{}, fmt.Errorf("%w: seq %d holds %s", errNotDecision, seq, rec.Event.Type)
	}
	p := decisionPage{Seq: seq, D: d}
	for m, f := range d.Models {
		p.Models = append(p.Models, decisionModel{Model: m, Snapshot: f.Snapshot, Codes: f.Codes,
			Missing: strings.Join(interval.Set(f.Missing).Strings(), ", "), Advances: f.Advances})
	}
	sort.Slice(p.Models, func(i, j int) bool { return p.Models[i].Model < p.Models[j].Model })
	if d.Outcome == events.Rejected {
		var view *projections.State
		select {
		case s.views <- struct{}{}:
			view, err = s.viewAt(ctx, d.EvaluatedAtSeq)
			<-s.views
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			p.NextNote = "what would admit it was not worked out: reading the view it was evaluated on failed: " + err.Error()
		} else {
			p.Next = views.NextSteps(view, d)
		}
	}
	return p, nil
}

// errViewRead ends viewAt's read of the log once it has its view.
var errViewRead = errors.New("view read")

// viewAt folds the log's events up to seq into a fresh state: the view
// a decision evaluated at seq read.
func (s *Server) viewAt(ctx context.Context, seq uint64) (*projections.State, error) {
	st := projections.New()
	if seq == 0 {
		return st, nil
	}
	err := s.Log.Tail(ctx, 1, func(e eventlog.Entry) error {
		if e.Seq > seq {
			return errViewRead
		}
		_ = projections.ApplyRecord(st, e.Record) // as replay folds: a record it cannot apply is skipped
		if e.Seq == seq && (e.Count == 0 || e.Index == e.Count-1) {
			return errViewRead
		}
		return nil
	})
	if errors.Is(err, errViewRead) {
		return st, nil
	}
	return nil, err
}
