package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Worker is the built-in worker: it "computes" work by recording it
// complete. Scenarios and the demo use it; real deployments run `tidemark
// worker` processes that execute model commands.
type Worker struct {
	Handler commands.Handler
	Actor   string
}

// Complete records ranges of a snapshot as computed.
func (w *Worker) Complete(ctx context.Context, snapshot string, ranges []interval.Range, kind events.RunKind, runID string, at time.Time) error {
	return w.complete(ctx, "", "", snapshot, ranges, kind, runID, at)
}

// complete records ranges as computed under command id id (a new one when
// empty), as part of work item work (none when empty).
func (w *Worker) complete(ctx context.Context, id, work, snapshot string, ranges []interval.Range, kind events.RunKind, runID string, at time.Time) error {
	if len(ranges) == 0 {
		return nil
	}
	if id == "" {
		id = commands.InternalID("work", commands.NewID())
	}
	model, version, _ := events.ParseSnapshotID(snapshot)
	r := w.Handler.Handle(ctx, &commands.CompleteIntervals{
		Meta:  commands.Meta{ID: id, Actor: w.Actor, At: at, Correlation: runID},
		Model: model, Version: version, Ranges: ranges, RunKind: kind, RunID: runID, Work: work,
	})
	if err := r.Err(); err != nil {
		return fmt.Errorf("worker: complete %s %v: %w", snapshot, interval.Set(ranges), err)
	}
	return nil
}

// Run computes a work item's steps, in order, with the item's run kind.
// When the item has an id (WorkOf gives one), each step's completion names
// the item (the engine checks it against the item) and its command id
// derives from it ("$work:<item id>/<step>", in the engine's reserved
// namespace: no client can claim it), so running the item again records
// nothing twice. The Worker is in-process: its Handler is the engine,
// which alone accepts reserved ids.
func (w *Worker) Run(ctx context.Context, item WorkItem, at time.Time) error {
	for i, st := range item.Steps {
		id := ""
		if item.ID != "" {
			id = commands.InternalID("work", fmt.Sprintf("%s/%d", item.ID, i))
		}
		if err := w.complete(ctx, id, item.ID, st.Snapshot, st.Ranges, item.RunKind, st.RunID, at); err != nil {
			return err
		}
	}
	return nil
}

// RunAdvances completes the work of one tick's scheduler advances, in
// their order (dependency order); open repair debt is computed first.
func (w *Worker) RunAdvances(ctx context.Context, advs []events.SchedulerAdvanced, at time.Time) error {
	return w.Run(ctx, ScheduledWork(advs), at)
}

// CatchUp computes a catch-up request's work, in its order (dependency
// order): each candidate's suffix, and the downstream intervals the request
// invalidated, after the upstream suffix they read.
func (w *Worker) CatchUp(ctx context.Context, req events.CatchUpRequested, at time.Time) error {
	return w.Run(ctx, CatchUpWorkItem(req), at)
}

// Backfill completes a plan's backfill set (fixed at build), in dependency
// order.
func (w *Worker) Backfill(ctx context.Context, plan events.PlanBuilt, at time.Time) error {
	return w.Run(ctx, BackfillWork(plan), at)
}

// Tick runs one scheduler tick for env at t, with the env generation it
// reads now, and returns the advances it recorded (none when nothing was
// due).
func (e *Engine) Tick(ctx context.Context, env string, t time.Time) ([]events.SchedulerAdvanced, error) {
	advs, _, err := e.TickFrom(ctx, env, t, 0)
	return advs, err
}

// TickID is the command id of the scheduler's advance of env at tick t,
// in the engine's reserved namespace: "$tick:<env>:<RFC 3339 time>".
func TickID(env string, t time.Time) string {
	return commands.InternalID("tick", env+":"+t.UTC().Format(time.RFC3339))
}

// MaxFencedRetries bounds how often one tick re-reads the generation after
// being fenced.
const MaxFencedRetries = 3

