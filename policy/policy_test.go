package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func hr(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

// world is a one-model env: incumbent v1 in prod, candidate v2 in plan p1.
type world struct {
	st   *projections.State
	plan events.PlanBuilt
}

func snapshot(version, cron string, unit interval.Unit) *projections.Snapshot {
	sched, err := interval.NewSchedule(cron, unit, false)
	if err != nil {
		panic(err)
	}
	id := events.SnapshotID("events", version)
	return &projections.Snapshot{Schedule: sched, SnapshotRegistered: events.SnapshotRegistered{
		Snapshot: id, Model: "events", Version: version, Cron: sched.Cron(), Unit: sched.Unit(), Start: t0,
		Kind: events.Incremental, Table: id,
	}}
}

func newWorld(cron string, unit interval.Unit, incumbent, candidate interval.Set, captured time.Time, pol events.Policy) world {
	st := projections.New()
	v1, v2 := snapshot("v1", cron, unit), snapshot("v2", cron, unit)
	st.Snapshots[v1.Snapshot], st.Snapshots[v2.Snapshot] = v1, v2
	st.Coverage[v1.Table], st.Coverage[v2.Table] = incumbent, candidate
	st.Envs["prod"] = &projections.Env{Name: "prod", Generation: 1, Incumbents: map[string]string{"events": v1.Snapshot}}
	pol.Version = Version
	plan := events.PlanBuilt{Plan: "p1", Env: "prod", Generation: 1, Policy: pol, Candidates: []events.Candidate{{
		Model: "events", Snapshot: v2.Snapshot, Table: v2.Table, Upstream: []string{}, Incumbent: v1.Snapshot,
		IncumbentFrontier: captured, IncumbentCron: v1.Cron, IncumbentUnit: v1.Unit,
	}}}
	return world{st: st, plan: plan}
}

// randomSet draws a set of whole hours in [0, n).
func randomSet(t *rapid.T, label string, n int) interval.Set {
	var s interval.Set
	for i, k := 0, rapid.IntRange(0, 6).Draw(t, label+"-ranges"); i < k; i++ {
		a := rapid.IntRange(0, n-1).Draw(t, label+"-a")
		b := rapid.IntRange(a+1, n).Draw(t, label+"-b")
		s = s.Add(interval.R(hr(a), hr(b)))
	}
	return s
}

// The safety properties of every policy: a plan is never accepted (nor
// caught up) while its candidate misses anything before the frontier
// captured at build, and never over more advances than its bound allows.
func TestPolicyNeverAcceptsUnsafeGaps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		daily := rapid.Bool().Draw(t, "daily")
		cron, unit, n := "@hourly", interval.Hour, 48
		if daily {
			cron, unit, n = "@daily", interval.Hour, 24*5
		}
		front := rapid.IntRange(1, n).Draw(t, "frontier")
		incumbent := interval.NewSet(interval.R(t0, hr(front))).SubtractSet(randomSet(t, "inc-holes", front))
		if incumbent.Empty() {
			incumbent = interval.NewSet(interval.R(t0, hr(front)))
		}
		captured := hr(rapid.IntRange(0, front).Draw(t, "captured"))
		candidate := randomSet(t, "cand", n)
		if rapid.Bool().Draw(t, "backfilled") {
			candidate = candidate.Add(interval.R(t0, captured))
		}
		pol := events.Policy{
			MaxTrailingGapAdvances: rapid.IntRange(0, 3).Draw(t, "trailing"),
			MaxCatchUpAdvances:     rapid.IntRange(0, 3).Draw(t, "catch-up"),
		}
		w := newWorld(cron, unit, incumbent, candidate, captured, pol)
		d := Evaluate(w.st, w.plan)
		window, ok := Window(w.st, w.plan.Candidates[0])
		missing := interval.Set(nil)
		if ok {
			missing = candidate.Missing(window)
		}
		historyMissed := missing.Overlaps(interval.R(t0, captured))
		switch {
		case d.NeedsCatchUp():
			if historyMissed {
				t.Fatalf("catch-up requested although history before %v is missing: %v", captured, missing)
			}
			wk := d.CatchUp[0]
			if wk.Advances > pol.MaxCatchUpAdvances || pol.MaxCatchUpAdvances == 0 {
				t.Fatalf("catch-up of %d advances under bound %d", wk.Advances, pol.MaxCatchUpAdvances)
			}
			if !interval.NewSet(wk.Ranges...).Equal(missing) {
				t.Fatalf("catch-up work %v, missing %v", wk.Ranges, missing)
			}
		case d.Outcome == events.Accepted:
			if historyMissed {
				t.Fatalf("accepted although history before %v is missing: %v (%v)", captured, missing, d.Codes)
			}
			f := d.Models["events"]
			if !interval.NewSet(f.Missing...).Equal(missing) {
				t.Fatalf("accepted with missing %v, recomputed %v", f.Missing, missing)
			}
			if !missing.Empty() && (f.Advances > pol.MaxTrailingGapAdvances || !missing.IsSuffix(window.End)) {
				t.Fatalf("accepted a gap %v of %d advances under bound %d", missing, f.Advances, pol.MaxTrailingGapAdvances)
			}
			if pol.MaxTrailingGapAdvances == 0 && pol.MaxCatchUpAdvances == 0 && !missing.Empty() {
				t.Fatalf("strict policy accepted a miss %v", missing)
			}
		case d.Outcome == events.Rejected:
			if missing.Empty() {
				t.Fatalf("rejected with nothing missing: %v", d.Codes)
			}
		default:
			t.Fatalf("no outcome: %+v", d)
		}
		if len(d.Findings) == 0 {
			t.Fatalf("decision without findings: %+v", d)
		}
		for _, f := range d.Findings {
			if f.Message == "" || f.Code == "" {
				t.Fatalf("finding without code or sentence: %+v", f)
			}
		}
	})
}

