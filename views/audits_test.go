package views

import (
	"testing"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Status shows an incumbent's failed audits; a plan in flight shows its
// candidates' failed audits within the window their promotion judges now
// (the backfill set, with no incumbent coverage), not those outside it.
func TestAuditViews(t *testing.T) {
	st := debtState(t)
	ids := events.NewIDSource()
	apply := func(p events.Payload) {
		t.Helper()
		if err := projections.Apply(st, st.Seq+1, events.New(ids, h(11), p)); err != nil {
			t.Fatal(err)
		}
	}
	fail := func(snapshot, audit string, blocking bool, count int64, r interval.Range) {
		apply(events.AuditRecorded{Snapshot: snapshot, Table: snapshot, Ranges: []interval.Range{r}, Blocking: blocking,
			AuditOutcome: events.AuditOutcome{Audit: audit, Count: count}})
	}
	fail("events@v1", "ids", true, 3, hrs(2, 3))
	fail("events@v1", "rows", false, 0, hrs(5, 6))
	envs, _ := Status(st, "prod", h(11))
	got := envs[0].Models[0].Audits
	if len(got) != 2 || got[0].Audit != "ids" || !got[0].Blocking || got[0].Count != 3 || interval.Set(got[0].Ranges).String() != interval.NewSet(hrs(2, 3)).String() ||
		got[1].Audit != "rows" || got[1].Blocking || got[0].Model != "events" || got[0].Snapshot != "events@v1" {
		t.Fatalf("status audits %+v", got)
	}

	apply(events.SnapshotRegistered{Snapshot: "clicks@v1", Model: "clicks", Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: "clicks@v1"})
	apply(events.PlanBuilt{Plan: "p2", Env: "prod", BuiltAt: h(11), Start: t0, End: h(6), Generation: 1,
		Candidates: []events.Candidate{{Model: "clicks", Snapshot: "clicks@v1", Table: "clicks@v1", Backfill: []interval.Range{hrs(0, 6)}}}})
	fail("clicks@v1", "ids", true, 1, hrs(4, 8))
	plans := Plans(st, "prod")
	if len(plans) != 1 || len(plans[0].Audits) != 1 {
		t.Fatalf("plans %+v", plans)
	}
	if a := plans[0].Audits[0]; a.Snapshot != "clicks@v1" || a.Audit != "ids" || interval.Set(a.Ranges).String() != interval.NewSet(hrs(4, 6)).String() {
		t.Fatalf("plan audits %+v", a)
	}
}
