package decide

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"pgregory.net/rapid"
)

// rapidTB lets the world harness report through a *rapid.T (testing.TB
// cannot be implemented outside package testing, so the outer *testing.T
// is embedded and the reporting methods are redirected).
type rapidTB struct {
	testing.TB
	rt *rapid.T
}

func (r rapidTB) Helper()                        {}
func (r rapidTB) Fatalf(format string, a ...any) { r.rt.Fatalf(format, a...) }
func (r rapidTB) Fatal(a ...any)                 { r.rt.Fatal(a...) }
func (r rapidTB) Errorf(format string, a ...any) { r.rt.Errorf(format, a...) }
func (r rapidTB) Logf(format string, a ...any)   { r.rt.Logf(format, a...) }
func (r rapidTB) Skipf(format string, a ...any)  { r.rt.Skipf(format, a...) }
func (r rapidTB) Error(a ...any)                 { r.rt.Error(a...) }
func (r rapidTB) Log(a ...any)                   { r.rt.Log(a...) }
func (r rapidTB) FailNow()                       { r.rt.FailNow() }
func (r rapidTB) Failed() bool                   { return r.rt.Failed() }
func (r rapidTB) Fail()                          { r.rt.Fail() }
func (r rapidTB) Skip(a ...any)                  { r.rt.Skip(a...) }
func (r rapidTB) SkipNow()                       { r.rt.SkipNow() }
func (r rapidTB) Name() string                   { return r.TB.Name() }
func (r rapidTB) Cleanup(f func())               { r.rt.Cleanup(f) }
func (r rapidTB) Setenv(key, value string)       { r.TB.Setenv(key, value) }
func (r rapidTB) TempDir() string                { return r.TB.TempDir() }
func (r rapidTB) Skipped() bool                  { return false }
func (r rapidTB) String() string                 { return fmt.Sprint(r.rt) }

// applied is a command whose decision appended events, with its reply.
type applied struct {
	cmd   commands.Command
	reply commands.Reply
}

// decideTwice decides cmd, checks the decision (Expect names only the
// subjects its events write), folds it, and decides cmd again: the
// command is now a duplicate that appends nothing and answers what it
// answered the first time.
func decideTwice(t *rapid.T, w *world, cmd commands.Command) (Decision, error) {
	if err := cmd.Validate(); err != nil {
		return Decision{}, err
	}
	dec, err := Decide(w.st, cmd)
	if err != nil {
		var ce *commands.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: error %T %v is not a *commands.Error", cmd.Kind(), err, err)
		}
		if len(dec.Events) > 0 {
			t.Fatalf("%s: an error with events", cmd.Kind())
		}
		return dec, err
	}
	checkDecision(w.tb, w.st, cmd, dec)
	w.fold(cmd, cmd.Header().At, dec.Events)
	again, err := Decide(w.st, cmd)
	if err != nil {
		t.Fatalf("%s decided again: %v", cmd.Kind(), err)
	}
	if len(again.Events) > 0 {
		t.Fatalf("%s decided again appends %d events", cmd.Kind(), len(again.Events))
	}
	if len(dec.Events) > 0 {
		checkDuplicate(t, cmd, dec.Reply, again.Reply)
	}
	return dec, nil
}

func checkDuplicate(t *rapid.T, cmd commands.Command, first, dup commands.Reply) {
	if !dup.Duplicate {
		t.Fatalf("%s %s: not a duplicate after its events were folded: %+v", cmd.Kind(), cmd.Header().ID, dup)
	}
	if first.Decision != nil && !reflect.DeepEqual(first.Decision, dup.Decision) {
		t.Fatalf("%s %s: duplicate decision %+v, first %+v", cmd.Kind(), cmd.Header().ID, dup.Decision, first.Decision)
	}
	if first.CatchUp != nil && !reflect.DeepEqual(first.CatchUp, dup.CatchUp) {
		t.Fatalf("%s %s: duplicate catch-up %+v, first %+v", cmd.Kind(), cmd.Header().ID, dup.CatchUp, first.CatchUp)
	}
	if first.Plan != nil && !reflect.DeepEqual(first.Plan, dup.Plan) {
		t.Fatalf("%s %s: duplicate plan differs", cmd.Kind(), cmd.Header().ID)
	}
}

