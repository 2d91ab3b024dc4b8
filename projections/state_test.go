package projections

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func hr(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

type folder struct {
	t   *testing.T
	st  *State
	seq uint64
	ids *events.IDSource
}

func (f *folder) apply(at time.Time, p events.Payload) uint64 {
	f.t.Helper()
	f.seq++
	if err := Apply(f.st, f.seq, events.New(f.ids, at, p)); err != nil {
		f.t.Fatal(err)
	}
	return f.seq
}

// The lifecycle of a plan under catch-up and of the repair debt an
// accepted gap opens, folded from events alone.
func TestPlanAndRepairLifecycle(t *testing.T) {
	f := &folder{t: t, st: New(), ids: events.NewIDSource()}
	for _, v := range []string{"v1", "v2"} {
		f.apply(hr(0), events.SnapshotRegistered{Snapshot: "events@" + v, Model: "events", Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: "events@" + v})
	}
	plan := events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v2", Table: "events@v2"}}}
	f.apply(hr(10), plan)
	req := f.apply(hr(11), events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{{Model: "events", Snapshot: "events@v2", Table: "events@v2"}}})
	pl := f.st.Plans["p1"]
	if !pl.CatchUpOpen() || pl.CatchUpSeq != req {
		t.Fatalf("after the request: open %v seq %d", pl.CatchUpOpen(), pl.CatchUpSeq)
	}
	gap := []interval.Range{interval.R(hr(10), hr(11))}
	dec := f.apply(hr(11), events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, CatchUpSeq: req,
		Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v2", Missing: gap}}})
	if pl.CatchUpOpen() || !pl.Accepted() || f.st.Env("prod").Incumbents["events"] != "events@v2" || f.st.Env("prod").Generation != 1 {
		t.Fatalf("after the decision: %+v", pl)
	}
	open := f.st.OpenRepairs()
	if len(open) != 1 || open[0].OpenSeq != dec || !open[0].OpenedAt.Equal(hr(11)) {
		t.Fatalf("open repairs: %+v", open)
	}
	// Coverage alone does not close a debt: the engine's RepairCompleted does.
	f.apply(hr(12), events.IntervalsCompleted{Snapshot: "events@v2", Table: "events@v2", Ranges: gap})
	if closable := f.st.RepairsClosedBy("events@v2", f.st.Table("events@v2")); len(f.st.OpenRepairs()) != 1 || len(closable) != 1 {
		t.Fatalf("after the completion: open %d, closable %d", len(f.st.OpenRepairs()), len(closable))
	}
	rc := open[0].Completed(hr(12))
	if rc.LatencyMS != time.Hour.Milliseconds() {
		t.Fatalf("latency %d", rc.LatencyMS)
	}
	closed := f.apply(hr(12), rc)
	f.apply(hr(12), rc) // a second one changes nothing
	if len(f.st.OpenRepairs()) != 0 || f.st.Repairs[0].ClosedSeq != closed || f.st.Repairs[0].LatencyMS != rc.LatencyMS {
		t.Fatalf("after RepairCompleted: %+v", f.st.Repairs[0])
	}
}

// Events at or below the applied sequence are ignored; an event that
// contradicts the state is counted as skipped and the fold goes on.
func TestApplyIsIdempotentAndTolerant(t *testing.T) {
	st := New()
	ids := events.NewIDSource()
	ev := events.New(ids, hr(1), events.PromotionDecided{Plan: "nope", Env: "prod", Outcome: events.Accepted})
	if err := Apply(st, 1, ev); err == nil || st.Skipped != 1 || st.Seq != 1 {
		t.Fatalf("decision for an unknown plan: err %v, %+v", err, st)
	}
	if err := Apply(st, 1, ev); err != nil || st.Skipped != 1 || st.Events != 1 {
		t.Fatalf("re-applied seq 1: err %v, %+v", err, st)
	}
	Skip(st, 2, "tidemark.evt.env.prod")
	if st.Seq != 2 || st.SubjectSeq["tidemark.evt.env.prod"] != 2 || st.Skipped != 2 {
		t.Fatalf("skip: %+v", st)
	}
}
