package views

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// diffState: prod serves events@v1, fwd@v1 and plain@v1 (computed
// [0h, 10h)); plan p1 sets events@v2 (grain id, computed [2h, 6h) and
// [8h, 12h)), fwd@v2 (forward_only: fwd@v1's table), plain@v2 (no SQL)
// and fresh@v1 (no incumbent).
func diffState(t *testing.T) (*projections.State, func(events.Payload)) {
	t.Helper()
	ids := events.NewIDSource()
	st := projections.New()
	seq := uint64(0)
	apply := func(p events.Payload) {
		t.Helper()
		seq++
		if err := projections.Apply(st, seq, events.New(ids, h(12), p)); err != nil {
			t.Fatal(err)
		}
	}
	reg := func(model, version, table, sql string, kind events.Kind, grain ...string) {
		tc := ""
		if sql != "" {
			tc = "ts"
		}
		apply(events.SnapshotRegistered{Snapshot: model + "@" + version, Model: model, Version: version, Cron: "0 * * * *", Unit: interval.Hour,
			Start: t0, Kind: kind, Table: table, SQL: sql, TimeColumn: tc, Grain: grain})
	}
	reg("events", "v1", "events@v1", "SELECT 1", events.Incremental)
	reg("fwd", "v1", "fwd@v1", "SELECT 1", events.Incremental)
	reg("plain", "v1", "plain@v1", "", events.Incremental)
	deploy := []events.Candidate{
		{Model: "events", Snapshot: "events@v1", Table: "events@v1"},
		{Model: "fwd", Snapshot: "fwd@v1", Table: "fwd@v1"},
		{Model: "plain", Snapshot: "plain@v1", Table: "plain@v1"},
	}
	apply(events.PlanBuilt{Plan: "p0", Env: "prod", BuiltAt: t0, Start: t0, End: h(10), Candidates: deploy})
	for _, c := range deploy {
		apply(events.IntervalsCompleted{Snapshot: c.Snapshot, Table: c.Table, Ranges: []interval.Range{hrs(0, 10)}, RunKind: events.RunBackfill})
	}
	apply(events.PromotionDecided{Plan: "p0", Env: "prod", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{}})
	reg("events", "v2", "events@v2", "SELECT 2", events.Incremental, "id")
	reg("fwd", "v2", "fwd@v1", "SELECT 2", events.ForwardOnly)
	reg("plain", "v2", "plain@v2", "", events.Incremental)
	reg("fresh", "v1", "fresh@v1", "SELECT 1", events.Incremental)
	apply(events.PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: h(10), Start: t0, End: h(10), Generation: 1, Candidates: []events.Candidate{
		{Model: "events", Snapshot: "events@v2", Table: "events@v2", Incumbent: "events@v1"},
		{Model: "fresh", Snapshot: "fresh@v1", Table: "fresh@v1"},
		{Model: "fwd", Snapshot: "fwd@v2", Table: "fwd@v1", Incumbent: "fwd@v1"},
		{Model: "plain", Snapshot: "plain@v2", Table: "plain@v2", Incumbent: "plain@v1"},
	}})
	apply(events.IntervalsCompleted{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{hrs(2, 6), hrs(8, 12)}, RunKind: events.RunBackfill})
	return st, apply
}

// TestDiffTargets: per candidate, the incumbent it is compared with, the
// ranges both tables cover now, its grain; a forward-only candidate on its
// incumbent's table, one without an incumbent and one without SQL are
// skipped, saying why; after the promotion, the candidate is compared
// with what it replaced; an unknown plan or model is not_found.
func TestDiffTargets(t *testing.T) {
	st, apply := diffState(t)
	ts, err := DiffTargets(st, "p1", "")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, d := range ts {
		got += fmt.Sprintf("%s %s/%s %s/%s %v %v %t %q\n", d.Model, d.Candidate, d.CandidateTable, d.Incumbent, d.IncumbentTable, rs(d.Ranges...), d.Grain, d.Replaced, d.Skip)
	}
	want := fmt.Sprintf(`events events@v2/events@v2 events@v1/events@v1 %v [id] false ""
fresh fresh@v1/fresh@v1 / [] [] false %q
fwd fwd@v2/fwd@v1 fwd@v1/fwd@v1 [] [] false %q
plain plain@v2/plain@v2 plain@v1/plain@v1 [] [] false %q
`, rs(hrs(2, 6), hrs(8, 10)), SkipNoIncumb, SkipSameTable, SkipNotSQL)
	if got != want {
		t.Fatalf("targets:\n%s\nwant:\n%s", got, want)
	}
	if ts[0].CandidateTimeColumn != "ts" || ts[0].IncumbentTimeColumn != "ts" {
		t.Errorf("time columns %q %q", ts[0].CandidateTimeColumn, ts[0].IncumbentTimeColumn)
	}
	// The incumbent's coverage grows: so do the ranges.
	apply(events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(10, 11)}, RunKind: events.RunScheduled})
	ts, err = DiffTargets(st, "p1", "events")
	if err != nil || len(ts) != 1 || fmt.Sprint(rs(ts[0].Ranges...)) != fmt.Sprint(rs(hrs(2, 6), hrs(8, 11))) {
		t.Fatalf("events only, after an advance: %+v %v", ts, err)
	}
	// Promoted: compared with the incumbent it replaced.
	apply(events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 2, Models: map[string]events.ModelFinding{}})
	ts, err = DiffTargets(st, "p1", "events")
	if err != nil || len(ts) != 1 || ts[0].Incumbent != "events@v1" || !ts[0].Replaced || len(ts[0].Ranges) != 2 {
		t.Fatalf("after the promotion: %+v %v", ts, err)
	}
	// The replaced incumbent's table retired: nothing to compare.
	apply(events.TableRetired{Table: "events@v1", Snapshots: []string{"events@v1"}, Reason: "test"})
	ts, err = DiffTargets(st, "p1", "events")
	if err != nil || len(ts) != 1 || ts[0].Skip != SkipRetired || len(ts[0].Ranges) != 0 {
		t.Fatalf("after the incumbent's table was retired: %+v %v", ts, err)
	}
	for _, c := range []struct{ plan, model, field string }{{"nope", "", "plan"}, {"p1", "nope", "model"}} {
		_, err := DiffTargets(st, c.plan, c.model)
		var ce *commands.Error
		if !errors.As(err, &ce) || ce.Code != commands.CodeNotFound || ce.Field != c.field {
			t.Errorf("plan %q model %q: %v", c.plan, c.model, err)
		}
	}
}
