package decide

import (
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Due computes what a scheduler tick at t makes due for env. Per incumbent,
// in dependency order:
//   - every missing ready interval, whichever model's tick t is (work a
//     paused worker skipped is picked up at the next tick of any model);
//   - when t is itself one of the model's cron ticks (the tick fires now),
//     not recorded for the model yet, and makes new intervals ready, its
//     Lookback whole intervals before the first newly ready one, clipped
//     to the model's start (SQLMesh's lookback: late data is re-read).
//     Lookback is never an advance of its own, and belongs only to a tick
//     that fires: at another model's tick, or an advance at a time that is
//     no tick of the model, a tick of the model at or before the previous
//     firing (the deploy's instant, say) adds none.
//
// Work is whole intervals of the unit; the part that is open repair debt is
// listed in Repairs, computed first. Candidates are never scheduled, only
// incumbents.
//
// A whole kind (full, view, seed; docs/kinds.md) has no lookback: when
// anything of its window is missing, its work is the whole object, from
// its start to the readiness frontier (projections.State.WorkOf), and is
// all repair work when it closes open debt (one computation closes it).
func Due(st *projections.State, env string, t time.Time) []events.SchedulerAdvanced {
	e := st.Env(env)
	var out []events.SchedulerAdvanced
	for _, model := range st.DependencyOrder(env) {
		sn, ok := st.Snapshots[e.Incumbents[model]]
		if !ok {
			continue
		}
		sched := sn.Schedule
		tick := sched.Prev(t)
		window := sched.Ready(sn.Start, t)
		if tick.IsZero() || window.Empty() {
			continue
		}
		work := st.Table(sn.Table).Missing(window)
		if last, ok := e.LastTick[model]; sn.Lookback > 0 && !sn.Kind.Whole() && tick.Equal(t) && (!ok || last.Before(tick)) {
			work = work.AddSet(lookback(sched, tick, window, sn.Lookback))
		}
		work = st.WorkOf(sn, work)
		if work.Empty() {
			continue
		}
		var repairs interval.Set
		for _, r := range st.OpenRepairs() {
			if r.Env == env && r.Table == sn.Table {
				for _, g := range r.Ranges {
					repairs = repairs.AddSet(work.Clip(g))
				}
			}
		}
		repairs = sched.Work(repairs)
		if !repairs.Empty() && (sn.Kind.Whole() || sched.Work(work.SubtractSet(repairs)).OverlapsSet(repairs)) {
			// The debt and the new work share an interval (a partial one),
			// or the object is computed whole: it is all one run.
			repairs = work
		}
		out = append(out, events.SchedulerAdvanced{
			Env: env, Model: model, Snapshot: sn.Snapshot, Tick: tick, Frontier: window.End,
			Ranges: work, Repairs: repairs, Generation: e.Generation,
		})
	}
	return out
}

// lookback is what lookback n adds to the work of tick: the n whole
// intervals before the first interval the tick newly makes ready (the one
// at the previous tick's readiness frontier), within window.
func lookback(sched interval.Schedule, tick time.Time, window interval.Range, n int) interval.Set {
	prev := sched.ReadyFrontier(tick.Add(-time.Nanosecond))
	if prev.IsZero() || !prev.Before(window.End) {
		return nil // no previous tick, or nothing newly ready
	}
	u := sched.Unit()
	first := u.Floor(prev)
	lb := interval.R(u.Add(first, -n), first).Intersect(window)
	if lb.Empty() {
		return nil
	}
	return interval.NewSet(lb)
}

// advance records the tick's due work, fenced by the env generation the
// scheduler read.
func advance(st *projections.State, c *commands.AdvanceScheduler) (Decision, error) {
	env, ok := st.Envs[c.Env]
	if !ok {
		return Decision{}, commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", c.Env)
	}
	if c.Generation != env.Generation {
		// Fencing: a scheduler that read an older generation would advance
		// snapshots a promotion demoted. It must re-read and schedule again.
		return Decision{}, commands.Errorf(commands.CodeStaleGeneration, "generation",
			"environment %s is at generation %d, the scheduler read generation %d: re-read the incumbents and schedule again", c.Env, env.Generation, c.Generation)
	}
	due := Due(st, c.Env, c.At)
	payloads := make([]events.Payload, len(due))
	for i, a := range due {
		payloads[i] = a
	}
	return Decision{Events: payloads, Expect: events.ExpectSubjects(st.SubjectSeq, events.EnvSubject(c.Env)), Reply: commands.Reply{Advances: due}}, nil
}
