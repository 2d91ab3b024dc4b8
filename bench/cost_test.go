package bench

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// The cost attacks of issue 15 item 8 end to end, without a server: what
// the engine does under its mutex for one command (decide, encode the
// events, fold them). Goals: a completion of 10,000 ranges, and the next completion
// after 10,000 fragments, each well under 10 ms; a promotion check over a
// 50-year five-minute gap under 50 ms.

func costSnapshot(st *projections.State, id, cron string) *projections.Snapshot {
	sched := interval.MustSchedule(cron, "", false)
	m, v, _ := events.ParseSnapshotID(id)
	sn := &projections.Snapshot{Schedule: sched, SnapshotRegistered: events.SnapshotRegistered{Snapshot: id, Model: m, Version: v,
		Cron: sched.Cron(), Unit: sched.Unit(), Start: t0, Kind: events.Incremental, Table: id}}
	st.Snapshots[id] = sn
	return sn
}

// hourFragments is n one-hour ranges [2i+offset h, 2i+offset+1 h), in
// reverse order (a client may send them in any).
func hourFragments(n, offset int) []interval.Range {
	rs := make([]interval.Range, n)
	for i := range rs {
		a := t0.Add(time.Duration(2*(n-1-i)+offset) * time.Hour)
		rs[i] = interval.R(a, a.Add(time.Hour))
	}
	return rs
}

// BenchmarkCostCompletion validates, decides, encodes and folds one
// CompleteIntervals.
func BenchmarkCostCompletion(b *testing.B) {
	at := t0.AddDate(5, 0, 0)
	for _, c := range []struct {
		name   string
		base   interval.Set
		ranges []interval.Range
	}{
		{"10k-ranges-into-empty", nil, hourFragments(10_000, 1)},
		{"10k-ranges-into-10k-fragments", interval.NewSet(hourFragments(10_000, 0)...), hourFragments(10_000, 1)},
		{"next-after-10k-fragments", interval.NewSet(hourFragments(10_000, 0)...), hourFragments(1, 2*5_000+1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := projections.New()
			sn := costSnapshot(st, "events@v1", "@hourly")
			ids := events.NewIDSource()
			n := 0
			for b.Loop() {
				st.Coverage[sn.Table] = c.base
				n++
				cmd := &commands.CompleteIntervals{Meta: commands.Meta{ID: "c" + time.Duration(n).String(), At: at},
					Model: sn.Model, Version: sn.Version, Ranges: c.ranges}
				if err := cmd.Validate(); err != nil {
					b.Fatal(err)
				}
				d, err := decide.Decide(st, cmd)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range d.Events {
					ev := events.New(ids, at, p)
					if _, err := events.Encode(ev); err != nil { // what is appended
						b.Fatal(err)
					}
					if err := projections.Apply(st, st.Seq+1, ev); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCostPromotionCheck50y evaluates a plan whose candidate misses a
// 50-year trailing gap of a five-minute model.
func BenchmarkCostPromotionCheck50y(b *testing.B) {
	st := projections.New()
	inc := costSnapshot(st, "events@v1", "*/5 * * * *")
	cand := costSnapshot(st, "events@v2", "*/5 * * * *")
	captured := t0.AddDate(0, 0, 1)
	st.Coverage[inc.Table] = interval.NewSet(interval.R(t0, captured.AddDate(50, 0, 0)))
	st.Coverage[cand.Table] = interval.NewSet(interval.R(t0, captured))
	st.Envs["prod"] = &projections.Env{Name: "prod", Generation: 1, Incumbents: map[string]string{"events": inc.Snapshot}}
	plan := events.PlanBuilt{Plan: "p", Env: "prod", Generation: 1,
		Policy: events.Policy{Version: policy.Version, MaxTrailingGapAdvances: 1},
		Candidates: []events.Candidate{{Model: "events", Snapshot: cand.Snapshot, Table: cand.Table, Upstream: []string{},
			Incumbent: inc.Snapshot, IncumbentFrontier: captured, IncumbentCron: inc.Cron, IncumbentUnit: inc.Unit}}}
	for b.Loop() {
		d := policy.Evaluate(st, plan)
		if f := d.Models["events"]; f.Advances != 50*365*288+12*288 {
			b.Fatalf("advances %d, codes %v", f.Advances, d.Codes)
		}
	}
}
