// Package shell is the `tidemark worker` side of the work protocol: it
// pulls work items, computes each batch — by default a shell command
// (sh -c) per batch; with Compute set, any work.Computer (the SQL of
// `tidemark worker --warehouse`, work/sqlrun.Computer) — reports it, and
// publishes the worker's heartbeat (work.Beat).
// Importers: cmd/tidemark (tidemark worker).
package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
)

// Worker pulls work items and runs a shell command once per batch (a
// step's contiguous range), with the batch in its environment:
// TIDEMARK_MODEL, TIDEMARK_VERSION, TIDEMARK_SNAPSHOT, TIDEMARK_START,
// TIDEMARK_END (RFC 3339), TIDEMARK_RUN_KIND, TIDEMARK_RUN_ID, TIDEMARK_ENV,
// TIDEMARK_PLAN, TIDEMARK_ATTEMPT. Each computed batch is reported with
// complete_work, each failure with fail_work (exit status and the tail of
// stderr), naming the item. While a command runs the item is kept alive with in-progress
// acks; a failed item is redelivered after a backoff until MaxAttempts
// deliveries, then terminated. A worker killed mid-run acks nothing, so
// its item is redelivered after the ack wait.
type Worker struct {
	JS      jetstream.JetStream
	Handler commands.Handler
	// Command runs under sh -c, unless Compute is set.
	Command string
	// Compute, when set, computes each batch instead of Command.
	Compute work.Computer
	// Kind names the worker's kind in its heartbeat: work.KindExec
	// (default) or work.KindSQL.
	Kind string
	// Heartbeat is the interval of the worker's heartbeat, published on
	// the subject of its connection's user (work.Beat); default
	// work.DefaultHeartbeat.
	Heartbeat time.Duration
	// Name identifies the worker in events (worker:<name>) and heartbeats:
	// printable characters only (work.CheckName).
	Name string
	// Concurrency is how many items run at once. Default 1.
	Concurrency int
	// MaxAttempts bounds deliveries of an item: the worker gives it up
	// (and reports the failure as final) at this attempt. Default 5; at
	// most the work consumer's MaxDeliver.
	MaxAttempts int
	// Timeout bounds one batch's command. Default 1h.
	Timeout time.Duration
	// AckWait paces the heartbeats (every AckWait/3) that keep a running
	// item from being redelivered. Default, and at most: the work
	// consumer's ack wait, which the engine sets.
	AckWait time.Duration
	// Backoff is the delay before redelivering a failed item, by attempt
	// (the last one repeats). Default 1s, 5s, 30s, 2m.
	Backoff []time.Duration
	// Output receives the commands' stdout and stderr. Default os.Stderr.
	// The worker writes it from one goroutine at a time (outMu), so any
	// io.Writer will do.
	Output io.Writer
	Logger *slog.Logger
	// Done, when set, is called after each item with its outcome.
	Done func(item work.Item, err error)

	stats work.Stats
	// legacy: the consumer was provisioned by a serve of the work format
	// before work.Format, whose completions take no rows.
	legacy bool

	// outMu serialises writes to Output: a command's stdout and stderr are
	// copied by separate goroutines, and Concurrency > 1 runs several
	// commands at once.
	outMu sync.Mutex
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (w *Worker) defaults() {
	if w.Concurrency < 1 {
		w.Concurrency = 1
	}
	if w.MaxAttempts < 1 {
		w.MaxAttempts = 5
	}
	if w.Timeout == 0 {
		w.Timeout = time.Hour
	}
	if len(w.Backoff) == 0 {
		w.Backoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	}
	if w.Output == nil {
		w.Output = os.Stderr
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.Name == "" {
		host, _ := os.Hostname()
		w.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if w.Kind == "" {
		w.Kind = work.KindExec
	}
}

// Counts are the items this worker finished, failed and is computing.
func (w *Worker) Counts() (done, failed uint64, inFlight int64) { return w.stats.Counts() }

// Consumer binds to the durable consumer the workers share, which the
// engine provisions (work.Publisher.Prepare): a worker never creates or
// changes it. Its ack wait bounds AckWait and its MaxDeliver bounds
// MaxAttempts.
func (w *Worker) Consumer(ctx context.Context) (jetstream.Consumer, error) {
	w.defaults()
	if err := work.CheckName(w.Name); err != nil {
		return nil, fmt.Errorf("worker: --name: %w", err)
	}
	if _, err := w.JS.Stream(ctx, work.Stream); err != nil {
		return nil, fmt.Errorf("worker: work stream %s: %w (is `tidemark serve` running without --builtin-worker?)", work.Stream, err)
	}
	c, err := w.JS.Consumer(ctx, work.Stream, work.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("worker: consumer %s: %w (the engine provisions it when `tidemark serve` starts without --builtin-worker)", work.Consumer, err)
	}
	if err != nil {
		return nil, fmt.Errorf("worker: consumer %s: %w", work.Consumer, err)
	}
	cfg := c.CachedInfo().Config
	switch f := cfg.Metadata[work.FormatKey]; f {
	case work.Format:
	case "":
		// An older serve: whole items, and completions without rows
		// (its decoder refuses a key it does not know).
		w.legacy = true
		w.Logger.Warn("worker: serve publishes an older work format (no batches); reporting completions without rows: update serve", "consumer", work.Consumer)
	default:
		return nil, fmt.Errorf("worker: serve publishes work format %q, this worker reads %q: update the worker (workers read their own format and the one before it, so update workers before serve)", f, work.Format)
	}
	if cfg.AckWait > 0 && (w.AckWait <= 0 || w.AckWait > cfg.AckWait) {
		w.AckWait = cfg.AckWait
	}
	if w.AckWait <= 0 {
		w.AckWait = work.DefaultAckWait
	}
	if cfg.MaxDeliver > 0 && w.MaxAttempts > cfg.MaxDeliver {
		w.MaxAttempts = cfg.MaxDeliver
	}
	return c, nil
}

// Run pulls and runs items until ctx ends; in-flight commands are killed
// and their items handed back for redelivery.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.Consumer(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := work.Beat(ctx, w.JS.Conn(), w.Name, w.Kind, w.Heartbeat, &w.stats); err != nil {
			w.Logger.Error("worker: no heartbeat", "err", err)
		}
	}()
	for i := 0; i < w.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					if ctx.Err() == nil {
						w.Logger.Warn("worker: fetch", "err", err)
						sleep(ctx, time.Second)
					}
					continue
				}
				for msg := range msgs.Messages() {
					w.handle(ctx, msg)
				}
			}
		}()
	}
	<-ctx.Done()
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errFailed marks an item whose command failed (already reported).
var errFailed = errors.New("worker: run failed")

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	var item work.Item
	if err := json.Unmarshal(msg.Data(), &item); err != nil {
		w.Logger.Error("worker: undecodable work item; terminating it", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go func() {
		t := time.NewTicker(w.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	w.stats.Begin()
	err := w.runItem(ctx, item, attempt)
	w.stats.End(err)
	stopHB()
	switch {
	case err == nil:
		if aerr := msg.DoubleAck(context.WithoutCancel(ctx)); aerr != nil {
			w.Logger.Warn("worker: ack", "item", item.ID, "err", aerr)
		}
	case ctx.Err() != nil:
		// Stopping: hand the item back at once.
		_ = msg.Nak()
	case errors.Is(err, errFailed) && (attempt >= w.MaxAttempts || errors.Is(err, work.ErrPermanent)):
		w.Logger.Error("worker: giving up on item", "item", item.ID, "attempts", attempt)
		_ = msg.Term()
	case !errors.Is(err, errFailed) && refusedForGood(err):
		// The engine refused a report or a check for good (stale plan
		// work: the environment moved past its plan, say). Delivered
		// again, the item would be computed again and refused again.
		w.Logger.Error("worker: the engine refused the item's work; giving it up", "item", item.ID, "err", err)
		var ce *commands.Error
		if item.Batch != "" && !(errors.As(err, &ce) && ce.Code == commands.CodeIdempotencyConflict) {
			// (An id conflict is a report of this batch recorded with
			// another body: the batch may well be done.)
			w.givenUp(ctx, item, attempt, err)
		}
		_ = msg.Term()
	default:
		delay := w.Backoff[min(attempt-1, len(w.Backoff)-1)]
		w.Logger.Warn("worker: item failed; redelivering", "item", item.ID, "attempt", attempt, "in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
	}
	if w.Done != nil {
		w.Done(item, err)
	}
}

func (w *Worker) runItem(ctx context.Context, item work.Item, attempt int) error {
	for si, st := range item.Steps {
		if (item.Plan != "" || item.RunKind == events.RunRestate) && len(st.Ranges) > 0 {
			if err := w.check(ctx, item, si, attempt); err != nil {
				return err
			}
		}
		for ri, r := range st.Ranges {
			res := w.compute(ctx, work.Batch{Item: item, Step: si, Range: r, Attempt: attempt})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			meta := commands.Meta{ID: fmt.Sprintf("%s/%d/%d/%d", item.Key(), si, ri, attempt), Actor: "worker:" + w.Name, Correlation: st.RunID}
			if res.err != nil {
				meta.ID = fmt.Sprintf("%s/%d/%d/%d/failed", item.Key(), si, ri, attempt)
				rep := w.Handler.Handle(ctx, &commands.FailWork{FailRun: commands.FailRun{Meta: meta, Model: st.Model, Version: st.Version, Ranges: []interval.Range{r},
					RunKind: item.RunKind, RunID: st.RunID, Worker: w.Name, ExitStatus: res.exit, Error: res.err.Error(),
					StderrTail: res.stderr, Attempt: attempt, Final: attempt >= w.MaxAttempts || errors.Is(res.err, work.ErrPermanent), Work: item.ID}})
				if err := rep.Err(); err != nil {
					return fmt.Errorf("worker: report failure of %s %s: %w", st.Snapshot, r, err)
				}
				return fmt.Errorf("%w: %s %s: %w", errFailed, st.Snapshot, r, res.err)
			}
			// The completion id does not depend on the attempt: a batch
			// computed again after a redelivery is recorded once.
			meta.ID = fmt.Sprintf("%s/%d/%d", item.Key(), si, ri)
			rows, audits := res.rows, res.audits
			if w.legacy {
				rows, audits = 0, nil
			}
			rep := w.Handler.Handle(ctx, &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: meta, Model: st.Model, Version: st.Version,
				Ranges: []interval.Range{r}, RunKind: item.RunKind, RunID: st.RunID, Work: item.ID, Rows: rows, Audits: audits}})
			if err := rep.Err(); err != nil {
				return fmt.Errorf("worker: report completion of %s %s: %w", st.Snapshot, r, err)
			}
		}
	}
	return nil
}

// givenUp records, as far as the engine takes it, that the worker gave a
// batch up for good after the engine refused its work (err): a final
// fail_work, so that the publisher no longer holds the item's batches
// that wait for it. The engine may refuse this too (an item it does
// not know): then there is nothing to hold.
func (w *Worker) givenUp(ctx context.Context, item work.Item, attempt int, err error) {
	for si, st := range item.Steps {
		for ri, r := range st.Ranges {
			meta := commands.Meta{ID: fmt.Sprintf("%s/%d/%d/%d/given-up", item.Key(), si, ri, attempt), Actor: "worker:" + w.Name, Correlation: st.RunID}
			rep := w.Handler.Handle(ctx, &commands.FailWork{FailRun: commands.FailRun{Meta: meta, Model: st.Model, Version: st.Version, Ranges: []interval.Range{r},
				RunKind: item.RunKind, RunID: st.RunID, Worker: w.Name, ExitStatus: -1, Error: "given up: the engine refused it for good: " + err.Error(),
				Attempt: attempt, Final: true, Work: item.ID}})
			if rerr := rep.Err(); rerr != nil {
				w.Logger.Warn("worker: the engine refused the record of the item given up", "item", item.Key(), "err", rerr)
			}
		}
	}
}

// check asks the engine whether step si of a plan's item (or of a
// restatement's) may still be computed (check_work, at most
// commands.MaxRanges ranges a question): the environment may have moved
// past the plan (or the generation the restatement read) since the item
// was queued, and the step's table be production's now. A refusal for good
// gives the item up unwritten (handle); one the engine may lift later
// hands it back. An engine that cannot answer (down, or one without
// check_work, or an auth file that does not grant it) is not waited for:
// the step is computed as before check_work existed, and complete_work
// still refuses stale work.
func (w *Worker) check(ctx context.Context, item work.Item, si, attempt int) error {
	st := item.Steps[si]
	for from := 0; from < len(st.Ranges); from += commands.MaxRanges {
		meta := commands.Meta{ID: fmt.Sprintf("%s/%d/check/%d/%d", item.Key(), si, attempt, from), Actor: "worker:" + w.Name, Correlation: st.RunID}
		ranges := st.Ranges[from:min(from+commands.MaxRanges, len(st.Ranges))]
		rep := w.Handler.Handle(ctx, &commands.CheckWork{CompleteWork: commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{
			Meta: meta, Model: st.Model, Version: st.Version, Ranges: ranges, RunKind: item.RunKind, RunID: st.RunID, Work: item.ID}}})
		err := rep.Err()
		var ce *commands.Error
		if errors.As(err, &ce) && ce.Code == commands.CodeUnavailable {
			w.Logger.Warn("worker: the engine cannot answer check_work; computing the step unchecked (update serve and docs/auth.conf before the workers)", "item", item.ID, "snapshot", st.Snapshot, "err", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("worker: %s of %s may not be computed now: %w", st.Snapshot, item.ID, err)
		}
	}
	return nil
}

// refusedForGood reports whether err is the engine's refusal of a report
// or a check that no later delivery can change. A refusal on a range is
// not one: "has not ended" depends on the deciding member's clock, which
// may lag another's after a failover.
func refusedForGood(err error) bool {
	var ce *commands.Error
	return errors.As(err, &ce) && !work.Transient(err) && !strings.HasPrefix(ce.Field, "ranges")
}

type execResult struct {
	exit   int
	stderr string
	err    error
	rows   int64 // rows written, as the Computer reports them
	// audits are the outcomes of the step's audits over the batch, as the
	// Computer reports them (a shell command's batch reports none).
	audits []events.AuditOutcome
}

// compute runs b with Compute, or the shell command.
func (w *Worker) compute(ctx context.Context, b work.Batch) execResult {
	if w.Compute == nil {
		return w.exec(ctx, b.Item, b.Item.Steps[b.Step], b.Range, b.Attempt)
	}
	started := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	out, err := w.Compute.Compute(runCtx, b)
	if err == nil {
		w.Logger.Info("worker: batch done", "snapshot", b.Item.Steps[b.Step].Snapshot, "range", b.Range.String(), "run_kind", b.Item.RunKind, "rows", out.Rows, "audits", len(out.Audits), "took", time.Since(started).Round(time.Millisecond))
		return execResult{rows: out.Rows, audits: out.Audits}
	}
	res := execResult{exit: -1, err: err}
	if ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		res.err = fmt.Errorf("timed out after %s: %w", w.Timeout, err)
	}
	var f *work.Failure
	if errors.As(err, &f) {
		res.exit, res.stderr = f.ExitStatus, f.StderrTail
	}
	if len(res.stderr) > commands.MaxStderrTail {
		res.stderr = string(bytes.ToValidUTF8([]byte(res.stderr[len(res.stderr)-commands.MaxStderrTail:]), nil))
	}
	return res
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, nil))
}

