package views

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// lateState is events (hourly from t0, freshness fresh) and rollup (on
// events, default freshness) promoted to prod, both covering [0h, 10h),
// with the extra payloads after.
func lateState(t *testing.T, fresh string, more ...events.Payload) *projections.State {
	t.Helper()
	reg := func(model string, deps []string, fresh string) events.SnapshotRegistered {
		id := model + "@v1"
		return events.SnapshotRegistered{Snapshot: id, Model: model, Version: "v1", Cron: "0 * * * *", Unit: interval.Hour, Start: t0,
			Kind: events.Incremental, DependsOn: deps, Table: id, Freshness: fresh}
	}
	done := func(id string) events.IntervalsCompleted {
		return events.IntervalsCompleted{Snapshot: id, Table: id, Ranges: []interval.Range{hrs(0, 10)}, RunKind: events.RunBackfill}
	}
	ps := []events.Payload{
		reg("events", nil, fresh), reg("rollup", []string{"events"}, ""),
		events.PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: h(10), Start: t0, End: h(10), Candidates: []events.Candidate{
			{Model: "events", Snapshot: "events@v1", Table: "events@v1"}, {Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1"}}},
		done("events@v1"), done("rollup@v1"),
		events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 1, Models: map[string]events.ModelFinding{
			"events": {Snapshot: "events@v1"}, "rollup": {Snapshot: "rollup@v1"}}},
	}
	return fold(t, append(ps, more...)...)
}

// lateOf is the status of prod's models at clock at, by model.
func lateOf(t *testing.T, st *projections.State, at time.Time) map[string]commands.ModelStatus {
	t.Helper()
	envs, _ := Status(st, "prod", at)
	if len(envs) != 1 || len(envs[0].Models) != 2 {
		t.Fatalf("envs %+v", envs)
	}
	out := map[string]commands.ModelStatus{}
	for _, m := range envs[0].Models {
		out[m.Model] = m
	}
	return out
}

// A model is late when its frontier trails its readiness frontier by
// more than its freshness bound: one interval by default, so a tick's
// work in flight is not late, a second tick without it is.
func TestLateAtTheBound(t *testing.T) {
	st := lateState(t, "")
	// 11:30: ready to 11h, frontier 10h: one interval behind, the bound.
	ms := lateOf(t, st, h(11).Add(30*time.Minute))
	if m := ms["events"]; m.Late || !m.Ready.Equal(h(11)) || m.LateReason != "" {
		t.Errorf("at the bound: %+v", m)
	}
	// 12:00: ready to 12h, two intervals behind: late, upstream first.
	ms = lateOf(t, st, h(12))
	ev, ro := ms["events"], ms["rollup"]
	if !ev.Late || ev.LateCause != "" || !strings.Contains(ev.LateReason, "behind its readiness frontier 2026-12-01T12:00:00Z by more than 1 interval") {
		t.Errorf("events past the bound: %+v", ev)
	}
	if !ro.Late || ro.LateCause != commands.LateUpstream || !strings.HasPrefix(ro.LateReason, "upstream events is late") {
		t.Errorf("rollup past the bound: %+v", ro)
	}
	envs, _ := Status(st, "prod", h(12))
	if !AnyLate(envs) {
		t.Error("AnyLate: false")
	}
	NoWorker(envs)
	if m := envs[0].Models[0]; m.LateCause != commands.LateNoWorker || !strings.HasPrefix(m.LateReason, "no worker heartbeat") {
		t.Errorf("no worker: %+v", m)
	}
	if m := envs[0].Models[1]; m.LateCause != commands.LateUpstream {
		t.Errorf("no worker keeps the upstream cause: %+v", m)
	}
	// Before the start nothing is ready: never late.
	if envs, _ := Status(st, "prod", t0.Add(-time.Hour)); AnyLate(envs) || !envs[0].Models[0].Ready.IsZero() {
		t.Errorf("nothing ready: %+v", envs)
	}
}

// A version's freshness widens (or narrows) the bound: a number of
// intervals or a duration.
func TestLateFreshness(t *testing.T) {
	for _, c := range []struct {
		fresh string
		at    time.Time
		late  bool
	}{
		{"3", h(13), false}, {"3", h(14), true},
		{"2h", h(12), false}, {"2h", h(12).Add(time.Minute), false}, {"2h", h(13), true},
		{"90m", h(11).Add(30 * time.Minute), false}, {"90m", h(12), true},
	} {
		if m := lateOf(t, lateState(t, c.fresh), c.at)["events"]; m.Late != c.late {
			t.Errorf("freshness %s at %s: late %t, want %t", c.fresh, c.at.Format("15:04"), m.Late, c.late)
		}
	}
}

// A late model whose last run failed says so, with the failure's text.
func TestLateFailed(t *testing.T) {
	st := lateState(t, "", events.RunFailed{Snapshot: "events@v1", Ranges: []interval.Range{hrs(10, 11)}, RunKind: events.RunScheduled,
		Error: "exit status 3: relation raw.clicks does not exist", Attempt: 1})
	m := lateOf(t, st, h(12))["events"]
	if !m.Late || m.LateCause != commands.LateFailed || !strings.Contains(m.LateReason, "relation raw.clicks does not exist") {
		t.Errorf("failed: %+v", m)
	}
	// Not late, the failure is no reason.
	if m := lateOf(t, st, h(11))["events"]; m.Late || m.LateCause != "" {
		t.Errorf("failed, not late: %+v", m)
	}
}

// A failure that a later run overcame (its ranges computed since) is no
// reason: the model late now is late for another one (here, no worker
// ran the next ticks), not for an old failure's text.
func TestLateFailedOvercome(t *testing.T) {
	st := lateState(t, "", events.RunFailed{Snapshot: "events@v1", Ranges: []interval.Range{hrs(10, 11)}, RunKind: events.RunScheduled,
		Error: "exit status 3: relation raw.clicks does not exist", Attempt: 1},
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(10, 11)}, RunKind: events.RunScheduled})
	m := lateOf(t, st, h(13))["events"]
	if !m.Late || m.LateCause == commands.LateFailed || strings.Contains(m.LateReason, "raw.clicks") {
		t.Errorf("late after its failure was overcome: %+v", m)
	}
}
