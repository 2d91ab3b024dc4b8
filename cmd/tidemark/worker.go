package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/shell"
	"github.com/tidemark/tidemark/work/sqlrun"
)

func newWorkerCmd() *cobra.Command {
	var w shell.Worker
	var natsURL, logFormat, warehouseDSN string
	var whOpts warehouse.Options
	cmd := &cobra.Command{
		Use:   "worker (--exec 'CMD' | --warehouse DSN)",
		Short: "Pull interval work from the server and compute it: run CMD once per batch, or the models' SQL in a warehouse",
		Long: "worker pulls work items (backfill, scheduled, catch-up and repair runs) from the\n" +
			"work-queue stream TIDEMARK_WORK and computes each batch, in one of two ways:\n\n" +
			"--exec CMD runs CMD under `sh -c` once per batch, with TIDEMARK_MODEL,\n" +
			"TIDEMARK_VERSION, TIDEMARK_START, TIDEMARK_END, TIDEMARK_RUN_KIND (and TIDEMARK_SNAPSHOT,\n" +
			"TIDEMARK_RUN_ID, TIDEMARK_ENV, TIDEMARK_PLAN, TIDEMARK_ATTEMPT) in its environment.\n" +
			"Exit status 0 reports the batch complete; anything else reports a failure with the\n" +
			"exit status and the tail of stderr, and the item is retried with backoff.\n\n" +
			"--warehouse DSN computes the SQL the engine puts in each step of an SQL model into\n" +
			"the warehouse, one transaction per interval, and reports the batch complete after\n" +
			"the commit; a step of a model without SQL is reported complete at once. Use\n" +
			"postgres://… to let many workers share one Postgres: serve --warehouse with the same\n" +
			"DSN keeps the environments' views on it. A DuckDB file is refused (exit 2): one\n" +
			"process owns it, so serve could not swap its views; compute into DuckDB with\n" +
			"serve --builtin-worker instead. A worker joining a serve without a Postgres\n" +
			"warehouse is refused too (README \"Layouts\").\n\n" +
			"Workers bind to the durable consumer tidemark-workers, which `tidemark serve`\n" +
			"provisions, and publish a heartbeat on tidemark.workers.heartbeat.<user> (the user\n" +
			"of --nats-url; the server binds the subject to that user, as its commands) that\n" +
			"serve's dashboard and /metrics show.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (w.Command == "") == (warehouseDSN == "") {
				return &exitError{kind: usage, err: errors.New("exactly one of --exec (the command that computes one batch) and --warehouse (compute the models' SQL there) is required")}
			}
			log, err := newLogger(logFormat)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			if w.Name != "" {
				if err := work.CheckName(w.Name); err != nil {
					return &exitError{kind: usage, err: fmt.Errorf("--name: %w", err)}
				}
			}
			ctx := cmd.Context()
			w.Kind = work.KindExec
			if err := workerLayout(warehouseDSN); err != nil {
				return &exitError{kind: usage, err: err}
			}
			if warehouseDSN != "" {
				wh, err := warehouse.Open(ctx, warehouseDSN, whOpts)
				if err != nil {
					return &exitError{kind: usage, err: fmt.Errorf("--warehouse: %w", err)}
				}
				defer wh.Close()
				w.Compute = &sqlrun.Computer{WH: wh, Log: log.With("subsystem", "sqlrun")}
				w.Kind = work.KindSQL
				log.Info("warehouse", "engine", wh.Engine(), "dsn", warehouse.Redact(warehouseDSN))
			}
			nc, err := transport.Connect(natsURL, nats.Name("tidemark-worker"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
			if err != nil {
				return &exitError{kind: usage, err: fmt.Errorf("cannot reach the tidemark server at %s: %w", natsURL, err)}
			}
			defer nc.Close()
			if w.JS, err = jetstream.New(nc); err != nil {
				return &exitError{kind: usage, err: err}
			}
			w.Handler = transport.NewClient(nc)
			w.Logger = log.With("subsystem", "worker")
			w.Output = cmd.ErrOrStderr()
			c, err := w.Consumer(ctx)
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			if err := workerServes(c.CachedInfo().Config.Metadata, warehouseDSN); err != nil {
				return &exitError{kind: usage, err: err}
			}
			w.Logger.Info("worker pulling work", "nats", natsURL, "concurrency", w.Concurrency, "name", w.Name, "kind", w.Kind)
			return w.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&w.Command, "exec", "", "command computing one batch (run with sh -c)")
	f.StringVar(&warehouseDSN, "warehouse", "", "compute SQL models in this warehouse: postgres://…, the one serve --warehouse names (shared by many workers; a DuckDB file is refused: use serve --builtin-worker)")
	warehouseFlags(f, &whOpts, false)
	f.StringVar(&natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	f.IntVar(&w.Concurrency, "concurrency", 1, "work items run at once")
	f.IntVar(&w.MaxAttempts, "max-attempts", 5, "deliveries of an item before it is given up (each failure is an event); at most serve's --work-max-attempts")
	f.DurationVar(&w.Timeout, "timeout", time.Hour, "kill a batch's command after this long")
	f.DurationVar(&w.AckWait, "ack-wait", 0, "heartbeat a running item every third of this (default and at most: the ack wait of the work consumer, serve's --work-ack-wait)")
	f.DurationVar(&w.Heartbeat, "heartbeat", work.DefaultHeartbeat, "publish this worker's liveness this often (serve drops a worker silent for 3 of them)")
	f.StringVar(&w.Name, "name", "", "worker name in events and heartbeats, printable characters only (default host-pid)")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	return cmd
}
