package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// JanitorID is the command id of the janitor's retirement judged on the
// view at seq, in the engine's reserved namespace: "$janitor:<seq>".
// Replicas sweeping the same view send the same command.
func JanitorID(seq uint64) string {
	return commands.InternalID("janitor", strconv.FormatUint(seq, 10))
}

// maxSweepAttempts bounds how often one sweep judges again after its
// command was refused because the state moved under it.
const maxSweepAttempts = 3

// Sweep retires every table retirable now (decide.Retirable at the live
// view, Clock, Grace and Retain) with one retire_tables command, and
// returns what it appended (nothing when no table is retirable). A
// command refused because the state changed since the view (a plan used
// a table again) is judged again on a fresh view.
func (j *Janitor) Sweep(ctx context.Context) ([]events.TableRetired, error) {
	grace, retain := j.Grace, j.retain()
	for attempt := 1; ; attempt++ {
		at := now(j.Clock)
		var due []events.TableRetired
		var seq uint64
		j.Proj.Read(func(st *projections.State) { due, seq = decide.Retirable(st, at, grace, retain), st.Seq })
		if len(due) == 0 {
			return nil, nil
		}
		if len(due) > commands.MaxRetireTables {
			due = due[:commands.MaxRetireTables]
		}
		cmd := &commands.RetireTables{Meta: commands.Meta{ID: JanitorID(seq), Actor: "janitor", At: at}, GraceMS: grace.Milliseconds(), RetainMS: retain.Milliseconds()}
		for _, ev := range due {
			cmd.Tables = append(cmd.Tables, ev.Table)
		}
		r := j.Handler.Handle(ctx, cmd)
		switch {
		case r.Code == commands.CodeIdempotencyConflict:
			// Another replica judged this view (at another clock).
			return nil, nil
		case r.Code == commands.CodeConflict && attempt < maxSweepAttempts:
			continue
		case r.Err() != nil:
			return nil, fmt.Errorf("scheduler: janitor: %w", r.Err())
		case r.Duplicate:
			return nil, nil
		}
		return due, nil
	}
}

// Janitor retires unused snapshot tables on the wall clock: every Every it
// runs Sweep. It drops nothing itself: the warehouse drops a
// table once its TableRetired is in the stream (work/sqlrun.Janitor).
// It runs on the writer only.
type Janitor struct {
	// Handler records the retirements (the engine, or a cluster member).
	Handler commands.Handler
	// Proj is the live state the retirable tables are judged on.
	Proj Projection
	// Clock is the time they are judged at. Default time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Every is how often it sweeps; 0 or less: never (Run returns).
	Every time.Duration
	// Grace is the grace period (commands.MinRetireGrace at least).
	Grace time.Duration
	// Retain is the retention: a table an environment's incumbent used is
	// kept this long after its demotion, for rollbacks
	// (commands.MinRetireGrace at least; 0: commands.DefaultRetain).
	Retain time.Duration
}

// Run sweeps every j.Every until ctx ends.
func (j *Janitor) Run(ctx context.Context) error {
	if j.Every <= 0 {
		return nil
	}
	log := logger(j.Logger).With("subsystem", "janitor")
	ticker := time.NewTicker(j.Every)
	defer ticker.Stop()
	for {
		retired, err := j.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("janitor sweep failed", "err", err)
		case len(retired) > 0:
			tables := make([]string, len(retired))
			for i, ev := range retired {
				tables[i] = ev.Table
			}
			log.Info("janitor retired tables", "tables", tables, "grace", j.Grace, "retain", j.retain())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (j *Janitor) retain() time.Duration {
	if j.Retain <= 0 {
		return commands.DefaultRetain
	}
	return j.Retain
}
