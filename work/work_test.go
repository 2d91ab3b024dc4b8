package work_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// at is t0 plus h hours.
func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// hr is the range of hours [a, b).
func hr(a, b int) interval.Range { return interval.R(at(a), at(b)) }

func rs(r ...interval.Range) []interval.Range { return r }

// rec is a decoded record at seq, caused by command cause.
func rec(seq uint64, cause string, p events.Payload) events.Record {
	return events.Record{Seq: seq, Subject: p.Subject(), Event: events.Event{
		Envelope: events.Envelope{ID: fmt.Sprintf("ev%d", seq), Type: p.EventType(), OccurredAt: at(int(seq)), Causation: cause},
		Payload:  p,
	}}
}

func step(snapshot string, ranges []interval.Range, runID string) work.Step {
	m, v, _ := events.ParseSnapshotID(snapshot)
	return work.Step{Model: m, Version: v, Snapshot: snapshot, Ranges: ranges, RunID: runID}
}

func adv(snapshot string, tick time.Time, ranges, repairs []interval.Range) events.SchedulerAdvanced {
	m, _, _ := events.ParseSnapshotID(snapshot)
	return events.SchedulerAdvanced{Env: "prod", Model: m, Snapshot: snapshot, Tick: tick, Frontier: tick, Ranges: ranges, Repairs: repairs, Generation: 1}
}

func plan(cands ...events.Candidate) events.PlanBuilt {
	return events.PlanBuilt{Plan: "p1", Env: "prod", BuiltAt: at(100), Generation: 1, Candidates: cands}
}

func cand(snapshot string, backfill []interval.Range) events.Candidate {
	m, _, _ := events.ParseSnapshotID(snapshot)
	return events.Candidate{Model: m, Snapshot: snapshot, Table: m + "_t", Backfill: backfill}
}

