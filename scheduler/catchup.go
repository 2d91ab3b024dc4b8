package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work"
)

// CatchUps drives bounded catch-up outside scenarios: for every plan whose
// catch-up request waits for its strict retry, it has the Runner (when set)
// compute the outstanding work, and once nothing is outstanding it records
// the retry's decision with a promote command. The retry's command id is
// derived from the request, so several drivers (replicas) record it once.
type CatchUps struct {
	// Handler records the retries (the engine, or a cluster member).
	Handler commands.Handler
	// Proj is the live state the open requests are read from; the loop
	// wakes at each of its changes.
	Proj Projection
	// Clock is the time the Runner computes at. Default time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Runner, when set, computes the outstanding catch-up work itself
	// (work/inproc). Leave it nil when a work.Publisher runs (serve): the publisher derives
	// the request's work from the stream and its workers, or its
	// in-process sink, complete it (run kind catch_up); the driver then
	// only records the retry.
	Runner work.Runner
	// Recheck bounds how long the loop waits for a change before looking
	// again. Default 5s.
	Recheck time.Duration
}

// RetryID is the command id of the strict retry answering the catch-up
// request stored at seq for plan, in the engine's reserved namespace:
// "$catch-up-retry:<plan>:<seq>".
func RetryID(plan string, seq uint64) string {
	return commands.InternalID("catch-up-retry", fmt.Sprintf("%s:%d", plan, seq))
}

// Run loops until ctx ends.
func (c *CatchUps) Run(ctx context.Context) error {
	if c.Recheck == 0 {
		c.Recheck = 5 * time.Second
	}
	log := logger(c.Logger).With("subsystem", "catch-up")
	for {
		changed, _ := c.Proj.Watch()
		if err := c.Step(ctx); err != nil && ctx.Err() == nil {
			log.Warn("catch-up", "err", err)
		}
		timer := time.NewTimer(c.Recheck)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Step does one pass over the open catch-up requests.
func (c *CatchUps) Step(ctx context.Context) error {
	type open struct {
		req  events.CatchUpRequested
		seq  uint64
		left []events.CatchUpWork
	}
	var todo []open
	c.Proj.Read(func(st *projections.State) {
		for _, pl := range st.Plans {
			if pl.CatchUpOpen() {
				todo = append(todo, open{*pl.CatchUp, pl.CatchUpSeq, decide.Outstanding(st, *pl.CatchUp)})
			}
		}
	})
	sort.Slice(todo, func(i, j int) bool { return todo[i].seq < todo[j].seq })
	for _, o := range todo {
		if len(o.left) > 0 {
			if c.Runner == nil {
				continue
			}
			req := o.req
			req.Work = o.left
			if err := c.Runner.Run(ctx, work.CatchUp(req), now(c.Clock)); err != nil {
				return err
			}
		}
		r := c.Handler.Handle(ctx, &commands.Promote{Meta: commands.Meta{ID: RetryID(o.req.Plan, o.seq), Actor: "catch-up", Correlation: o.req.Plan}, Plan: o.req.Plan})
		if err := r.Err(); err != nil {
			return fmt.Errorf("catch-up retry of %s: %w", o.req.Plan, err)
		}
		if d := r.Decision; d != nil {
			logger(c.Logger).Info("catch-up retried", "plan", d.Plan, "outcome", d.Outcome, "codes", d.Codes)
		}
	}
	return nil
}
