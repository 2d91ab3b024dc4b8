package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/shell"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// The workers row, end to end: serve's published path (engine, command
// service, work publisher cutting the plan's backfill into batches) and n
// `tidemark worker --warehouse postgres://…` loops (work/shell.Worker with
// sqlrun.Computer, each on its own NATS connection and its own warehouse
// pool, as separate processes would be), one Postgres. The time runs from
// the plan's build to its whole backfill recorded done.

// workersRun backfills hours hourly intervals of the bench model
// (batch_size workersBatch, batch_concurrency workersConcurrency) with n
// workers on the Postgres at dsn, into a fresh deployment whose model is
// named model (its table is dropped after); it returns the rows written
// and the time taken.
func workersRun(ctx context.Context, dsn, model string, hours, n int) (int64, time.Duration, error) {
	dir, err := os.MkdirTemp("", "tidemark-bench-workers-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	end := t0.Add(time.Duration(hours) * time.Hour)
	node, err := natsnode.Start(ctx, natsnode.Config{DataDir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:-1", Name: "tidemark-bench-workers"})
	if err != nil {
		return 0, 0, err
	}
	defer node.Close()
	eng, err := engine.Open(ctx, node.Conn(), engine.Config{Logger: quiet(), Coalesce: true, Clock: func() time.Time { return end }})
	if err != nil {
		return 0, 0, err
	}
	defer eng.Close(context.WithoutCancel(ctx))
	svc, err := transport.Serve(node.Conn(), eng, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		return 0, 0, err
	}
	defer svc.Stop()
	wh, err := warehouse.Open(ctx, dsn, warehouse.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer wh.Close()
	pub := &work.Publisher{Log: eng.Log(), Clock: eng.Now, Logger: quiet(), SQL: sqlrun.StepSQL(eng.Projection()), Progress: work.ProgressFrom(eng.Projection()),
		Tables: work.TablesFrom(eng.Projection()), BatchConcurrency: wh.BatchConcurrency()}
	if err := pub.Prepare(ctx); err != nil {
		return 0, 0, err
	}
	// Stopped before anything they use is closed: the loops first, then
	// their connections and pools.
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer wg.Wait()
	defer stop()
	wg.Go(func() { _ = pub.Run(wctx) })
	for i := range n {
		nc, err := nats.Connect(node.ClientURL())
		if err != nil {
			return 0, 0, err
		}
		closers = append(closers, nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			return 0, 0, err
		}
		wwh, err := warehouse.Open(ctx, dsn, warehouse.Options{})
		if err != nil {
			return 0, 0, err
		}
		closers = append(closers, func() { wwh.Close() })
		w := &shell.Worker{JS: js, Handler: transport.NewClient(nc), Compute: &sqlrun.Computer{WH: wwh}, Kind: work.KindSQL,
			Name: fmt.Sprintf("bench-%d", i), Logger: quiet(), Heartbeat: time.Minute}
		wg.Go(func() { _ = w.Run(wctx) })
	}

	snap := model + "@v1"
	if err := eng.Handle(ctx, &commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg-bfw"}, Model: model, Version: "v1", Cron: "@hourly", Start: t0,
		SQL: backfillSQL, TimeColumn: "ts", BatchSize: workersBatch, BatchConcurrency: workersConcurrency}).Err(); err != nil {
		return 0, 0, err
	}
	t := time.Now()
	if err := eng.Handle(ctx, &commands.BuildPlan{Meta: commands.Meta{ID: "plan-w"}, Plan: "w", Env: "prod", Versions: map[string]string{model: "v1"}}).Err(); err != nil {
		return 0, 0, err
	}
	want := interval.R(t0, end)
	var rows int64
	var table string
	actx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	err = eng.Projection().Await(actx, func(st *projections.State) bool {
		sn := st.Snapshots[snap]
		if sn == nil || !st.Coverage[sn.Table].Covers(want) {
			return false
		}
		table = sqlrun.TableName(sn.Table)
		rows = 0
		for _, w := range st.Work {
			if d := w.Done[snap]; d != nil {
				rows += d.Rows
			}
		}
		return true
	})
	d := time.Since(t)
	if err != nil {
		return 0, 0, fmt.Errorf("%d workers: the backfill was not recorded: %w", n, err)
	}
	if wantRows := int64(hours) * 1000; rows != wantRows {
		return 0, 0, fmt.Errorf("%d workers wrote %d rows, want %d", n, rows, wantRows)
	}
	return rows, d, wh.DropTable(ctx, table)
}
