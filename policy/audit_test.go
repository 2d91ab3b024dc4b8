package policy

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"pgregory.net/rapid"
)

// record folds an AuditRecorded of events@v2 into w's state.
func (w world) record(seq uint64, audit string, blocking, passed bool, count int64, r interval.Range) {
	ev := events.New(events.NewIDSource(), t0, events.AuditRecorded{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{r},
		Blocking: blocking, AuditOutcome: events.AuditOutcome{Audit: audit, Passed: passed, Count: count}})
	if err := projections.Apply(w.st, seq, ev); err != nil {
		panic(err)
	}
}

// Against an independent oracle, hour by hour (the latest result of each
// hour, folded in order): a decision carries audit_failed exactly when a
// blocking audit's latest result failed on an hour of the check window,
// and is then rejected whatever its coverage; audit_warning exactly when a
// non-blocking one did. Coverage codes are judged as without audits.
func TestAuditCodesMatchOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const n = 24
		front := rapid.IntRange(1, n).Draw(t, "frontier")
		candidate := interval.NewSet(interval.R(t0, hr(front))).SubtractSet(randomSet(t, "holes", front))
		pol := events.Policy{MaxTrailingGapAdvances: rapid.IntRange(0, 2).Draw(t, "trailing")}
		w := newWorld("@hourly", interval.Hour, interval.NewSet(interval.R(t0, hr(front))), candidate, hr(front), pol)
		bare := Evaluate(w.st, w.plan)
		latest := map[string]map[int]bool{} // audit -> hour -> failed
		result := map[string]map[int]int{}  // audit -> hour -> the latest result (its index, also its count)
		blocking := map[string]bool{"ids": true, "rows": false}
		for i, k := 0, rapid.IntRange(0, 8).Draw(t, "results"); i < k; i++ {
			audit := rapid.SampledFrom([]string{"ids", "rows"}).Draw(t, "audit")
			a := rapid.IntRange(0, n+3).Draw(t, "a")
			b := rapid.IntRange(a+1, n+4).Draw(t, "b")
			passed := rapid.Bool().Draw(t, "passed")
			w.record(uint64(i+1), audit, blocking[audit], passed, int64(i), interval.R(hr(a), hr(b)))
			if latest[audit] == nil {
				latest[audit], result[audit] = map[int]bool{}, map[int]int{}
			}
			for x := a; x < b; x++ {
				latest[audit][x], result[audit][x] = !passed, i
			}
		}
		failedIn := func(audit string) bool {
			for x := 0; x < front; x++ {
				if latest[audit][x] {
					return true
				}
			}
			return false
		}
		count := func(audit string) int64 { // the failing results latest on an hour of the window
			seen := map[int]bool{}
			var n int64
			for x := 0; x < front; x++ {
				if i := result[audit][x]; latest[audit][x] && !seen[i] {
					seen[i], n = true, n+int64(i)
				}
			}
			return n
		}
		d := Evaluate(w.st, w.plan)
		for _, f := range d.Findings {
			if f.Code != CodeAuditFailed && f.Code != CodeAuditWarning {
				continue
			}
			if f.Count != count(f.Audit) {
				t.Fatalf("%s: count %d, oracle %d", f.Audit, f.Count, count(f.Audit))
			}
			var want interval.Set
			for x := 0; x < front; x++ {
				if latest[f.Audit][x] {
					want = want.Add(interval.R(hr(x), hr(x+1)))
				}
			}
			if !interval.NewSet(f.Ranges...).Equal(want) {
				t.Fatalf("%s: ranges %v, oracle %v", f.Audit, f.Ranges, want)
			}
		}
		if d.NeedsCatchUp() {
			t.Fatalf("catch-up without a catch-up bound")
		}
		if got, want := slices.Contains(d.Codes, CodeAuditFailed), failedIn("ids"); got != want {
			t.Fatalf("audit_failed %t, oracle %t: %v", got, want, d.Codes)
		}
		if got, want := slices.Contains(d.Codes, CodeAuditWarning), failedIn("rows"); got != want {
			t.Fatalf("audit_warning %t, oracle %t: %v", got, want, d.Codes)
		}
		if failedIn("ids") && d.Outcome != events.Rejected {
			t.Fatalf("accepted with a failed blocking audit: %v", d.Codes)
		}
		if !failedIn("ids") && d.Outcome != bare.Outcome {
			t.Fatalf("audits changed the outcome without a blocking failure: %s, without audits %s", d.Outcome, bare.Outcome)
		}
		// Coverage is judged as before: the codes without audits are kept
		// (a rejection drops the passing ones).
		for _, c := range bare.Codes {
			if !slices.Contains(d.Codes, c) && !(d.Outcome == events.Rejected && !Rejects(c)) {
				t.Fatalf("code %s lost: %v, without audits %v", c, d.Codes, bare.Codes)
			}
		}
		if !slices.Equal(d.Models["events"].Missing, bare.Models["events"].Missing) {
			t.Fatalf("missing %v, without audits %v", d.Models["events"].Missing, bare.Models["events"].Missing)
		}
	})
}

// A candidate the catch-up bound admits is not caught up when a blocking
// audit of its window failed: catch-up cannot clear it, so it is rejected
// at once (audit_failed, its suffix missing), with no request.
func TestAuditFailedBeforeCatchUp(t *testing.T) {
	w := newWorld("@hourly", interval.Hour, interval.NewSet(interval.R(t0, hr(10))), interval.NewSet(interval.R(t0, hr(9))), hr(9),
		events.Policy{MaxCatchUpAdvances: 1})
	if d := Evaluate(w.st, w.plan); !d.NeedsCatchUp() {
		t.Fatalf("without audits: %+v", d)
	}
	w.record(1, "ids", true, false, 2, interval.R(hr(1), hr(2)))
	d := Evaluate(w.st, w.plan)
	if d.NeedsCatchUp() || d.Outcome != events.Rejected || !slices.Equal(d.Codes, []string{CodeAuditFailed}) ||
		fmt.Sprint(d.Models["events"].Missing) != fmt.Sprint([]interval.Range{interval.R(hr(9), hr(10))}) {
		t.Fatalf("%+v", d)
	}
	f := d.Findings[0]
	if f.Code != CodeAuditFailed || f.Audit != "ids" || f.Count != 2 || f.Model != "events" || f.Snapshot != "events@v2" {
		t.Fatalf("finding %+v", f)
	}
}

// The audit window: the check window; the backfill set with no incumbent
// coverage to match; nothing for a candidate that is its incumbent.
func TestAuditWindow(t *testing.T) {
	w := newWorld("@hourly", interval.Hour, interval.NewSet(interval.R(t0, hr(10))), nil, hr(10), events.Policy{})
	c := w.plan.Candidates[0]
	if got := AuditWindow(w.st, c); !got.Equal(interval.NewSet(interval.R(t0, hr(10)))) {
		t.Fatalf("check window: %v", got)
	}
	c.Incumbent, c.Backfill = "", []interval.Range{interval.R(hr(2), hr(4))}
	if got := AuditWindow(w.st, c); !got.Equal(interval.NewSet(interval.R(hr(2), hr(4)))) {
		t.Fatalf("no incumbent: %v", got)
	}
	c = w.plan.Candidates[0]
	c.Snapshot = c.Incumbent
	if got := AuditWindow(w.st, c); !got.Empty() {
		t.Fatalf("unchanged: %v", got)
	}
}
