package views

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func h(i int) time.Time               { return t0.Add(time.Duration(i) * time.Hour) }
func hrs(a, b int) interval.Range     { return interval.R(h(a), h(b)) }
func rs(r ...interval.Range) []string { return interval.NewSet(r...).Strings() }

// debtState folds a history without a server: events@v1 (hourly from t0)
// computed [0h, 8h) and [9h, 10h), then promoted to prod at 10h with
// [8h, 12h) missing; so its open debt still misses [8h, 9h) and [10h, 12h).
func debtState(t *testing.T) *projections.State {
	t.Helper()
	ids := events.NewIDSource()
	st := projections.New()
	c := events.Candidate{Model: "events", Snapshot: "events@v1", Table: "events@v1"}
	for i, p := range []struct {
		at time.Time
		p  events.Payload
	}{
		{t0, events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.ForwardOnly}},
		{t0, events.PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: t0, Start: t0, End: h(12), Candidates: []events.Candidate{c}}},
		{h(9), events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(0, 8), hrs(9, 10)}, RunKind: events.RunBackfill}},
		{h(10), events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1,
			Models: map[string]events.ModelFinding{"events": {Snapshot: "events@v1", Missing: []interval.Range{hrs(8, 12)}}}}},
	} {
		if err := projections.Apply(st, uint64(i+1), events.New(ids, p.at, p.p)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestDebts(t *testing.T) {
	st := debtState(t)
	ds := Debts(st, "")
	if len(ds) != 1 || ds[0].Plan != "p1" || ds[0].OpenSeq != 4 {
		t.Fatalf("debts %+v", ds)
	}
	if got, want := ds[0].Missing.Strings(), rs(hrs(8, 9), hrs(10, 12)); !slices.Equal(got, want) || ds[0].Intervals != 3 {
		t.Errorf("missing %v (%d intervals), want %v (3)", got, ds[0].Intervals, want)
	}
	if open, n, oldest := DebtTotals(ds); open != 1 || n != 3 || !oldest.Equal(h(10)) {
		t.Errorf("totals %d %d %s", open, n, oldest)
	}
	if open, n, oldest := DebtTotals(Debts(st, "qa")); open != 0 || n != 0 || !oldest.IsZero() {
		t.Errorf("totals of qa %d %d %s", open, n, oldest)
	}
}

func TestStatusAndOpenRepairs(t *testing.T) {
	st := debtState(t)
	envs, repairs := Status(st, "", h(11))
	if len(envs) != 1 || envs[0].Env != "prod" || envs[0].Generation != 1 || len(envs[0].Models) != 1 {
		t.Fatalf("envs %+v", envs)
	}
	if m := envs[0].Models[0]; m.Model != "events" || m.Snapshot != "events@v1" || m.OpenRepairs != 1 || m.Missing == nil {
		t.Errorf("model %+v", m)
	}
	if len(repairs) != 1 || repairs[0].OpenForMS != time.Hour.Milliseconds() ||
		!slices.Equal(interval.Set(repairs[0].Missing).Strings(), rs(hrs(8, 9), hrs(10, 12))) {
		t.Errorf("repairs %+v", repairs)
	}
	if envs, repairs := Status(st, "qa", h(11)); len(envs) != 0 || len(repairs) != 0 || envs == nil || repairs == nil {
		t.Errorf("status of qa: %+v %+v", envs, repairs)
	}
}

func TestAnswer(t *testing.T) {
	st := debtState(t)
	r, err := Answer(st, &commands.Status{Env: "prod"}, h(11))
	if err != nil || len(r.Envs) != 1 || len(r.Repairs) != 1 || r.Message != "1 environment(s), 1 open repair debt(s), 0 plan(s) in flight" || r.Accepted {
		t.Errorf("status: %+v, %v", r, err)
	}
	r, err = Answer(st, &commands.OpenRepairs{}, h(11))
	if err != nil || len(r.Repairs) != 1 || r.Envs != nil || r.Message != "1 open repair debt(s)" {
		t.Errorf("open repairs: %+v, %v", r, err)
	}
	var ce *commands.Error
	if _, err := Answer(st, &commands.OpenRepairs{Env: "qa"}, h(11)); !errors.As(err, &ce) || ce.Code != commands.CodeNotFound || ce.Field != "env" {
		t.Errorf("unknown env: %v", err)
	}
}
