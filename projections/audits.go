package projections

import (
	"math"
	"sort"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// AuditState is what the stream says of one audit of one snapshot: the
// ranges whose latest result failed, folded from AuditRecorded. A failed
// result adds its ranges, a passed one removes them (DESIGN.md: a range's
// latest audit result counts; a recomputed batch whose audit passes
// clears it), so a passing batch of another range clears nothing.
type AuditState struct {
	// Blocking is the audit's, from its registered definition (as the
	// events recorded it).
	Blocking bool `json:"blocking"`
	// Failed is the ranges whose latest result failed: the union of
	// Segments.
	Failed interval.Set `json:"failed"`
	// Segments are the failing results still latest on some ranges, in
	// stream order, each with those ranges only (a later result of a
	// range takes it from the segment that had it).
	Segments []AuditSegment `json:"segments,omitempty"`
	// Count, Columns, Sample and Error are the latest failing result's
	// (its violating rows, a sample of them, why it could not run);
	// FailedSeq is its sequence (0: never failed).
	Count     int64      `json:"count,omitempty"`
	Columns   []string   `json:"columns,omitempty"`
	Sample    [][]string `json:"sample,omitempty"`
	Error     string     `json:"error,omitempty"`
	FailedSeq uint64     `json:"failed_seq,omitempty"`
	// Results counts the results recorded; LastSeq is the latest's
	// sequence and LastPassed whether it passed.
	Results    int    `json:"results"`
	LastSeq    uint64 `json:"last_seq"`
	LastPassed bool   `json:"last_passed"`
}

// AuditSegment is a failing result on the ranges where it is still the
// latest.
type AuditSegment struct {
	Ranges interval.Set `json:"ranges"`
	// Count is the result's violating rows (over its whole batch), Error
	// why it could not run ("" when it ran).
	Count int64  `json:"count"`
	Error string `json:"error,omitempty"`
	Seq   uint64 `json:"seq"`
}

// auditRecorded folds an AuditRecorded.
func (s *State) auditRecorded(seq uint64, p events.AuditRecorded) {
	m := s.Audits[p.Snapshot]
	if m == nil {
		m = map[string]*AuditState{}
		s.Audits[p.Snapshot] = m
	}
	a := m[p.Audit]
	if a == nil {
		a = &AuditState{}
		m[p.Audit] = a
	}
	a.Blocking = p.Blocking
	a.Results++
	a.LastSeq, a.LastPassed = seq, !p.Failed()
	rs := interval.NewSet(p.Ranges...)
	// This result is now the latest on its ranges: earlier ones lose them.
	var kept []AuditSegment // a new slice: readers of an earlier state keep theirs
	for _, g := range a.Segments {
		if g.Ranges.OverlapsSet(rs) {
			g.Ranges = g.Ranges.SubtractSet(rs)
		}
		if !g.Ranges.Empty() {
			kept = append(kept, g)
		}
	}
	a.Segments = kept
	if p.Failed() {
		a.Segments = append(a.Segments, AuditSegment{Ranges: rs, Count: p.Count, Error: p.Error, Seq: seq})
		a.Failed = a.Failed.AddSet(rs)
		a.Count, a.Columns, a.Sample, a.Error, a.FailedSeq = p.Count, p.Columns, p.Sample, p.Error, seq
		return
	}
	a.Failed = a.Failed.SubtractSet(rs)
}

// AuditFailure is one audit of a snapshot failed on some ranges of a
// window.
type AuditFailure struct {
	Audit    string
	Blocking bool
	// Ranges is the failed ranges within the window.
	Ranges interval.Set
	// Count sums the violating rows of the failing results still latest
	// on those ranges (each over its whole batch); Error is why the latest
	// of them could not run, when it could not.
	Count int64
	Error string
}

// FailedAudits returns the audits of snapshot whose latest result failed
// on some range overlapping window, by audit name.
func (s *State) FailedAudits(snapshot string, window interval.Set) []AuditFailure {
	m := s.Audits[snapshot]
	if len(m) == 0 || window.Empty() {
		return nil
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []AuditFailure
	for _, n := range names {
		a := m[n]
		if a.Failed.Empty() {
			continue
		}
		var in interval.Set
		f := AuditFailure{Audit: n, Blocking: a.Blocking}
		for _, g := range a.Segments {
			var part interval.Set
			for _, w := range window {
				part = part.AddSet(g.Ranges.Clip(w))
			}
			if part.Empty() {
				continue
			}
			in = in.AddSet(part)
			f.Count = min(f.Count, math.MaxInt64-g.Count) + g.Count // saturating: workers report counts
			f.Error = g.Error                                       // segments are in stream order: the latest wins
		}
		if in.Empty() {
			continue
		}
		f.Ranges = in
		out = append(out, f)
	}
	return out
}
