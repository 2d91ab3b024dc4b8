package projections

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"pgregory.net/rapid"
)

// genEvents draws a plausible random history: registrations, plans,
// completions, invalidations, advances, catch-up requests, decisions,
// repairs, failures, audit results, finalizations, retirements, rollbacks — and some that contradict the state.
func genEvents(t *rapid.T) []events.Event {
	ids := events.NewIDSource()
	models := []string{"a", "b", "c"}
	versions := []string{"v1", "v2"}
	snap := func(t *rapid.T) string {
		return events.SnapshotID(rapid.SampledFrom(models).Draw(t, "model"), rapid.SampledFrom(versions).Draw(t, "version"))
	}
	hr := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }
	ranges := func(t *rapid.T) []interval.Range {
		var out []interval.Range
		for i, n := 0, rapid.IntRange(1, 3).Draw(t, "n"); i < n; i++ {
			a := rapid.IntRange(0, 46).Draw(t, "a")
			out = append(out, interval.R(hr(a), hr(a+rapid.IntRange(1, 4).Draw(t, "len"))))
		}
		return interval.NewSet(out...)
	}
	plans := []string{"p1", "p2", "p3"}
	var evs []events.Event
	n := rapid.IntRange(1, 60).Draw(t, "events")
	for i := 0; i < n; i++ {
		at := hr(i)
		var p events.Payload
		switch rapid.IntRange(0, 10).Draw(t, "kind") {
		case 0, 1:
			id := snap(t)
			m, v, _ := events.ParseSnapshotID(id)
			p = events.SnapshotRegistered{Snapshot: id, Model: m, Version: v, Cron: "0 * * * *", Unit: interval.Hour, Start: t0, Kind: events.Incremental, Table: id, DependsOn: []string{}}
		case 2:
			id := snap(t)
			m, _, _ := events.ParseSnapshotID(id)
			p = events.PlanBuilt{Plan: rapid.SampledFrom(plans).Draw(t, "plan"), Env: "prod", Generation: uint64(rapid.IntRange(0, 3).Draw(t, "gen")),
				Candidates: []events.Candidate{{Model: m, Snapshot: id, Table: id, Upstream: []string{}, Backfill: []interval.Range{}}}}
		case 3, 4, 5:
			id := snap(t)
			p = events.IntervalsCompleted{Snapshot: id, Table: id, Ranges: ranges(t), RunKind: rapid.SampledFrom([]events.RunKind{events.RunBackfill, events.RunScheduled, events.RunCatchUp}).Draw(t, "run")}
		case 6:
			id := snap(t)
			p = events.IntervalsInvalidated{Snapshot: id, Table: id, Ranges: ranges(t)}
		case 7:
			id := snap(t)
			m, _, _ := events.ParseSnapshotID(id)
			p = events.SchedulerAdvanced{Env: "prod", Model: m, Snapshot: id, Tick: at, Frontier: at, Ranges: ranges(t), Generation: 1}
		case 8:
			id := snap(t)
			m, _, _ := events.ParseSnapshotID(id)
			outcome := rapid.SampledFrom([]events.Outcome{events.Accepted, events.Rejected}).Draw(t, "outcome")
			p = events.PromotionDecided{Plan: rapid.SampledFrom(plans).Draw(t, "plan"), Env: "prod", Outcome: outcome, Codes: []string{"trailing_gap_accepted"},
				Models: map[string]events.ModelFinding{m: {Snapshot: id, Codes: []string{}, Missing: ranges(t)}}, Generation: uint64(rapid.IntRange(1, 4).Draw(t, "gen")), Findings: []events.Finding{}}
		case 9:
			plan := rapid.SampledFrom(plans).Draw(t, "plan")
			if rapid.Bool().Draw(t, "catch-up") {
				p = events.CatchUpRequested{Plan: plan, Env: "prod", Work: []events.CatchUpWork{}, Findings: []events.Finding{}}
			} else {
				p = events.RepairCompleted{Env: "prod", Plan: plan, Model: rapid.SampledFrom(models).Draw(t, "model"), OpenSeq: uint64(rapid.IntRange(1, n).Draw(t, "open")), ClosedAt: at}
			}
		default:
			switch rapid.IntRange(0, 4).Draw(t, "other") {
			case 4:
				id, demoted := snap(t), snap(t)
				m, _, _ := events.ParseSnapshotID(id)
				from := uint64(rapid.IntRange(1, 4).Draw(t, "from"))
				rb := events.EnvironmentRolledBack{Env: "prod", FromGeneration: from, ToGeneration: from - 1, Generation: from + 1,
					Models: []events.RolledBackModel{{Model: m, Restored: id, Table: id, Demoted: demoted}}, EvaluatedAtSeq: uint64(i), EvaluatedAt: at}
				if rapid.Bool().Draw(t, "rollback-repairs") {
					rb.Repairs = []events.RolledBackRepair{{Plan: rapid.SampledFrom(plans).Draw(t, "plan"), Model: m, Snapshot: demoted, OpenSeq: uint64(rapid.IntRange(1, n).Draw(t, "open"))}}
				}
				p = rb
			case 0:
				p = events.RunFailed{Snapshot: snap(t), Ranges: ranges(t), RunKind: events.RunScheduled, ExitStatus: 1, Error: "exit status 1", Attempt: 1, Final: rapid.Bool().Draw(t, "final")}
			case 3:
				id := snap(t)
				o := events.AuditOutcome{Audit: rapid.SampledFrom([]string{"ids", "rows"}).Draw(t, "audit"), Passed: rapid.Bool().Draw(t, "passed"),
					Count: int64(rapid.IntRange(0, 9).Draw(t, "count"))}
				if !o.Passed {
					o.Columns, o.Sample = []string{"id"}, [][]string{{""}}
				}
				p = events.AuditRecorded{Snapshot: id, Table: id, Ranges: ranges(t), Blocking: rapid.Bool().Draw(t, "blocking"), AuditOutcome: o}
			case 1:
				p = events.EnvironmentFinalized{Env: "prod", Plan: rapid.SampledFrom(plans).Draw(t, "plan"), Generation: 1}
			default:
				id := snap(t)
				p = events.TableRetired{Table: id, Snapshots: []string{id}, Reason: "unused", JudgedAt: at, ReleasedAt: at, Coverage: ranges(t)}
			}
		}
		ev := events.New(ids, at, p)
		ev.Causation = fmt.Sprintf("cmd-%d", i)
		evs = append(evs, ev)
	}
	return evs
}

