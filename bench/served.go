package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// Tick to served: the data plane's freshness. serve's path, assembled as
// serve assembles it (engine, work publisher with the built-in SQL worker
// on a DuckDB file, the views syncer), on a clock the bench moves: each
// tick moves the clock one hour and sends the scheduler's tick
// (scheduler.Scheduler.Tick, the command the wall-clock scheduler sends); the
// latency runs from that command until a query on prod's view sees the new
// interval's rows, for every model of the environment.

// tickModelSQL is the small model: 60 rows an hour, in SQL DuckDB runs.
const tickModelSQL = "SELECT h.h + CAST(g.i AS INTEGER) * INTERVAL '1 minute' AS ts, CAST(g.i % 5 AS BIGINT) AS user_id FROM generate_series(0, 59) AS g(i), range(@start_ts, @end_ts, INTERVAL 1 HOUR) AS h(h)"

// tickRows is tickModelSQL's rows an interval.
const tickRows = 60

// tickBackfill is the hours of history each model is backfilled with
// before the ticks.
const tickBackfill = 24

// TickServed is an engine serving an environment of small SQL models from
// a DuckDB warehouse, ticked by hand.
type TickServed struct {
	eng    *engine.Engine
	node   *natsnode.Node
	wh     *warehouse.Warehouse
	models int
	clock  atomic.Int64 // unix nanoseconds
	done   chan struct{}
	stop   func()
	dir    string
}