func TestOf(t *testing.T) {
	tick := at(24)
	sched := "sched:a@v1:2024-01-02T00:00:00Z"
	tests := []struct {
		name  string
		group []events.Record
		want  []work.Item
	}{
		{
			name: "plan built: backfill in candidate order, empty candidates left out",
			group: []events.Record{rec(7, "c1", plan(
				cand("a@v2", rs(hr(0, 2), hr(4, 5))),
				cand("b@v2", nil),
				cand("c@v3", rs(hr(1, 3))),
			))},
			want: []work.Item{{
				ID: "work-7-backfill", RunKind: events.RunBackfill, Env: "prod", Plan: "p1", EventSeq: 7, At: at(7),
				Steps: []work.Step{
					step("a@v2", rs(hr(0, 2), hr(4, 5)), "backfill:p1"),
					step("c@v3", rs(hr(1, 3)), "backfill:p1"),
				},
			}},
		},
		{
			name:  "plan with nothing to backfill makes no work",
			group: []events.Record{rec(7, "c1", plan(cand("a@v2", nil)))},
		},
		{
			name: "a tick's advances are one item named after the first, repairs first",
			group: []events.Record{
				rec(10, "tick", adv("a@v1", tick, rs(hr(0, 24)), rs(hr(2, 4)))),
				rec(11, "tick", adv("b@v1", tick, rs(hr(20, 24)), nil)),
			},
			want: []work.Item{{
				ID: "work-10-scheduled", RunKind: events.RunScheduled, Env: "prod", EventSeq: 10, At: at(10),
				Steps: []work.Step{
					step("a@v1", rs(hr(2, 4)), sched+":repair"),
					step("a@v1", rs(hr(0, 2), hr(4, 24)), sched),
					step("b@v1", rs(hr(20, 24)), "sched:b@v1:2024-01-02T00:00:00Z"),
				},
			}},
		},
		{
			name:  "an advance that is all repair has no second step",
			group: []events.Record{rec(10, "tick", adv("a@v1", tick, rs(hr(2, 4)), rs(hr(2, 4))))},
			want: []work.Item{{
				ID: "work-10-scheduled", RunKind: events.RunScheduled, Env: "prod", EventSeq: 10, At: at(10),
				Steps: []work.Step{step("a@v1", rs(hr(2, 4)), sched+":repair")},
			}},
		},
		{
			name:  "an advance with nothing to compute makes no work",
			group: []events.Record{rec(10, "tick", adv("a@v1", tick, nil, nil))},
		},
		{
			name: "catch-up: ranges and recompute merged per candidate",
			group: []events.Record{
				rec(20, "cu", events.IntervalsInvalidated{Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(5, 6))}),
				rec(21, "cu", events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{
					{Model: "a", Snapshot: "a@v2", Table: "a_t", Ranges: rs(hr(6, 8))},
					{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(7, 8)), Recompute: rs(hr(5, 7))},
					{Model: "c", Snapshot: "c@v2", Table: "c_t"},
				}}),
			},
			want: []work.Item{{
				ID: "work-21-catch_up", RunKind: events.RunCatchUp, Env: "prod", Plan: "p1", EventSeq: 21, At: at(21),
				Steps: []work.Step{
					step("a@v2", rs(hr(6, 8)), "catch_up:p1"),
					step("b@v2", rs(hr(5, 8)), "catch_up:p1"),
				},
			}},
		},
		{
			name: "an acceptance with repairs",
			group: []events.Record{rec(30, "pr", events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 2,
				Repairs: []events.RepairWork{
					{Model: "a", Snapshot: "a@v2", Table: "a_t", Ranges: rs(hr(9, 10))},
					{Model: "b", Snapshot: "b@v2", Table: "b_t"},
				}})},
			want: []work.Item{{
				ID: "work-30-repair", RunKind: events.RunRepair, Env: "prod", Plan: "p1", EventSeq: 30, At: at(30),
				Steps: []work.Step{step("a@v2", rs(hr(9, 10)), "repair:p1")},
			}},
		},
		{
			name: "a restatement: its steps in the request's (dependency) order, parents first",
			group: []events.Record{
				rec(33, "rs", events.RestatementRequested{Env: "prod", Model: "a", Snapshot: "a@v1", Ranges: rs(hr(5, 6)), Generation: 2, Run: "restate:rs",
					Work: []events.RestateWork{
						{Model: "a", Snapshot: "a@v1", Table: "a_t", Ranges: rs(hr(5, 6)), Invalidated: rs(hr(5, 6))},
						{Model: "d", Snapshot: "d@v1", Table: "d_t", Ranges: rs(hr(0, 24)), Invalidated: rs(hr(0, 20))},
					}}),
				rec(34, "rs", events.IntervalsInvalidated{Snapshot: "a@v1", Table: "a_t", Ranges: rs(hr(5, 6)), Reason: "restate:rs"}),
				rec(35, "rs", events.IntervalsInvalidated{Snapshot: "d@v1", Table: "d_t", Ranges: rs(hr(0, 20)), Reason: "restate:rs"}),
			},
			want: []work.Item{{
				ID: "work-33-restate", RunKind: events.RunRestate, Env: "prod", EventSeq: 33, At: at(33),
				Steps: []work.Step{
					step("a@v1", rs(hr(5, 6)), "restate:rs"),
					step("d@v1", rs(hr(0, 24)), "restate:rs"),
				},
			}},
		},
		{
			name:  "a decision without repairs makes no work",
			group: []events.Record{rec(30, "pr", events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Rejected})},
		},
		{
			name: "undecodable records and other events make no work",
			group: []events.Record{
				{Seq: 40, Subject: "tidemark.evt.x", Err: errors.New("bad bytes")},
				rec(41, "x", events.IntervalsCompleted{Snapshot: "a@v1", Table: "a_t", Ranges: rs(hr(0, 1)), RunKind: events.RunManual}),
				rec(42, "x", events.RunFailed{Snapshot: "a@v1", Ranges: rs(hr(0, 1)), RunKind: events.RunManual, Error: "x", Attempt: 1}),
			},
		},
		{
			name: "an undecodable record among advances is skipped",
			group: []events.Record{
				rec(50, "tick", adv("a@v1", tick, rs(hr(23, 24)), nil)),
				{Seq: 51, Err: errors.New("bad bytes")},
				rec(52, "tick", adv("b@v1", tick, rs(hr(23, 24)), nil)),
			},
			want: []work.Item{{
				ID: "work-50-scheduled", RunKind: events.RunScheduled, Env: "prod", EventSeq: 50, At: at(50),
				Steps: []work.Step{
					step("a@v1", rs(hr(23, 24)), sched),
					step("b@v1", rs(hr(23, 24)), "sched:b@v1:2024-01-02T00:00:00Z"),
				},
			}},
		},
		{name: "no records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := work.Of(tt.group)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Of:\n got %s\nwant %s", js(t, got), js(t, tt.want))
			}
		})
	}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOfMatchesProjection pins that the projection records every item Of
