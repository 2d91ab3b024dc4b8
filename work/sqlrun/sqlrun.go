// Package sqlrun runs SQL models in the warehouse: Runner computes a work
// item's SQL steps, batch by batch, recording each batch complete once it
// is committed (the built-in worker); StepSQL gives the publisher each step's
// SQL and Computer computes a published step from it alone (`tidemark
// worker --warehouse`); and Views keeps every environment's views on its
// incumbents' snapshot tables, so that a promotion is a view swap
// (SQLMesh's virtual update). Serve answers `tidemark query`, `verify`
// (VerifyEnv) and `diff` (DiffPlan: a plan's candidates against their
// incumbents) over NATS for the process that owns the warehouse.
//
// Invariants. A snapshot's rows are written only into its own table
// (TableName of its tidemark table), one statement and one transaction
// per batch of its batch_size intervals (warehouse.WriteInterval: delete
// the batch's range, insert the query's rows in it), so running an item
// again rewrites the same rows. A snapshot
// reads its upstream models from the snapshot tables it was planned
// against (projections.State.UpstreamOf), never from an environment's
// views. A batch is recorded complete only after it is committed, and as
// soon as it is. Views are a projection of the event stream: they are derived
// from the live state (each env's incumbents) and applied idempotently,
// all of an env's in one transaction, and again after a restart.
//
// Importers: server (serve's data plane), cmd/tidemark (worker
// --warehouse, query, verify, diff), scenario, bench.
package sqlrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
)

// TableName is the warehouse table (in schema warehouse.Schema) of a
// tidemark table id (a snapshot's Table, e.g. "events@v1"):
// models.TableName, which decide also computes to refuse a version whose
// table name another table id already has.
func TableName(tableID string) string { return models.TableName(tableID) }

// ModelOf is what the warehouse needs to compute snapshot id: its SQL,
// time column, table and upstream tables, and its kind when it is
// computed whole (a seed's content). ok is false for a snapshot with no
// SQL that is no seed (its work is recorded done, as before); err names
// an upstream model the snapshot was never planned against.
func ModelOf(st *projections.State, id string) (m warehouse.Model, ok bool, err error) {
	sn, found := st.Snapshots[id]
	if !found {
		return m, false, fmt.Errorf("sqlrun: unknown snapshot %s", id)
	}
	if sn.SQL == "" && sn.Kind != events.Seed {
		return m, false, nil
	}
	upstream, missing := st.UpstreamOf(id)
	if len(missing) > 0 {
		return m, false, fmt.Errorf("sqlrun: %s: no planned upstream snapshot for %v", id, missing)
	}
	m = warehouse.Model{Name: sn.Model, Table: TableName(sn.Table), SQL: sn.SQL, TimeColumn: sn.TimeColumn, Upstream: map[string]string{}, Snapshot: id,
		Macros: sn.Macros, Kind: WarehouseKind(sn.Kind), Seed: sn.Seed}
	for model, up := range upstream {
		usn, found := st.Snapshots[up]
		if !found {
			return m, false, fmt.Errorf("sqlrun: %s reads %s, which is not registered", id, up)
		}
		m.Upstream[model] = TableName(usn.Table)
	}
	return m, true, nil
}

// WarehouseKind is the warehouse's kind (warehouse.Model.Kind) of a
// snapshot's kind: the kind's name for one computed whole, else
// warehouse.KindInterval.
func WarehouseKind(k events.Kind) string {
	if k.Whole() {
		return string(k)
	}
	return warehouse.KindInterval
}

// Intervals splits ranges into the unit intervals they hold, in order; a
// range's last interval may be partial (a model that allows partials).
func Intervals(unit interval.Unit, ranges []interval.Range) []interval.Range {
	var out []interval.Range
	for _, r := range ranges {
		for s := r.Start; s.Before(r.End); {
			e := unit.Add(unit.Floor(s), 1)
			if e.After(r.End) {
				e = r.End
			}
			out = append(out, interval.R(s, e))
			s = e
		}
	}
	return out
}

// DefaultTimeout bounds one attempt at a batch unless Runner.Timeout
// says otherwise.
const DefaultTimeout = 10 * time.Minute

// Runner computes work items in the warehouse and records each batch
// complete as soon as it is committed, through Done (an *inproc.Worker in
// serve, whose RecordBatch carries the batch's rows).
type Runner struct {
	WH   *warehouse.Warehouse
	Proj *live.Projection
	Done work.Runner
	Log  *slog.Logger
	// Timeout bounds one attempt at a batch (Batching.Timeout): the batch
	// running when it ends is cancelled and fails ("timed out after …"),
	// its error wrapping work.ErrTimedOut, so the pool does not retry it
	// (running it again would take as long). A backfill of many batches
	// may take as long as it needs. Default DefaultTimeout.
	Timeout time.Duration
	// Clock, when set, dates each batch's record: its reading when the
	// batch committed (never before the item's at), so the item's
	// progress (projections.Work.Done.Last: the rate and ETA plan --wait
	// and the dashboard show) follows the batches as they are done. Nil:
	// every batch is recorded at the item's at (a simulated clock).
	Clock func() time.Time
}