// TickFrom is Tick for a scheduler whose view was read at generation gen
// (0: read it now). An advance fenced off as stale_generation appends
// nothing; the scheduler re-reads the generation and the incumbents and
// tries again. fenced counts the rejected advances.
func (e *Engine) TickFrom(ctx context.Context, env string, t time.Time, gen uint64) (advs []events.SchedulerAdvanced, fenced int, err error) {
	for attempt := 0; ; attempt++ {
		if gen == 0 {
			e.View(func(st *projections.State) { gen = st.Env(env).Generation })
			if gen == 0 {
				return nil, fenced, fmt.Errorf("scheduler: %w", commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", env))
			}
		}
		// The id is the tick's: replicas running the scheduler send the same
		// command for the same tick, and the stream records it once.
		r := e.Handle(ctx, &commands.AdvanceScheduler{Meta: commands.Meta{ID: TickID(env, t), Actor: "scheduler", At: t}, Env: env, Generation: gen})
		if r.Code == commands.CodeStaleGeneration && attempt < MaxFencedRetries {
			e.log.Info("scheduler fenced: stale generation, re-reading", "env", env, "generation", gen, "tick", t)
			fenced++
			gen = 0
			continue
		}
		if r.Code == commands.CodeIdempotencyConflict {
			// Another replica recorded this tick, at another generation.
			e.log.Debug("scheduler: tick already recorded by another replica", "env", env, "tick", t)
			return nil, fenced, nil
		}
		if err := r.Err(); err != nil {
			return nil, fenced, fmt.Errorf("scheduler: %s at %s: %w", env, t.Format(time.RFC3339), err)
		}
		return r.Advances, fenced, nil
	}
}

// NextTick returns the first cron tick after t of any incumbent in any of
// envs (all envs when envs is empty), or the zero time if there is none.
func NextTick(st *projections.State, envs []string, t time.Time) time.Time {
	var next time.Time
	for _, name := range envNames(st, envs) {
		for _, id := range st.Env(name).Incumbents {
			sn, ok := st.Snapshots[id]
			if !ok {
				continue
			}
			if n := sn.Schedule.Next(t); !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
		}
	}
	return next
}

// Scheduler fires the scheduler on the wall clock: at every cron tick of an
// env's incumbents it records the advances. It computes nothing: the work
// the advances make due is derived from the stream (WorkOf) by a
// WorkPublisher, which publishes it to workers or runs it in-process.
type Scheduler struct {
	Engine *Engine
	// Envs limits the scheduler to these environments (all when empty).
	Envs []string
	// Recheck bounds how long the loop sleeps before looking for new
	// incumbents again. Default 30s.
	Recheck time.Duration
}

// Run loops until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.Recheck == 0 {
		s.Recheck = 30 * time.Second
	}
	log := s.Engine.log.With("subsystem", "scheduler")
	last := s.Engine.Now()
	for {
		var next time.Time
		var envs []string
		s.Engine.View(func(st *projections.State) {
			next = NextTick(st, s.Envs, last)
			envs = envNames(st, s.Envs)
		})
		wait := s.Recheck
		if !next.IsZero() {
			if d := next.Sub(s.Engine.Now()); d < wait {
				wait = d
			}
		}
		if wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		}
		now := s.Engine.Now()
		if next.IsZero() || now.Before(next) {
			continue
		}
		for _, env := range envs {
			advs, err := s.Engine.Tick(ctx, env, next)
			if err != nil {
				log.Warn("tick failed", "env", env, "err", err)
				continue
			}
			if len(advs) > 0 {
				log.Info("scheduler advanced", "env", env, "tick", next, "models", len(advs))
			}
		}
		last = next
	}
}

// envNames returns envs sorted, or every environment in st when envs is
// empty.
func envNames(st *projections.State, envs []string) []string {
	out := append([]string(nil), envs...)
	if len(out) == 0 {
		for name := range st.Envs {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