func (w *Worker) exec(ctx context.Context, item work.Item, st work.Step, r interval.Range, attempt int) execResult {
	runCtx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "sh", "-c", w.Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(),
		"TIDEMARK_MODEL="+st.Model, "TIDEMARK_VERSION="+st.Version, "TIDEMARK_SNAPSHOT="+st.Snapshot,
		"TIDEMARK_START="+r.Start.UTC().Format(time.RFC3339), "TIDEMARK_END="+r.End.UTC().Format(time.RFC3339),
		"TIDEMARK_RUN_KIND="+string(item.RunKind), "TIDEMARK_RUN_ID="+st.RunID, "TIDEMARK_ENV="+item.Env,
		"TIDEMARK_PLAN="+item.Plan, fmt.Sprintf("TIDEMARK_ATTEMPT=%d", attempt))
	errTail := &tail{n: commands.MaxStderrTail}
	out := lockedWriter{mu: &w.outMu, w: w.Output}
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(out, errTail)
	started := time.Now()
	err := cmd.Run()
	res := execResult{exit: -1, stderr: errTail.String()}
	if cmd.ProcessState != nil {
		res.exit = cmd.ProcessState.ExitCode()
	}
	switch {
	case err == nil:
		w.Logger.Info("worker: batch done", "snapshot", st.Snapshot, "range", r.String(), "run_kind", item.RunKind, "took", time.Since(started).Round(time.Millisecond))
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		res.err = fmt.Errorf("timed out after %s", w.Timeout)
	default:
		res.err = err
	}
	return res
}