// After catch-up, the retry accepts only when the candidate covers
// everything, or, under an allowance, when the rest is a suffix within the
// bound; extra advances during catch-up exhaust it otherwise.
func TestRetryAfterCatchUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		front := rapid.IntRange(2, 40).Draw(t, "frontier")
		lag := rapid.IntRange(1, 2).Draw(t, "lag")
		captured := hr(front - lag)
		pol := events.Policy{MaxCatchUpAdvances: 2, MaxTrailingGapAdvances: rapid.IntRange(0, 2).Draw(t, "trailing")}
		w := newWorld("@hourly", interval.Hour, interval.NewSet(interval.R(t0, hr(front))), interval.NewSet(interval.R(t0, captured)), captured, pol)
		d := Evaluate(w.st, w.plan)
		if !d.NeedsCatchUp() {
			t.Fatalf("want a catch-up request, got %v", d.Codes)
		}
		req := d.Request(w.plan, 10, hr(front))
		// The worker computes the work; the scheduler advances k more times.
		done := rapid.Bool().Draw(t, "work done")
		if done {
			w.st.Coverage["events@v2"] = w.st.Coverage["events@v2"].AddSet(req.Work[0].Ranges)
		}
		k := rapid.IntRange(0, 3).Draw(t, "advances during catch-up")
		w.st.Coverage["events@v1"] = w.st.Coverage["events@v1"].Add(interval.R(hr(front), hr(front+k)))
		got := Retry(w.st, w.plan, req)
		missing := w.st.Coverage["events@v2"].Missing(interval.R(t0, hr(front+k)))
		f := got.Models["events"]
		rest := k // hourly: one advance per missing hour
		if !done {
			rest += lag
		}
		switch {
		case missing.Empty():
			if got.Outcome != events.Accepted || f.Codes[0] != CodeCaughtUp {
				t.Fatalf("nothing missing: %v %v", got.Outcome, got.Codes)
			}
		case pol.MaxTrailingGapAdvances > 0 && rest <= pol.MaxTrailingGapAdvances:
			if got.Outcome != events.Accepted || f.Codes[0] != CodeTrailingGapAccepted || f.Advances != rest {
				t.Fatalf("rest of %d advances under allowance %d: %v %v", rest, pol.MaxTrailingGapAdvances, got.Codes, f)
			}
		default:
			if got.Outcome != events.Rejected {
				t.Fatalf("accepted a retry missing %v: %v", missing, got.Codes)
			}
			if done && pol.MaxTrailingGapAdvances == 0 && f.Codes[0] != CodeCatchUpExhausted {
				t.Fatalf("advance during catch-up: want %s, got %v", CodeCatchUpExhausted, f.Codes)
			}
		}
	})
}