// NewTickServed starts the engine, the built-in SQL worker, the views
// syncer, registers models small hourly SQL models, backfills a day of
// each and promotes them to prod.
func NewTickServed(ctx context.Context, models int) (*TickServed, error) {
	dir, err := os.MkdirTemp("", "tidemark-bench-served-*")
	if err != nil {
		return nil, err
	}
	s := &TickServed{models: models, done: make(chan struct{}, 1024), dir: dir}
	s.clock.Store(t0.Add(tickBackfill * time.Hour).UnixNano())
	fail := func(err error) (*TickServed, error) { s.Close(); return nil, err }
	s.wh, err = warehouse.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), warehouse.Options{})
	if err != nil {
		return fail(err)
	}
	s.node, err = natsnode.Start(ctx, natsnode.Config{DataDir: filepath.Join(dir, "nats"), SyncAlways: true, Name: "tidemark-engine"})
	if err != nil {
		return fail(err)
	}
	s.eng, err = engine.Open(ctx, s.node.Conn(), engine.Config{Logger: quiet(), Coalesce: true, Clock: s.now})
	if err != nil {
		return fail(err)
	}
	pub := &work.Publisher{Log: s.eng.Log(), Clock: s.eng.Now, Logger: quiet(), Reporter: s.eng,
		Runner: &sqlrun.Runner{WH: s.wh, Proj: s.eng.Projection(), Done: &inproc.Worker{Handler: s.eng, Actor: "worker:builtin"}, Log: quiet(), Clock: s.now},
		Tables: work.TablesFrom(s.eng.Projection()),
		Done: func(work.Item, error) {
			select {
			case s.done <- struct{}{}:
			default:
			}
		}}
	if err := pub.Prepare(ctx); err != nil {
		return fail(err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{}, 2)
	go func() { _ = pub.Run(lctx); stopped <- struct{}{} }()
	syncer := &sqlrun.Syncer{WH: s.wh, Proj: s.eng.Projection(), Log: quiet()}
	go func() { _ = syncer.Run(lctx); stopped <- struct{}{} }()
	s.stop = func() { cancel(); <-stopped; <-stopped }

	versions := map[string]string{}
	for i := range models {
		name := fmt.Sprintf("m%d", i)
		versions[name] = "v1"
		if err := s.eng.Handle(ctx, &commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg-" + name}, Model: name, Version: "v1",
			Cron: "@hourly", Start: t0, SQL: tickModelSQL, TimeColumn: "ts"}).Err(); err != nil {
			return fail(err)
		}
	}
	if err := s.eng.Handle(ctx, &commands.BuildPlan{Meta: commands.Meta{ID: "plan-d1"}, Plan: "d1", Env: "prod", Versions: versions}).Err(); err != nil {
		return fail(err)
	}
	// Promote once the backfill is recorded (a rejected promotion leaves
	// the plan open: try again after the next finished item).
	deadline := time.After(5 * time.Minute)
	for try := 0; ; try++ {
		r := s.eng.Handle(ctx, &commands.Promote{Meta: commands.Meta{ID: fmt.Sprintf("promote-d1-%d", try)}, Plan: "d1"})
		if err := r.Err(); err != nil {
			return fail(err)
		}
		if r.Decision != nil && r.Decision.Outcome == events.Accepted {
			break
		}
		select {
		case <-s.done:
		case <-deadline:
			return fail(errors.New("bench: tick to served: the backfill was not recorded within 5 minutes"))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	// prod's views swapped by the syncer.
	end := t0.Add(tickBackfill * time.Hour)
	if _, err := s.waitServed(ctx, t0, end, tickBackfill*tickRows, time.Minute); err != nil {
		return fail(err)
	}
	return s, nil
}

func (s *TickServed) now() time.Time { return time.Unix(0, s.clock.Load()).UTC() }

// Close stops everything and removes the bench's directory.
func (s *TickServed) Close() {
	if s.stop != nil {
		s.stop()
	}
	if s.eng != nil {
		_ = s.eng.Close(context.Background())
	}
	if s.node != nil {
		s.node.Close()
	}
	if s.wh != nil {
		_ = s.wh.Close()
	}
	os.RemoveAll(s.dir)
}

// waitServed waits until every model's view in prod holds want rows in
// [start, end), and returns when it saw them (polling every 200 µs).
func (s *TickServed) waitServed(ctx context.Context, start, end time.Time, want int64, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for i := 0; i < s.models; i++ {
		q := fmt.Sprintf(`SELECT count(*) FROM prod."m%d" WHERE ts >= $1 AND ts < $2`, i)
		for {
			var n int64
			err := s.wh.DB().QueryRowContext(ctx, q, start, end).Scan(&n)
			if err == nil && n == want {
				break
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("bench: tick to served: prod.m%d has %d rows in [%s, %s), want %d, after %s (%v)", i, n, start.Format(time.RFC3339), end.Format(time.RFC3339), want, within, err)
			}
			if ctx.Err() != nil {
				return time.Time{}, ctx.Err()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	return time.Now(), nil
}

// Tick moves the clock one hour, sends the scheduler's tick, and returns
// how long until prod's views show the new interval's rows of every
// model.
func (s *TickServed) Tick(ctx context.Context) (time.Duration, error) {
	t := s.now().Add(time.Hour)
	s.clock.Store(t.UnixNano())
	began := time.Now()
	advs, _, err := (&scheduler.Scheduler{Handler: s.eng, Proj: s.eng.Projection(), Logger: quiet()}).Tick(ctx, "prod", t, 0)
	if err != nil {
		return 0, err
	}
	if len(advs) == 0 {
		return 0, fmt.Errorf("bench: tick to served: the tick at %s advanced nothing", t.Format(time.RFC3339))
	}
	seen, err := s.waitServed(ctx, t.Add(-time.Hour), t, tickRows, time.Minute)
	if err != nil {
		return 0, err
	}
	return seen.Sub(began), nil
}

// ComputeTime is the model's own compute time: one interval written
// (DELETE and INSERT … SELECT in one transaction) straight into a table of
// its own in the same warehouse, the median of n.
func (s *TickServed) ComputeTime(ctx context.Context, n int) (time.Duration, error) {
	m := warehouse.Model{Name: "compute", Table: "bench_compute", SQL: tickModelSQL, TimeColumn: "ts"}
	if err := s.wh.EnsureTable(ctx, m); err != nil {
		return 0, err
	}
	ds := make([]time.Duration, n)
	for i := range ds {
		start := t0.Add(time.Duration(i) * time.Hour)
		began := time.Now()
		if _, err := s.wh.WriteInterval(ctx, m, start, start.Add(time.Hour)); err != nil {
			return 0, err
		}
		ds[i] = time.Since(began)
	}
	return percentile(ds, 0.5), nil
}

// tickLatencies measures ticks ticks on an environment of models models,
// and the model's own compute time.
func tickLatencies(ctx context.Context, models, ticks int) (lat []time.Duration, compute time.Duration, err error) {
	s, err := NewTickServed(ctx, models)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	for range ticks {
		d, err := s.Tick(ctx)
		if err != nil {
			return nil, 0, err
		}
		lat = append(lat, d)
	}
	compute, err = s.ComputeTime(ctx, 20)
	return lat, compute, err
}

// tickToServedGoal is the goal's bound beyond the model's compute time.
const tickToServedGoal = time.Second

// tickFigure is the row "tick to served": p99 from a scheduler tick to the
// interval's rows in prod's view, against 1 s plus the model's own compute
// time; at ten times the models in the environment.
func tickFigure(ctx context.Context, sz sizes) ([]Figure, error) {
	lat, compute, err := tickLatencies(ctx, 1, sz.ticks)
	if errors.Is(err, warehouse.ErrNoCgo) {
		return nil, nil // no DuckDB in this build: no row
	}
	if err != nil {
		return nil, err
	}
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	limit := tickToServedGoal + compute
	f := Figure{Name: "tick to served (1 model, DuckDB, built-in worker)", Tidemark: ms(p99), Limit: ms(limit), Unit: "ms p99",
		Ratio: float64(p99) / float64(limit), Goal: "p99 < 1 s + the model's compute", Pass: p99 < limit}
	note := fmt.Sprintf("p50 %.1f ms, p99 %.1f ms over %d ticks; the model's own compute %.2f ms an interval (%d rows)", ms(p50), ms(p99), len(lat), ms(compute), tickRows)
	if sz.tenfold {
		big := 10
		blat, _, err := tickLatencies(ctx, big, sz.ticks)
		if err != nil {
			return nil, err
		}
		bp50, bp99 := percentile(blat, 0.5), percentile(blat, 0.99)
		f.Scale = scaled(1, big, ms(p99), ms(bp99), ms(tickToServedGoal+time.Duration(big)*compute), float64(p99), float64(bp99)/float64(big))
		note += fmt.Sprintf("; at %d models (all visible): p50 %.1f ms, p99 %.1f ms", big, ms(bp50), ms(bp99))
	}
	f.Note = note
	return []Figure{f}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
