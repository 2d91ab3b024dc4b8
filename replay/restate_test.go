package replay_test

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
)

// TestVerifyRestatement: replay decides a recorded restatement again on
// the view it names at its clock and finds the same work; a record whose
// work was altered diverges, on field work.
func TestVerifyRestatement(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var recs []events.Record
	ids := events.NewIDSource()
	st := projections.New()
	add := func(at time.Time, cause string, ps ...events.Payload) {
		t.Helper()
		for _, p := range ps {
			ev := events.New(ids, at, p)
			ev.Causation = cause
			r := events.Record{Seq: uint64(len(recs) + 1), Subject: p.Subject(), Event: ev}
			recs = append(recs, r)
			if err := projections.ApplyRecord(st, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	hour := interval.Hour
	add(t0, "r1", events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "@hourly", Unit: hour, Start: t0, Kind: events.Incremental, Table: "events@v1"})
	add(t0, "r2", events.SnapshotRegistered{Snapshot: "rollup@v1", Model: "rollup", Version: "v1", Cron: "@daily", Unit: interval.Day, Start: t0, Kind: events.Incremental,
		DependsOn: []string{"events"}, Table: "rollup@v1"})
	add(t0, "p", events.PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: t0, Candidates: []events.Candidate{
		{Model: "events", Snapshot: "events@v1", Table: "events@v1"}, {Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Upstream: []string{"events@v1"}}}})
	add(t0, "c1", events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(48*time.Hour))}, RunKind: events.RunBackfill})
	add(t0, "c2", events.IntervalsCompleted{Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(48*time.Hour))}, RunKind: events.RunBackfill})
	add(t0, "pr", events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Codes: []string{"no_gaps"}, Generation: 1})

	at := t0.Add(50 * time.Hour)
	cmd := &commands.Restate{Meta: commands.Meta{ID: "rs1", At: at}, Env: "prod", Model: "events", Ranges: []interval.Range{interval.R(t0.Add(30*time.Hour), t0.Add(31*time.Hour))}}
	dec, err := decide.Decide(st, cmd)
	if err != nil {
		t.Fatal(err)
	}
	req := dec.Events[0].(events.RestatementRequested)
	if len(req.Work) != 2 || req.EvaluatedAtSeq != st.Seq {
		t.Fatalf("restatement %+v", req)
	}
	add(at, "rs1", dec.Events...)
	// The hand-made promotion above is no decision replay can reproduce:
	// only the restatement's divergences count here.
	ofRun := func(ds []replay.Divergence) []replay.Divergence {
		var out []replay.Divergence
		for _, d := range ds {
			if d.Plan == req.Run {
				out = append(out, d)
			}
		}
		return out
	}
	if d := ofRun(replay.Verify(recs)); len(d) != 0 {
		t.Fatalf("divergences: %v", d)
	}

	// Altered: the rollup's day left out of the record.
	altered := append([]events.Record(nil), recs...)
	i := len(altered) - len(dec.Events)
	bad := req
	bad.Work = bad.Work[:1]
	altered[i].Event.Payload = bad
	d := ofRun(replay.Verify(altered))
	if len(d) != 1 || d[0].Field != "work" {
		t.Fatalf("divergences of an altered restatement: %v", d)
	}
}