// For random small histories, every command whose events are folded is a
// duplicate from then on (decided again it appends nothing and answers the
// same), and Decision.Expect names only subjects its events write (checked
// by checkDecision, with the codes rules of every recorded decision).
func TestFoldedCommandIsDuplicate(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(rapidTB{TB: t, rt: rt})
		w.hourly("events", "v1")
		w.hourly("sessions", "v1", "events")
		w.register(commands.RegisterSnapshot{Model: "users", Version: "v1", Cron: "@daily", IntervalUnit: interval.Hour, DependsOn: []string{"events"}})
		w.deploy("prod", "deploy", map[string]string{"events": "v1", "sessions": "v1", "users": "v1"}, h(6))
		now := h(6)
		var done []applied
		plans := []string{}
		do := func(cmd commands.Command) (Decision, error) {
			m := cmd.Header()
			m.ID, m.At = w.nextID(), now
			dec, err := decideTwice(rt, w, cmd)
			if err == nil && len(dec.Events) > 0 {
				done = append(done, applied{cmd, dec.Reply})
			}
			return dec, err
		}
		snapshots := func() []string {
			var ids []string
			for id := range w.st.Snapshots {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			return ids
		}
		hours := func(label string) []interval.Range {
			last := int(now.Sub(t0) / time.Hour)
			a := rapid.IntRange(0, last-1).Draw(rt, label+"-a")
			b := rapid.IntRange(a+1, min(last, a+4)).Draw(rt, label+"-b")
			return []interval.Range{hrs(a, b)}
		}
		versionN := 2
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 13).Draw(rt, "action") {
			case 0, 1: // a tick, the worker runs it
				now = now.Truncate(time.Hour).Add(time.Hour)
				dec, err := do(&commands.AdvanceScheduler{Env: "prod", Generation: w.st.Env("prod").Generation})
				if err == nil {
					for _, a := range dec.Reply.Advances {
						m, v, _ := events.ParseSnapshotID(a.Snapshot)
						do(&commands.CompleteIntervals{Model: m, Version: v, Ranges: a.Ranges, RunKind: events.RunScheduled})
					}
				}
			case 2: // a tick, the worker paused
				now = now.Truncate(time.Hour).Add(time.Hour)
				do(&commands.AdvanceScheduler{Env: "prod", Generation: w.st.Env("prod").Generation})
			case 3: // a stale scheduler
				do(&commands.AdvanceScheduler{Env: "prod", Generation: max(1, w.st.Env("prod").Generation-1)})
			case 4: // time passes within the hour
				now = now.Add(time.Duration(rapid.IntRange(1, 50).Draw(rt, "minutes")) * time.Minute)
			case 5: // a manual completion
				m, v, _ := events.ParseSnapshotID(rapid.SampledFrom(snapshots()).Draw(rt, "snapshot"))
				do(&commands.CompleteIntervals{Model: m, Version: v, Ranges: hours("complete"), RunKind: events.RunManual})
			case 6: // an invalidation
				m, v, _ := events.ParseSnapshotID(rapid.SampledFrom(snapshots()).Draw(rt, "snapshot"))
				do(&commands.InvalidateIntervals{Model: m, Version: v, Ranges: hours("invalidate"), Reason: "prop"})
			case 7: // a new version
				kind := rapid.SampledFrom([]events.Kind{events.Incremental, events.ForwardOnly}).Draw(rt, "kind")
				model := rapid.SampledFrom([]string{"events", "sessions"}).Draw(rt, "model")
				r := commands.RegisterSnapshot{Model: model, Version: fmt.Sprintf("v%d", versionN), Cron: "@hourly", SnapshotKind: kind, Start: t0}
				if model == "sessions" {
					r.DependsOn = []string{"events"}
				}
				versionN++
				do(&r)
			case 8: // a plan
				versions := map[string]string{}
				for _, id := range snapshots() {
					m, v, _ := events.ParseSnapshotID(id)
					if rapid.IntRange(0, 3).Draw(rt, "pick") == 0 {
						versions[m] = v
					}
				}
				id := fmt.Sprintf("p%d", len(plans)+1)
				_, err := do(&commands.BuildPlan{Plan: id, Env: "prod", Versions: versions,
					Bounds: commands.Bounds{MaxTrailingGapAdvances: rapid.IntRange(0, 2).Draw(rt, "trailing"), MaxCatchUpAdvances: rapid.IntRange(0, 2).Draw(rt, "catch-up")}})
				if err == nil {
					plans = append(plans, id)
				}
			case 9: // a plan's backfill
				if len(plans) == 0 {
					continue
				}
				for _, c := range w.st.Plans[rapid.SampledFrom(plans).Draw(rt, "plan")].Built.Candidates {
					if rs := interval.NewSet(c.Backfill...); !rs.Empty() {
						m, v, _ := events.ParseSnapshotID(c.Snapshot)
						do(&commands.CompleteIntervals{Model: m, Version: v, Ranges: rs, RunKind: events.RunBackfill})
					}
				}
			case 10, 11: // a promotion, and its catch-up work when requested
				if len(plans) == 0 {
					continue
				}
				plan := rapid.SampledFrom(plans).Draw(rt, "plan")
				dec, err := do(&commands.Promote{Plan: plan})
				if err == nil && dec.Reply.CatchUp != nil && rapid.Bool().Draw(rt, "run catch-up") {
					for _, wk := range Outstanding(w.st, *dec.Reply.CatchUp) {
						if wk.Ranges[len(wk.Ranges)-1].End.After(now) {
							continue
						}
						m, v, _ := events.ParseSnapshotID(wk.Snapshot)
						do(&commands.CompleteIntervals{Model: m, Version: v, Ranges: wk.Ranges, RunKind: events.RunCatchUp})
					}
				}
			case 13: // a failed run
				m, v, _ := events.ParseSnapshotID(rapid.SampledFrom(snapshots()).Draw(rt, "snapshot"))
				do(&commands.FailRun{Model: m, Version: v, Ranges: hours("fail"), RunKind: events.RunScheduled, Error: "exit status 1",
					ExitStatus: 1, Attempt: 1, Final: rapid.Bool().Draw(rt, "final")})
			case 12: // finalize
				if len(plans) == 0 {
					continue
				}
				do(&commands.Finalize{Plan: rapid.SampledFrom(plans).Draw(rt, "plan")})
			}
		}
		// Every command applied is still a duplicate, answering what it
		// answered then (a promotion: the decision recorded for it).
		for _, a := range done {
			dup, err := Decide(w.st, a.cmd)
			if err != nil || len(dup.Events) > 0 {
				rt.Fatalf("%s %s at the end: %v, %d events", a.cmd.Kind(), a.cmd.Header().ID, err, len(dup.Events))
			}
			checkDuplicate(rt, a.cmd, commands.Reply{Decision: a.reply.Decision}, dup.Reply)
		}
	})
}