// derives under the same id and run kind, with the same ranges per
// snapshot: a worker's report is checked against the projection's item.
func TestOfMatchesProjection(t *testing.T) {
	reg := func(snapshot string) events.SnapshotRegistered {
		m, v, _ := events.ParseSnapshotID(snapshot)
		return events.SnapshotRegistered{Model: m, Version: v, Snapshot: snapshot, Table: m + "_t", Cron: "@hourly", Unit: interval.Hour,
			Start: at(0), Kind: events.Incremental}
	}
	tick := at(24)
	groups := [][]events.Record{
		{rec(1, "r1", reg("a@v1"))},
		{rec(2, "r2", reg("b@v1"))},
		{rec(3, "r3", reg("a@v2"))},
		{rec(4, "r4", reg("b@v2"))},
		{rec(5, "tick1", adv("a@v1", tick, rs(hr(0, 24)), rs(hr(3, 5)))), rec(6, "tick1", adv("b@v1", tick, rs(hr(10, 24)), nil))},
		{rec(7, "plan", plan(cand("a@v2", rs(hr(0, 10))), cand("b@v2", rs(hr(0, 4), hr(6, 9)))))},
		{rec(8, "tick2", adv("a@v1", at(25), rs(hr(24, 25)), nil))},
		{rec(9, "cu", events.IntervalsInvalidated{Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(2, 3))}),
			rec(10, "cu", events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{
				{Model: "a", Snapshot: "a@v2", Table: "a_t", Ranges: rs(hr(10, 25))},
				{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(9, 25)), Recompute: rs(hr(2, 3))},
			}})},
		{rec(11, "promote", events.PromotionDecided{Plan: "p1", Env: "prod", Outcome: events.Accepted, Generation: 2,
			Repairs: []events.RepairWork{{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(4, 6))}}})},
		{rec(12, "restate", events.RestatementRequested{Env: "prod", Model: "a", Snapshot: "a@v2", Ranges: rs(hr(3, 4)), Generation: 2, Run: "restate:restate",
			Work: []events.RestateWork{
				{Model: "a", Snapshot: "a@v2", Table: "a_t", Ranges: rs(hr(3, 4)), Invalidated: rs(hr(3, 4))},
				{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(3, 5)), Invalidated: rs(hr(3, 4))},
			}}),
			rec(13, "restate", events.IntervalsInvalidated{Snapshot: "a@v2", Table: "a_t", Ranges: rs(hr(3, 4))}),
			rec(14, "restate", events.IntervalsInvalidated{Snapshot: "b@v2", Table: "b_t", Ranges: rs(hr(3, 4))})},
	}
	st := projections.New()
	var items []work.Item
	for _, g := range groups {
		for _, r := range g {
			if err := projections.Apply(st, r.Seq, r.Event); err != nil {
				t.Fatal(err)
			}
		}
		items = append(items, work.Of(g)...)
	}
	if len(items) != 6 {
		t.Fatalf("Of made %d items, want 6: %s", len(items), js(t, items))
	}
	if r := st.Restatements["work-12-restate"]; r == nil || r.Generation != 2 || r.Run != "restate:restate" {
		t.Errorf("projection's restatement of work-12-restate: %+v", r)
	}
	if len(st.Work) != len(items) {
		t.Errorf("projection has %d work items, Of made %d", len(st.Work), len(items))
	}
	for _, it := range items {
		pw, ok := st.Work[it.ID]
		if !ok {
			t.Errorf("item %s: not in the projection (has %v)", it.ID, keys(st.Work))
			continue
		}
		if pw.RunKind != it.RunKind {
			t.Errorf("item %s: projection run kind %s, Of %s", it.ID, pw.RunKind, it.RunKind)
		}
		if seq, k, ok := events.ParseWorkID(it.ID); !ok || seq != it.EventSeq || k != it.RunKind {
			t.Errorf("item %s: ParseWorkID = %d %s %v, want %d %s", it.ID, seq, k, ok, it.EventSeq, it.RunKind)
		}
		per := map[string]interval.Set{}
		for _, s := range it.Steps {
			per[s.Snapshot] = per[s.Snapshot].AddSet(s.Ranges)
		}
		if len(per) != len(pw.Steps) {
			t.Errorf("item %s: snapshots %v, projection %v", it.ID, keys(per), keys(pw.Steps))
		}
		for sn, set := range per {
			if !set.Equal(pw.Steps[sn]) {
				t.Errorf("item %s, %s: Of %s, projection %s", it.ID, sn, set, pw.Steps[sn])
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestItemJSON pins the wire form of a work item (docs/events.md): the
// field names workers read, and a lossless round trip.
func TestItemJSON(t *testing.T) {
	item := work.Item{ID: "work-7-backfill", RunKind: events.RunBackfill, Env: "prod", Plan: "p1", EventSeq: 7, At: at(7),
		Steps: []work.Step{step("a@v2", rs(hr(0, 2), hr(4, 5)), "backfill:p1")}}
	b, err := json.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"work-7-backfill","run_kind":"backfill","env":"prod","plan":"p1","event_seq":7,"at":"2024-01-01T07:00:00Z",` +
		`"steps":[{"model":"a","version":"v2","snapshot":"a@v2","ranges":["2024-01-01T00:00:00Z/2024-01-01T02:00:00Z",` +
		`"2024-01-01T04:00:00Z/2024-01-01T05:00:00Z"],"run_id":"backfill:p1"}]}`
	if string(b) != want {
		t.Errorf("JSON:\n got %s\nwant %s", b, want)
	}
	var back work.Item
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, item) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, item)
	}

	// A scheduled item has no plan, and an env is optional: both are left out.
	b, err = json.Marshal(work.Item{ID: "work-1-scheduled", RunKind: events.RunScheduled, EventSeq: 1, At: at(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"env"`, `"plan"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("empty %s is encoded: %s", k, b)
		}
	}
}

func TestBackfill(t *testing.T) {
	// Backfill takes the set as built and keeps candidates in order.
	p := plan(cand("b@v2", rs(hr(0, 1))), cand("a@v2", nil), cand("a@v3", rs(hr(2, 3))))
	got := work.Backfill(p)
	want := work.Item{RunKind: events.RunBackfill, Env: "prod", Plan: "p1",
		Steps: []work.Step{step("b@v2", rs(hr(0, 1)), "backfill:p1"), step("a@v3", rs(hr(2, 3)), "backfill:p1")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Backfill:\n got %s\nwant %s", js(t, got), js(t, want))
	}
}

func TestBackfillThrough(t *testing.T) {
	st := projections.New()
	for _, s := range []struct {
		id   string
		cron string
		unit interval.Unit
	}{{"d@v2", "@daily", interval.Day}, {"h@v2", "@hourly", interval.Hour}} {
		m, v, _ := events.ParseSnapshotID(s.id)
		st.Snapshots[s.id] = &projections.Snapshot{
			SnapshotRegistered: events.SnapshotRegistered{Model: m, Version: v, Snapshot: s.id, Cron: s.cron, Unit: s.unit},
			Schedule:           interval.MustSchedule(s.cron, s.unit, false),
		}
	}
	p := plan(
		cand("d@v2", rs(hr(0, 72))),            // three days
		cand("h@v2", rs(hr(0, 5), hr(30, 40))), // hours, with a hole
		cand("x@v1", rs(hr(0, 72))),            // not in the state: cut unfloored
	)
	tests := []struct {
		name    string
		through time.Time
		want    map[string][]interval.Range // by snapshot; absent: no step
	}{
		{"zero cuts nothing", time.Time{}, map[string][]interval.Range{
			"d@v2": rs(hr(0, 72)), "h@v2": rs(hr(0, 5), hr(30, 40)), "x@v1": rs(hr(0, 72))}},
		{"mid-day, mid-hour", at(36).Add(30 * time.Minute), map[string][]interval.Range{
			"d@v2": rs(hr(0, 24)), "h@v2": rs(hr(0, 5), hr(30, 36)), "x@v1": {interval.R(at(0), at(36).Add(30*time.Minute))}}},
		{"on a day boundary", at(48), map[string][]interval.Range{
			"d@v2": rs(hr(0, 48)), "h@v2": rs(hr(0, 5), hr(30, 40)), "x@v1": rs(hr(0, 48))}},
		{"inside the hole", at(20), map[string][]interval.Range{
			"h@v2": rs(hr(0, 5)), "x@v1": rs(hr(0, 20))}},
		{"before the first whole interval", at(0).Add(59 * time.Minute), map[string][]interval.Range{
			"x@v1": {interval.R(at(0), at(0).Add(59*time.Minute))}}},
		{"after everything", at(1000), map[string][]interval.Range{
			"d@v2": rs(hr(0, 72)), "h@v2": rs(hr(0, 5), hr(30, 40)), "x@v1": rs(hr(0, 72))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := work.BackfillThrough(st, p, tt.through)
			if got.RunKind != events.RunBackfill || got.Plan != "p1" || got.Env != "prod" {
				t.Errorf("item header %+v", got)
			}
			var order []string
			for _, s := range got.Steps {
				order = append(order, s.Snapshot)
				if !interval.Set(s.Ranges).Equal(interval.NewSet(tt.want[s.Snapshot]...)) {
					t.Errorf("%s: got %s, want %s", s.Snapshot, interval.Set(s.Ranges), interval.NewSet(tt.want[s.Snapshot]...))
				}
				if s.RunID != "backfill:p1" {
					t.Errorf("%s: run id %q", s.Snapshot, s.RunID)
				}
			}
			var wantOrder []string
			for _, c := range p.Candidates {
				if _, ok := tt.want[c.Snapshot]; ok {
					wantOrder = append(wantOrder, c.Snapshot)
				}
			}
			if !slices.Equal(order, wantOrder) {
				t.Errorf("steps %v, want %v", order, wantOrder)
			}
		})
	}
	// The plan passed in is not changed.
	if !interval.Set(p.Candidates[0].Backfill).Equal(interval.NewSet(hr(0, 72))) {
		t.Errorf("BackfillThrough changed the plan's candidates: %s", interval.Set(p.Candidates[0].Backfill))
	}
}

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{errors.New("nats: timeout"), true},
		{commands.Errorf(commands.CodeUnavailable, "", "x"), true},
		{commands.Errorf(commands.CodeConflict, "", "x"), true},
		{commands.Errorf(commands.CodeRateLimited, "", "x"), true},
		{commands.Errorf(commands.CodeInternal, "", "x"), true},
		{fmt.Errorf("worker: %w", commands.Errorf(commands.CodeUnavailable, "", "x")), true},
		{commands.Errorf(commands.CodeInvalid, "work", "x"), false},
		{commands.Errorf(commands.CodeNotFound, "plan", "x"), false},
		{commands.Errorf(commands.CodeLimit, "ranges", "x"), false},
		{commands.Errorf(commands.CodeIdempotencyConflict, "id", "x"), false},
		{commands.Errorf(commands.CodeStaleGeneration, "generation", "x"), false},
		{fmt.Errorf("worker: complete: %w", commands.Errorf(commands.CodeInvalid, "work", "x")), false},
		{commands.Reply{Code: commands.CodeNotFound}.Err(), false},
	}
	for _, tt := range tests {
		if got := work.Transient(tt.err); got != tt.want {
			t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestStreamAndConsumerConfig(t *testing.T) {
	for _, k := range []events.RunKind{events.RunBackfill, events.RunScheduled, events.RunCatchUp, events.RunRepair} {
		if got, want := work.Subject(k), "tidemark.work."+string(k); got != want {
			t.Errorf("Subject(%s) = %q, want %q", k, got, want)
		}
	}
	sc := work.StreamConfig(1, true)
	if sc.Name != work.Stream || !slices.Equal(sc.Subjects, []string{"tidemark.work.>"}) {
		t.Errorf("stream %s %v", sc.Name, sc.Subjects)
	}
	if sc.Retention != jetstream.WorkQueuePolicy || sc.Duplicates != work.DuplicateWindow || sc.Storage != jetstream.MemoryStorage {
		t.Errorf("stream retention %v, duplicates %v, storage %v", sc.Retention, sc.Duplicates, sc.Storage)
	}
	if sc := work.StreamConfig(3, false); sc.Replicas != 3 || sc.Storage != jetstream.FileStorage {
		t.Errorf("stream replicas %d, storage %v", sc.Replicas, sc.Storage)
	}
	cc := work.ConsumerConfig(7*time.Second, 3)
	if cc.Durable != work.Consumer || cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != 7*time.Second || cc.MaxDeliver != 3 {
		t.Errorf("consumer %+v", cc)
	}
}
