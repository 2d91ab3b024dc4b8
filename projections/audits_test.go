package projections

import (
	"math"
	"testing"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// A range's latest audit result counts: a failure adds its ranges, a pass
// removes its own ranges only, so a passing batch of another range does
// not hide an earlier failure; the last failing result's count stays.
func TestAuditFold(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	rec := func(passed bool, count int64, rs ...interval.Range) {
		o := events.AuditOutcome{Audit: "ids", Passed: passed, Count: count}
		f.apply(hr(20), events.AuditRecorded{Snapshot: "events@v2", Table: "events@v2", Ranges: rs, Blocking: true, AuditOutcome: o})
	}
	failedIn := func(w interval.Range) []AuditFailure { return f.st.FailedAudits("events@v2", interval.NewSet(w)) }
	rec(false, 3, interval.R(hr(0), hr(5)))
	rec(true, 0, interval.R(hr(5), hr(10))) // the next batch passes: another range
	got := failedIn(interval.R(hr(0), hr(10)))
	if len(got) != 1 || got[0].Audit != "ids" || !got[0].Blocking || got[0].Count != 3 || !got[0].Ranges.Equal(interval.NewSet(interval.R(hr(0), hr(5)))) {
		t.Fatalf("after a pass of another range: %+v", got)
	}
	if got := failedIn(interval.R(hr(5), hr(10))); len(got) != 0 {
		t.Fatalf("outside the failed ranges: %+v", got)
	}
	if got := failedIn(interval.R(hr(3), hr(8))); len(got) != 1 || !got[0].Ranges.Equal(interval.NewSet(interval.R(hr(3), hr(5)))) {
		t.Fatalf("clipped to the window: %+v", got)
	}
	rec(true, 0, interval.R(hr(0), hr(2))) // part recomputed, passing
	if got := failedIn(interval.R(hr(0), hr(10))); len(got) != 1 || !got[0].Ranges.Equal(interval.NewSet(interval.R(hr(2), hr(5)))) {
		t.Fatalf("after a partial recompute: %+v", got)
	}
	rec(false, 1, interval.R(hr(8), hr(9)))
	if got := failedIn(interval.R(hr(0), hr(10))); len(got) != 1 || got[0].Count != 4 || len(got[0].Ranges) != 2 {
		t.Fatalf("a second failure: the counts of both failing batches: %+v", got)
	}
	if got := failedIn(interval.R(hr(0), hr(6))); len(got) != 1 || got[0].Count != 3 {
		t.Fatalf("a failing batch outside the window adds no count: %+v", got)
	}
	rec(true, 0, interval.R(hr(0), hr(10))) // all recomputed, passing
	if got := failedIn(interval.R(hr(0), hr(10))); len(got) != 0 {
		t.Fatalf("after the recompute: %+v", got)
	}
	if a := f.st.Audits["events@v2"]["ids"]; a.Results != 5 || !a.LastPassed || a.FailedSeq != 4 {
		t.Fatalf("state %+v", a)
	}
	// An outcome with an error counts as failed, whatever passed says.
	f.apply(hr(21), events.AuditRecorded{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{interval.R(hr(0), hr(1))},
		AuditOutcome: events.AuditOutcome{Audit: "rows", Passed: true, Error: "timed out"}})
	if got := f.st.FailedAudits("events@v2", interval.NewSet(interval.R(hr(0), hr(1)))); len(got) != 1 || got[0].Audit != "rows" || got[0].Blocking || got[0].Error != "timed out" {
		t.Fatalf("an error: %+v", got)
	}
	if a := f.st.Audits["events@v2"]["rows"]; a.LastPassed || a.Error != "timed out" {
		t.Fatalf("an error is a failed result: %+v", a)
	}
}

// TestFailedAuditsCountSaturates: the count a finding reports sums the
// failing batches' counts, which workers report (each at most
// MaxInt64): the sum saturates, it never wraps to a negative count.
func TestFailedAuditsCountSaturates(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	for h := range 3 {
		f.apply(hr(20), events.AuditRecorded{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{interval.R(hr(h), hr(h+1))}, Blocking: true,
			AuditOutcome: events.AuditOutcome{Audit: "ids", Count: math.MaxInt64}})
	}
	got := f.st.FailedAudits("events@v2", interval.NewSet(interval.R(hr(0), hr(3))))
	if len(got) != 1 || got[0].Count != math.MaxInt64 {
		t.Fatalf("got %+v, want one failure counting MaxInt64", got)
	}
}
