package views

import (
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

func fold(t *testing.T, ps ...events.Payload) *projections.State {
	t.Helper()
	ids := events.NewIDSource()
	st := projections.New()
	for i, p := range ps {
		if err := projections.Apply(st, uint64(i+1), events.New(ids, t0, p)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// Freshness is measured from the incumbent's frontier; plans in flight
// report the share of their backfill their tables cover.
func TestFreshAndInFlight(t *testing.T) {
	reg := func(v string) events.SnapshotRegistered {
		return events.SnapshotRegistered{Snapshot: "events@" + v, Model: "events", Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, Table: "events@" + v}
	}
	cand := func(v string, backfill ...interval.Range) events.Candidate {
		return events.Candidate{Model: "events", Snapshot: "events@" + v, Table: "events@" + v, Backfill: backfill}
	}
	st := fold(t,
		reg("v1"), reg("v2"), reg("v3"),
		events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{cand("v1", hrs(0, 4))}},
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(0, 4)}, RunKind: events.RunBackfill},
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v1"}}},
		events.PlanBuilt{Plan: "p2", Env: "prod", Generation: 1, Candidates: []events.Candidate{cand("v2", hrs(0, 4))}},
		events.IntervalsCompleted{Snapshot: "events@v2", Table: "events@v2", Ranges: []interval.Range{hrs(0, 1)}, RunKind: events.RunBackfill},
		events.PlanBuilt{Plan: "p3", Env: "dev", Candidates: []events.Candidate{cand("v3")}},
	)
	fresh := Fresh(st, h(6))
	if len(fresh) != 1 || fresh[0].Env != "prod" || fresh[0].Snapshot != "events@v1" || !fresh[0].Frontier.Equal(h(4)) || fresh[0].Age != 2*time.Hour {
		t.Fatalf("fresh: %+v", fresh)
	}
	fl := InFlight(st)
	if len(fl) != 2 || fl[0].Plan != "p2" || fl[0].Total != 4*time.Hour || fl[0].Done != time.Hour || fl[0].Fraction() != 0.25 {
		t.Fatalf("in flight: %+v", fl)
	}
	if fl[1].Plan != "p3" || fl[1].Fraction() != 1 {
		t.Fatalf("a plan with nothing to backfill: %+v", fl[1])
	}
	// Status answers list them too, by env when one is asked for.
	r, err := Answer(st, &commands.Status{Env: "prod"}, h(6))
	want := []commands.PlanProgress{{Plan: "p2", Env: "prod", BackfillMS: (4 * time.Hour).Milliseconds(), DoneMS: time.Hour.Milliseconds()}}
	if err != nil || !reflect.DeepEqual(r.Plans, want) || r.Plans[0].Complete() {
		t.Fatalf("status plans: %+v, %v", r.Plans, err)
	}
	if r, _ := Answer(st, &commands.Status{}, h(6)); len(r.Plans) != 2 || r.Plans[1].Plan != "p3" || !r.Plans[1].Complete() {
		t.Fatalf("status plans of every env: %+v", r.Plans)
	}
}