// BatchRecorder records one committed batch of an item (its one step
// with its one range, Item.Batch naming it) with what computing it gave:
// the rows it wrote and its audits' outcomes; an *inproc.Worker is one.
// A Runner whose Done is not records the batch with Done.Run, without
// them.
type BatchRecorder interface {
	RecordBatch(ctx context.Context, batch work.Item, res work.Result, at time.Time) error
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// Run computes every SQL step of item, in order (dependency order: an
// upstream's rows are written before a downstream reads them), each in
// batches of its model's batch_size, and records each batch done as soon
// as it is committed (record), with the outcomes of the snapshot's audits
// over the batch, run once it is committed (Audit: a failed audit fails
// nothing here; the engine records it, and the promotion's check
// weighs it); steps of models without SQL are recorded
// at the end. The batches of a step that this item's completions have
// already recorded (a retry, or a restart running the item again) are
// not computed again. A step whose computation fails (a warehouse error;
// a batch's timeout) keeps the batches it committed; a later step that
// reads the table it writes is not computed; the other steps are, and Run
// returns the failures as a *work.ItemFailed (the publisher records and
// retries them; a timeout, which wraps work.ErrTimedOut, it records final
// at once). A step of a cancelled plan's backfill or catch-up is neither
// computed nor recorded.
func (r *Runner) Run(ctx context.Context, item work.Item, at time.Time) error {
	failed := &work.ItemFailed{}
	bad := map[string]bool{} // warehouse tables a failed or skipped step writes
	rest := item             // what is recorded at the end: the steps without SQL
	rest.Steps = slices.Clone(item.Steps)
	for i, st := range item.Steps {
		if len(st.Ranges) == 0 {
			continue
		}
		var m warehouse.Model
		var ok bool
		var err error
		var unit interval.Unit
		var batching Batching
		var gone bool
		var foreign, table string
		var cancelled bool
		var stale string
		var done interval.Set
		var audits []events.Audit
		r.Proj.Read(func(s *projections.State) {
			m, ok, err = ModelOf(s, st.Snapshot)
			if sn := s.Snapshots[st.Snapshot]; sn != nil {
				audits = slices.Clone(sn.Audits)
				unit = sn.Unit
				batching = Batching{Size: sn.BatchSize, Concurrency: sn.BatchConcurrency, Timeout: r.timeout()}
				_, gone = s.Retired[sn.Table]
				table = TableName(sn.Table)
			}
			if w := s.Work[item.ID]; w != nil && w.Done[st.Snapshot] != nil {
				done = w.Done[st.Snapshot].Ranges
			}
			foreign = decide.ForeignWork(s, item.RunKind, st.RunID, st.Snapshot)
			cancelled = decide.CancelledWork(s, item.RunKind, st.RunID) != ""
			stale = decide.StaleRestatement(s, item.ID)
		})
		if cancelled {
			// Its plan was cancelled: nothing of it is computed, and
			// nothing recorded (the engine would refuse it).
			if r.Log != nil {
				r.Log.Info("work of a cancelled plan not computed", "item", item.ID, "snapshot", st.Snapshot, "run_id", st.RunID)
			}
			rest.Steps[i].Ranges = nil
			continue
		}
		if err != nil {
			failed.Failed = append(failed.Failed, work.StepFailure{Step: i, Err: err})
			bad[table] = true
			rest.Steps[i].Ranges = nil
			continue
		}
		if stale != "" {
			// Restate work the environment has moved past: not written (its
			// tables may be production's under another snapshot), and the
			// engine would refuse the completion.
			if r.Log != nil {
				r.Log.Warn("stale restate work not computed", "item", item.ID, "snapshot", st.Snapshot, "why", stale)
			}
			rest.Steps[i].Ranges = nil
			continue
		}
		if !ok || gone || foreign != "" {
			// A retired table is not written again (the janitor dropped
			// it), nor a table production serves by plan work of a plan
			// the environment has moved past (decide.ForeignWork): the
			// engine refuses the completion, which gives the work up.
			if foreign != "" && r.Log != nil {
				r.Log.Warn("stale plan work not computed: its table is production's", "item", item.ID, "snapshot", st.Snapshot, "incumbent", foreign)
			}
			continue
		}
		rest.Steps[i].Ranges = nil
		if reads := readsAny(m, bad); reads != "" {
			// Computed from an upstream table that misses what a failed
			// step should have written: not computed, tried again with it.
			failed.Skipped = append(failed.Skipped, i)
			bad[m.Table] = true
			if r.Log != nil {
				r.Log.Warn("step not computed: a step it reads failed", "item", item.ID, "snapshot", st.Snapshot, "reads", reads)
			}
			continue
		}
		todo := interval.NewSet(st.Ranges...).SubtractSet(done)
		if todo.Empty() {
			continue
		}
		// Only whole batches are left out: a batch partly recorded (its
		// grid changed) is computed again whole. Each keeps its name
		// (its index among the step's batches) for its record's id.
		names := map[time.Time]string{}
		var left []interval.Range
		recorded := func(b interval.Range) []interval.Range { return []interval.Range{b} }
		if m.Whole() {
			// Computed whole: the step's span, [start, e), is one batch
			// that recomputes all of it, recorded with the step's ranges.
			b := Span(st.Ranges)
			left, names[b.Start] = []interval.Range{b}, work.BatchName(i, 0)
			recorded = func(interval.Range) []interval.Range { return st.Ranges }
		} else {
			for n, b := range interval.Batches(unit, batching.Size, st.Ranges) {
				if todo.Overlaps(b) {
					left = append(left, b)
					names[b.Start] = work.BatchName(i, n)
				}
			}
		}
		one := batching
		one.Size = 0 // left is cut into batches already
		_, err = writeStep(ctx, r.WH, r.Log, item.ID, st.Snapshot, m, unit, one, left, func(ctx context.Context, b interval.Range, rows int64) error {
			res := work.Result{Rows: rows, Audits: Audit(ctx, r.WH, m, audits, b)}
			if err := ctx.Err(); err != nil {
				return err // the audits were cut short: the batch is computed again
			}
			logAudits(r.Log, st.Snapshot, b, res.Audits)
			return r.record(ctx, item, i, names[b.Start], recorded(b), res, at)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, work.ErrYielded) {
			// The pool wants the worker back: what is committed is
			// recorded; the item resumes later with the rest.
			if len(failed.Failed) > 0 {
				// A retry comes anyway: it takes this step's rest and
				// the later steps along.
				for j := i; j < len(item.Steps); j++ {
					failed.Skipped = append(failed.Skipped, j)
				}
				return failed
			}
			return err
		}
		if err != nil {
			if errors.Is(err, warehouse.ErrTimeout) && !errors.Is(err, work.ErrTimedOut) {
				err = fmt.Errorf("%w: %w", work.ErrTimedOut, err)
			}
			var ce *commands.Error
			if errors.As(err, &ce) {
				// The engine refused a batch's record: that is not a
				// computation failing, and retrying will not change it.
				return err
			}
			failed.Failed = append(failed.Failed, work.StepFailure{Step: i, Err: err})
			bad[m.Table] = true
		}
	}
	if err := r.Done.Run(ctx, rest, at); err != nil {
		return err
	}
	if len(failed.Failed) > 0 {
		return failed
	}
	return nil
}

// record records a batch of step i of item, named name, over ranges (the
// batch's range; a model computed whole: the step's), done with what
// computing it gave, at the Clock's reading when set.
func (r *Runner) record(ctx context.Context, item work.Item, i int, name string, ranges []interval.Range, res work.Result, at time.Time) error {
	one := item
	st := item.Steps[i]
	st.Ranges = ranges
	one.Steps, one.Batch = []work.Step{st}, name
	if r.Clock != nil {
		if now := r.Clock(); now.After(at) {
			at = now
		}
	}
	if br, ok := r.Done.(BatchRecorder); ok {
		return br.RecordBatch(ctx, one, res, at)
	}
	return r.Done.Run(ctx, one, at)
}

// Span is the range from the earliest start of ranges to their latest
// end: a model computed whole computes its step's ranges as this one
// batch (its coverage is [start, e) after each computation, so the
// ranges are normally that one range already).
func Span(ranges []interval.Range) interval.Range {
	s := ranges[0]
	for _, r := range ranges[1:] {
		if r.Start.Before(s.Start) {
			s.Start = r.Start
		}
		if r.End.After(s.End) {
			s.End = r.End
		}
	}
	return s
}

// readsAny is the first upstream table of m in bad, or "".
func readsAny(m warehouse.Model, bad map[string]bool) string {
	for _, t := range m.Upstream {
		if bad[t] {
			return t
		}
	}
	return ""
}

// ActorName is the actor Done records the work as, when it names one.
func (r *Runner) ActorName() string {
	if a, ok := r.Done.(interface{ ActorName() string }); ok {
		return a.ActorName()
	}
	return ""
}

// Views is what every environment's views read: env → model → the
// incumbent's warehouse model (its table is the view's), for the
// incumbents that have SQL. An incumbent whose upstream cannot be
// resolved is left out, with the error.
func Views(st *projections.State) (map[string]map[string]warehouse.Model, error) {
	out := map[string]map[string]warehouse.Model{}
	var errs []error
	for name, env := range st.Envs {
		for model, id := range env.Incumbents {
			m, ok, err := ModelOf(st, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				continue
			}
			if out[name] == nil {
				out[name] = map[string]warehouse.Model{}
			}
			out[name][model] = m
		}
	}
	return out, errors.Join(errs...)
}

// Syncer keeps the warehouse's environment views on Views of the live
// projection. One process owns a DuckDB warehouse: the Syncer runs where
// the Runner does.
type Syncer struct {
	WH   *warehouse.Warehouse
	Proj *live.Projection
	Log  *slog.Logger
}

// Run applies Views now and after every change of the projection, until
// ctx ends. Each env whose views differ from what this Syncer applied
// last (everything, after a start) is swapped in one transaction. A
// failed swap is retried at the next change, or after a second.
func (s *Syncer) Run(ctx context.Context) error {
	applied := map[string]map[string]string{}
	// The views depend on the envs' incumbents alone: while they are as
	// at the last complete sync, an applied event (a completion, most of
	// them) needs no Views, which looks up every incumbent's plans.
	var synced map[string]map[string]string
	for {
		changed, err := s.Proj.Watch()
		if err != nil {
			return err
		}
		var want map[string]map[string]warehouse.Model
		var verr error
		var inc map[string]map[string]string
		s.Proj.Read(func(st *projections.State) {
			if inc = incumbents(st); !sameIncumbents(inc, synced) {
				want, verr = Views(st)
			}
		})
		if verr != nil && s.Log != nil {
			s.Log.Warn("views", "err", verr)
		}
		errs := apply(ctx, s.WH, want, applied, s.Log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(errs) == 0 && verr == nil {
			synced = inc
		}
		var again <-chan time.Time
		if len(errs) > 0 {
			again = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-again:
		}
	}
}

// incumbents is every env's model → incumbent snapshot.
func incumbents(st *projections.State) map[string]map[string]string {
	out := make(map[string]map[string]string, len(st.Envs))
	for name, env := range st.Envs {
		out[name] = maps.Clone(env.Incumbents)
	}
	return out
}

func sameIncumbents(a, b map[string]map[string]string) bool {
	return b != nil && maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}

// SyncOnce points every environment's views at its incumbents' tables
// (Views of the projection) now, each env in one transaction, and returns
// when they are swapped: what a Syncer does after a change, done
// synchronously (a scenario's runner calls it after every step, so views
// follow promotions deterministically). Applying views that are already
// in place changes nothing.
func SyncOnce(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection) error {
	var want map[string]map[string]warehouse.Model
	var verr error
	proj.Read(func(st *projections.State) { want, verr = Views(st) })
	errs := apply(ctx, wh, want, map[string]map[string]string{}, nil)
	return errors.Join(append([]error{verr}, errs...)...)
}

// apply swaps, in env name order, each env of want whose views differ
// from applied, and records in applied the envs it swapped. It returns the
// swaps that failed.
func apply(ctx context.Context, wh *warehouse.Warehouse, want map[string]map[string]warehouse.Model, applied map[string]map[string]string, log *slog.Logger) []error {
	envs := make([]string, 0, len(want))
	for env := range want {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	var errs []error
	for _, env := range envs {
		views := map[string]string{}
		for model, m := range want[env] {
			views[model] = m.Table
		}
		if maps.Equal(applied[env], views) {
			continue
		}
		if err := swap(ctx, wh, env, want[env], views); err != nil {
			errs = append(errs, fmt.Errorf("sqlrun: swapping the views of %s: %w", env, err))
			if log != nil && ctx.Err() == nil {
				log.Warn("swapping views", "env", env, "err", err)
			}
			continue
		}
		applied[env] = views
		if log != nil {
			log.Info("views swapped", "env", env, "views", views)
		}
	}
	return errs
}

// swap points env's views at their tables, creating a snapshot table no
// interval was written to yet (a view needs its table).
func swap(ctx context.Context, wh *warehouse.Warehouse, env string, models map[string]warehouse.Model, views map[string]string) error {
	// Upstream tables first: a table is created from its query, which
	// reads them.
	done := map[string]bool{}
	for len(done) < len(models) {
		progress := false
		for name, m := range models {
			if done[name] {
				continue
			}
			ready := true
			for up := range m.Upstream {
				if _, inEnv := models[up]; inEnv && !done[up] {
					ready = false
				}
			}
			if !ready {
				continue
			}
			if err := wh.EnsureTable(ctx, m); err != nil {
				return err
			}
			done[name], progress = true, true
		}
		if !progress {
			return fmt.Errorf("sqlrun: env %s: the models' upstream form a cycle", env)
		}
	}
	return wh.Promote(ctx, env, views)
}
