package decide

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

func repairsClosed(dec Decision) []events.RepairCompleted {
	var out []events.RepairCompleted
	for _, p := range dec.Events {
		if rc, ok := p.(events.RepairCompleted); ok {
			out = append(out, rc)
		}
	}
	return out
}

// DESIGN.md, "Repair is work": an acceptance with a gap opens one debt per
// candidate and issues the repair work at once, per candidate, in
// dependency order.
func TestAcceptanceIssuesRepairs(t *testing.T) {
	w := standard(t, nil, []int{1}, sessions, reports)
	w.tick("prod", h(11))
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
		missing: map[string]interval.Set{"events": rs(hrs(10, 11)), "sessions": rs(hrs(10, 11)), "reports": rs(hrs(10, 11))}}.check(t, pd)
	want := []events.RepairWork{
		{Model: "events", Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{hrs(10, 11)}},
		{Model: "sessions", Snapshot: "sessions@v1+p1", Table: "sessions@v1+p1", Ranges: []interval.Range{hrs(10, 11)}},
		{Model: "reports", Snapshot: "reports@v1+p1", Table: "reports@v1+p1", Ranges: []interval.Range{hrs(10, 11)}},
	}
	if len(pd.Repairs) != len(want) {
		t.Fatalf("repairs %+v", pd.Repairs)
	}
	for i := range want {
		g := pd.Repairs[i]
		if g.Model != want[i].Model || g.Snapshot != want[i].Snapshot || g.Table != want[i].Table ||
			!interval.NewSet(g.Ranges...).Equal(interval.NewSet(want[i].Ranges...)) {
			t.Errorf("repair %d: %+v, want %+v", i, g, want[i])
		}
	}
	open := w.st.OpenRepairs()
	if len(open) != 3 {
		t.Fatalf("open debts %d, want one per candidate with a gap", len(open))
	}
	for _, r := range open {
		if !interval.NewSet(r.Ranges...).Equal(rs(hrs(10, 11))) || r.Plan != "p1" || r.Env != "prod" {
			t.Errorf("debt %+v", r)
		}
	}
}

// A partial interval counts as one advance, and the repair work is the
// whole (here partial) interval of the table's unit that covers the gap.
func TestPartialIntervalRepair(t *testing.T) {
	m := model{name: "totals", unit: interval.Day, partials: true, start: day(-3)}
	w := deployed(t, h(6), m)
	w.run("prod", h(6), h(10))
	m.version = "v2"
	w.register(m.command())
	pl := w.plan("p1", "prod", map[string]string{"totals": "v2"}, h(10), 1)
	if got := interval.NewSet(candidateOf(t, pl, "totals").Backfill...); !got.Equal(rs(interval.R(day(-3), h(10)))) {
		t.Fatalf("backfill %v", got)
	}
	w.backfill("p1", h(10))
	w.tick("prod", h(11))
	pd := w.decided("p1", at1107)
	expectation{outcome: events.Accepted, codes: []string{"trailing_gap_accepted"},
		missing: map[string]interval.Set{"totals": rs(hrs(10, 11))}, advances: map[string]int{"totals": 1}}.check(t, pd)
	if len(pd.Repairs) != 1 || !interval.NewSet(pd.Repairs[0].Ranges...).Equal(rs(hrs(0, 11))) {
		t.Fatalf("repairs %+v, want the day's interval up to 11:00", pd.Repairs)
	}
	dec := w.complete("totals@v2", h(11).Add(10*time.Minute), events.RunRepair, pd.Repairs[0].Ranges...)
	if len(repairsClosed(dec)) != 1 || w.openRepairs() != 0 {
		t.Fatalf("the repair work did not close the debt")
	}
}

// A debt closes when its table covers the gap, by any route, and the
// completion that closes it carries the RepairCompleted in the same
// decision; a completion that covers part of it closes nothing.
func TestCompletionClosesDebt(t *testing.T) {
	w := standard(t, nil, []int{2})
	w.tick("prod", h(11))
	w.tick("prod", h(12))
	pd := w.decided("p1", h(12))
	expectation{outcome: events.Accepted, missing: map[string]interval.Set{"events": rs(hrs(10, 12))}, advances: map[string]int{"events": 2},
		codes: []string{"trailing_gap_accepted"}}.check(t, pd)
	dec := w.complete("events@v2", h(12), events.RunManual, hrs(10, 11))
	if len(repairsClosed(dec)) != 0 || w.openRepairs() != 1 {
		t.Fatalf("a partial completion closed the debt")
	}
	dec = w.complete("events@v2", h(12), events.RunManual, hrs(11, 12))
	rc := repairsClosed(dec)
	if len(rc) != 1 || w.openRepairs() != 0 {
		t.Fatalf("the completion covering the gap closed %d debts, %d open", len(rc), w.openRepairs())
	}
	if rc[0].Model != "events" || rc[0].Plan != "p1" || !rc[0].ClosedAt.Equal(h(12)) || rc[0].LatencyMS != 0 ||
		rc[0].OpenSeq != w.st.Plans["p1"].DecisionSeq {
		t.Errorf("repair completed %+v", rc[0])
	}
	if _, ok := dec.Expect.Subjects[events.EnvSubject("prod")]; !ok {
		t.Errorf("the closing completion is not conditioned on the env subject: %v", dec.Expect.Subjects)
	}
}

// The scheduler's next tick fills the gap (listing the debt first) and
// its completion closes the debt; lookback work is not debt.
func TestSchedulerClosesDebt(t *testing.T) {
	w := standard(t, &model{name: "events", lookback: 2}, []int{1})
	w.tick("prod", h(11))
	if pd := w.decided("p1", at1107); pd.Outcome != events.Accepted {
		t.Fatalf("%s %v", pd.Outcome, pd.Codes)
	}
	advs := w.advance("prod", h(12))
	if len(advs) != 1 {
		t.Fatalf("advances %+v", advs)
	}
	a := advs[0]
	if got, want := interval.NewSet(a.Ranges...), rs(hrs(9, 12)); !got.Equal(want) {
		t.Errorf("work %v, want the gap, the new hour and two hours of lookback %v", got, want)
	}
	if got := interval.NewSet(a.Repairs...); !got.Equal(rs(hrs(10, 11))) {
		t.Errorf("repairs %v, want the debt only", got)
	}
	dec := w.complete(a.Snapshot, h(12), events.RunScheduled, a.Ranges...)
	if len(repairsClosed(dec)) != 1 || w.openRepairs() != 0 {
		t.Fatalf("the scheduled run did not close the debt")
	}
}