func stateJSON(t *rapid.T, st *State) string {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Folding is deterministic and resumable: folding one event at a time
// (through the wire codec) equals folding from scratch, and folding a
// prefix, checkpointing it (JSON + Restore) and folding the rest equals
// folding the whole.
func TestFoldIsResumable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := genEvents(t)
		whole := New()
		for i, ev := range evs {
			_ = Apply(whole, uint64(i+1), ev)
		}
		incremental := New()
		for i, ev := range evs {
			b, err := events.Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			back, err := events.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			_ = Apply(incremental, uint64(i+1), back)
			_ = Apply(incremental, uint64(i+1), back) // a redelivery changes nothing
		}
		if a, b := stateJSON(t, whole), stateJSON(t, incremental); a != b {
			t.Fatalf("incremental fold differs:\n%s\n%s", a, b)
		}
		cut := rapid.IntRange(0, len(evs)).Draw(t, "cut")
		prefix := New()
		for i, ev := range evs[:cut] {
			_ = Apply(prefix, uint64(i+1), ev)
		}
		resumed := New()
		if err := json.Unmarshal([]byte(stateJSON(t, prefix)), resumed); err != nil {
			t.Fatal(err)
		}
		if err := Restore(resumed); err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs[cut:] {
			_ = Apply(resumed, uint64(cut+i+1), ev)
		}
		if a, b := stateJSON(t, whole), stateJSON(t, resumed); a != b {
			t.Fatalf("prefix at %d + rest differs from the whole:\n%s\n%s", cut, a, b)
		}
	})
}
