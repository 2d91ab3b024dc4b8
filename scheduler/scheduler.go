// Package scheduler holds the loops that issue commands on their own: the
// Scheduler, which records the advances of every cron tick, CatchUps,
// which records the strict retry of every open catch-up request, and the
// Janitor, which retires the snapshot tables nothing uses any more.
// They run on the writer only. Each takes the parts it needs as fields,
// never the engine: Handler (the commands it issues), Proj (the live
// state it reads: a *live.Projection satisfies Projection), Clock and
// Logger. Importers: server (serve runs them), scenario, bench.
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

// Projection is the live projection as the loops read it (a
// *live.Projection: the engine's, Engine.Projection).
type Projection interface {
	// Read runs fn with the state under the projection's read lock; fn
	// must not keep or modify st.
	Read(fn func(st *projections.State))
	// Watch returns a channel closed at the projection's next change, and
	// its failure if it has failed.
	Watch() (<-chan struct{}, error)
}

// Each loop takes the parts it needs as fields: Handler carries out its
// commands (the engine, or a cluster member), Proj is the live state it
// reads, Clock its time (default time.Now; serve and scenario pass the
// engine's, Engine.Now) and Logger its logger (default slog.Default()).

// now is clock's time in UTC (time.Now when clock is nil).
func now(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now().UTC()
	}
	return clock().UTC()
}

// logger is l, or slog.Default() when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
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
// tries again. fenced counts the rejected advances. It needs Handler and
// Proj (and Logger) only: t is the tick's time, whatever Clock says.
func (s *Scheduler) Tick(ctx context.Context, env string, t time.Time, gen uint64) (advs []events.SchedulerAdvanced, fenced int, err error) {
	log := logger(s.Logger)
	for attempt := 0; ; attempt++ {
		if gen == 0 {
			s.Proj.Read(func(st *projections.State) { gen = st.Env(env).Generation })
			if gen == 0 {
				return nil, fenced, fmt.Errorf("scheduler: %w", commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", env))
			}
		}
		// The id is the tick's: replicas running the scheduler send the same
		// command for the same tick, and the stream records it once.
		r := s.Handler.Handle(ctx, &commands.AdvanceScheduler{Meta: commands.Meta{ID: TickID(env, t), Actor: "scheduler", At: t}, Env: env, Generation: gen})
		if r.Code == commands.CodeStaleGeneration && attempt < MaxFencedRetries {
			log.Info("scheduler fenced: stale generation, re-reading", "env", env, "generation", gen, "tick", t)
			fenced++
			gen = 0
			continue
		}
		if r.Code == commands.CodeIdempotencyConflict {
			// Another replica recorded this tick, at another generation.
			log.Debug("scheduler: tick already recorded by another replica", "env", env, "tick", t)
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
	// Handler records the advances (the engine, or a cluster member).
	Handler commands.Handler
	// Proj is the live state the incumbents and their crons are read from.
	Proj Projection
	// Clock is the time ticks are due by. Default time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
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
	log := logger(s.Logger).With("subsystem", "scheduler")
	last := now(s.Clock)
	for {
		var next time.Time
		var envs []string
		s.Proj.Read(func(st *projections.State) {
			next = NextTick(st, s.Envs, last)
			envs = envNames(st, s.Envs)
		})
		wait := s.Recheck
		if !next.IsZero() {
			if d := next.Sub(now(s.Clock)); d < wait {
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
		if next.IsZero() || now(s.Clock).Before(next) {
			continue
		}
		for _, env := range envs {
			advs, _, err := s.Tick(ctx, env, next, 0)
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