// The first failing condition names the code, for a planted gap of each
// shape (incumbent frontier 11:00 unless given).
func TestCodes(t *testing.T) {
	cover := func(rs ...interval.Range) interval.Set { return interval.NewSet(rs...) }
	trailing := func(n int) events.Policy { return events.Policy{MaxTrailingGapAdvances: n} }
	cases := []struct {
		name      string
		front     int
		candidate interval.Set
		captured  int
		pol       events.Policy
		want      string
	}{
		{"covered", 11, cover(interval.R(t0, hr(11))), 10, events.Policy{}, CodeNoGaps},
		{"strict miss", 11, cover(interval.R(t0, hr(10))), 10, events.Policy{}, CodeMissingIntervals},
		{"one advance", 11, cover(interval.R(t0, hr(10))), 10, trailing(1), CodeTrailingGapAccepted},
		{"two advances", 11, cover(interval.R(t0, hr(9))), 9, trailing(1), CodeTrailingGapExceeds},
		{"history", 11, cover(interval.R(t0, hr(4)), interval.R(hr(5), hr(10))), 10, trailing(1), CodeHistoricalGap},
		{"internal", 13, cover(interval.R(t0, hr(10)), interval.R(hr(11), hr(12))), 10, trailing(5), CodeInternalGap},
		{"catch-up", 11, cover(interval.R(t0, hr(10))), 10, events.Policy{MaxCatchUpAdvances: 1}, CodeCatchUpRequested},
		{"catch-up over bound", 12, cover(interval.R(t0, hr(10))), 10, events.Policy{MaxCatchUpAdvances: 1}, CodeTrailingGapExceeds},
	}
	for _, c := range cases {
		w := newWorld("@hourly", interval.Hour, cover(interval.R(t0, hr(c.front))), c.candidate, hr(c.captured), c.pol)
		d := Evaluate(w.st, w.plan)
		got := ""
		if d.NeedsCatchUp() {
			got = d.Findings[0].Code
		} else if codes := d.Models["events"].Codes; len(codes) > 0 {
			got = codes[0]
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s (findings %+v)", c.name, got, c.want, d.Findings)
		}
	}
}

// A promotion in between makes the plan conflict as a whole.
func TestConflictingPlanIsPlanWide(t *testing.T) {
	w := newWorld("@hourly", interval.Hour, interval.NewSet(interval.R(t0, hr(11))), interval.NewSet(interval.R(t0, hr(10))), hr(10), events.Policy{MaxTrailingGapAdvances: 1})
	w.st.Envs["prod"].Generation = 2
	d := Evaluate(w.st, w.plan)
	if d.Outcome != events.Rejected || len(d.Codes) != 1 || d.Codes[0] != CodeConflictingPlan || len(d.Models["events"].Missing) != 0 || len(d.Findings) != 1 {
		t.Fatalf("conflicting plan: %+v", d)
	}
}

// DESIGN.md, "Decision codes" (amended 2026-12-04): the complete list
// gains audit_failed (rejecting) and the warning audit_warning. Each code
// is in the list of the outcomes that may carry it, and rejects exactly
// when it is neither passing nor a warning.
func TestCodeLists(t *testing.T) {
	rejects := map[string]bool{
		CodeNoGaps: false, CodeCaughtUp: false, CodeTrailingGapAccepted: false,
		CodeForwardOnlyOverlapKept: false, CodeAuditWarning: false,
		CodeConflictingPlan: true, CodeMissingIntervals: true, CodeScheduleChanged: true, CodeHistoricalGap: true,
		CodeInternalGap: true, CodeAmbiguousBoundary: true, CodeTrailingGapExceeds: true, CodeDownstreamOverlap: true,
		CodeCatchUpExhausted: true, CodeAuditFailed: true,
	}
	for code, want := range rejects {
		if got := Rejects(code); got != want {
			t.Errorf("Rejects(%s) = %v, want %v", code, got, want)
		}
		inAccepted, inRejected := slices.Contains(AcceptedCodes, code), slices.Contains(RejectedCodes, code)
		warning := code == CodeForwardOnlyOverlapKept || code == CodeAuditWarning
		if inAccepted != (!want || warning) || inRejected != (want || warning) {
			t.Errorf("%s: in AcceptedCodes %v, in RejectedCodes %v", code, inAccepted, inRejected)
		}
	}
	if n := len(AcceptedCodes) + len(RejectedCodes); n != len(rejects)+2 {
		t.Errorf("the lists hold %d codes, want %d (the warnings in both)", n, len(rejects)+2)
	}
}
