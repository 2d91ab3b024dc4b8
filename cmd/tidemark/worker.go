package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work/shell"
)

func newWorkerCmd() *cobra.Command {
	var w shell.Worker
	var natsURL, logFormat string
	cmd := &cobra.Command{
		Use:   "worker --exec 'CMD'",
		Short: "Pull interval work from the server and run CMD once per batch",
		Long: "worker pulls work items (backfill, scheduled and catch-up runs) from the work-queue\n" +
			"stream TIDEMARK_WORK and runs CMD under `sh -c` once per batch, with TIDEMARK_MODEL,\n" +
			"TIDEMARK_VERSION, TIDEMARK_START, TIDEMARK_END, TIDEMARK_RUN_KIND (and TIDEMARK_SNAPSHOT,\n" +
			"TIDEMARK_RUN_ID, TIDEMARK_ENV, TIDEMARK_PLAN, TIDEMARK_ATTEMPT) in its environment.\n" +
			"Exit status 0 reports the batch complete; anything else reports a failure with the\n" +
			"exit status and the tail of stderr, and the item is retried with backoff. Workers bind\n" +
			"to the durable consumer tidemark-workers, which `tidemark serve` provisions.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if w.Command == "" {
				return &exitError{kind: usage, err: errors.New("--exec is required: the command that computes one batch")}
			}
			log, err := newLogger(logFormat)
			if err != nil {
				return &exitError{kind: usage, err: err}
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
			if _, err := w.Consumer(cmd.Context()); err != nil {
				return &exitError{kind: usage, err: err}
			}
			w.Logger.Info("worker pulling work", "nats", natsURL, "concurrency", w.Concurrency, "name", w.Name)
			return w.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&w.Command, "exec", "", "command computing one batch (run with sh -c)")
	f.StringVar(&natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	f.IntVar(&w.Concurrency, "concurrency", 1, "work items run at once")
	f.IntVar(&w.MaxAttempts, "max-attempts", 5, "deliveries of an item before it is given up (each failure is an event); at most serve's --work-max-attempts")
	f.DurationVar(&w.Timeout, "timeout", time.Hour, "kill a batch's command after this long")
	f.DurationVar(&w.AckWait, "ack-wait", 0, "heartbeat a running item every third of this (default and at most: the ack wait of the work consumer, serve's --work-ack-wait)")
	f.StringVar(&w.Name, "name", "", "worker name in events (default host-pid)")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	return cmd
}
