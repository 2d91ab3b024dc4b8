// Package scheduler holds the loops that issue commands on their own: the
// Scheduler, which records the advances of every cron tick, CatchUps,
// which records the strict retry of every open catch-up request, and the
// Janitor, which retires the snapshot tables nothing uses any more.
// They run on the writer only. Importers: cmd/tidemark, scenario.
package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Engine is the engine as the loops see it: a command handler with a
// live projection, a clock and a logger.
type Engine interface {
	commands.Handler
	// View reads the live projection.
	View(fn func(st *projections.State))
	// Watch returns a channel closed at the projection's next change.
	Watch() (<-chan struct{}, error)
	Now() time.Time
	Logger() *slog.Logger
}

// TickID is the command id of the scheduler's advance of env at tick t,
// in the engine's reserved namespace: "$tick:<env>:<RFC 3339 time>".
func TickID(env string, t time.Time) string {
	return commands.InternalID("tick", env+":"+t.UTC().Format(time.RFC3339))
}

// MaxFencedRetries bounds how often one tick re-reads the generation after
// being fenced.
const MaxFencedRetries = 3

// Tick runs one scheduler tick for env at t, for a scheduler whose view
// was read at generation gen (0: read it now), and returns the advances it
// recorded (none when nothing was due). An advance fenced off as stale_generation appends
// nothing; the scheduler re-reads the generation and the incumbents and
// tries again. fenced counts the rejected advances.
func Tick(ctx context.Context, e Engine, env string, t time.Time, gen uint64) (advs []events.SchedulerAdvanced, fenced int, err error) {
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
			e.Logger().Info("scheduler fenced: stale generation, re-reading", "env", env, "generation", gen, "tick", t)
			fenced++
			gen = 0
			continue
		}
		if r.Code == commands.CodeIdempotencyConflict {
			// Another replica recorded this tick, at another generation.
			e.Logger().Debug("scheduler: tick already recorded by another replica", "env", env, "tick", t)
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
// the advances make due is derived from the stream (work.Of) by a
// work.Publisher, which publishes it to workers or runs it in-process.
type Scheduler struct {
	Engine Engine
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
	log := s.Engine.Logger().With("subsystem", "scheduler")
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
			advs, _, err := Tick(ctx, s.Engine, env, next, 0)
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
