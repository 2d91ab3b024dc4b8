package work

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
)

// The in-process sink (Publisher.Runner set) is a bounded pool. The tail
// loop turns each command's events into items (Of) and hands them, with
// the place of their events in the stream, to the pool's coordinator,
// which starts attempts on Concurrency workers. Its rules:
//
//   - Order. An item starts only when no item queued before it and not
//     yet finished writes a table it writes or reads (Publisher.Tables;
//     without it, a step writes the table named by its snapshot and
//     reads none). So two ticks of one environment, a plan's backfill and
//     its catch-up, a child's work and its parent's earlier work keep
//     stream order, as when items ran one at a time; work on other tables
//     (another environment's plan, a poison model's retries, a plan that
//     only reads production's tables) runs beside it and never delays
//     it. An item does not wait for an earlier one that only reads what
//     it writes: each interval is written in one transaction, so the
//     reader sees it whole either way. Within an item the steps run in
//     their order (dependency order).
//   - Priority. The work that keeps environments fresh (run kinds
//     scheduled and repair) is started before plan work (backfill,
//     catch-up) whenever both are ready, and plan work runs on at most
//     Concurrency-1 workers: one worker is always left to scheduled and
//     repair work, so a plan's slow, failing or endless models cost
//     production's ticks nothing. The exception is plan work a queued
//     scheduled or repair item waits for (the order rule): it may take
//     the kept worker, as the waiting item could not start before it
//     anyway. With Concurrency 1 plan work may take the only worker.
//     Yielding: whenever scheduled or repair work is ready and every
//     worker is busy, the latest plan attempt running is asked to give
//     its worker back (Yielding): it starts no further batch, returns
//     ErrYielded once its batches in flight commit (each recorded), and
//     is taken up again later with the batches not done, the attempt not
//     counted. So a tick waits at most for the batches in flight (each
//     bounded by sqlrun.Runner.Timeout), never for a whole backfill. Priority only chooses among items the order rule
//     lets start: an item never overtakes an earlier one it must wait
//     for, and the cursor rule is unchanged. Within each class items
//     start in stream order (a retry keeps its place).
//   - Bounds. The pool holds at most maxQueued scheduled and repair items
//     (the tail waits while they are that many; the scheduler makes them
//     at its ticks' pace) and schedules at most maxQueuedPlan plan items;
//     later plan items are parked, in order, and scheduled as earlier
//     ones finish. The tail never waits for plan work, so a flood of
//     plans never keeps a tick out. A parked item is not scanned (only
//     the tables it writes are counted, which later scheduled and repair
//     items wait for, as the order rule says), but it is held in memory:
//     the plan work held is as much as users have built and not yet
//     finished or cancelled.
//   - Cancelled plans. The tail sees each PlanCancelled in stream order:
//     the plan's backfill and catch-up items are given up then (one
//     running is given up when its attempt returns; the Runner computes
//     nothing more of it).
//   - Bounded retries. An attempt whose steps failed to compute (the
//     Runner returns *ItemFailed: a warehouse error, a timeout) records
//     each failed step with fail_work (Reporter; command id FailedID,
//     derived from the item, the step and the attempt, so an attempt
//     reported again is recorded once) and the item is tried again with
//     only those steps and the steps that read them, after a backoff
//     (RetryBackoff, doubling, at most MaxBackoff), until Attempts
//     attempts; the last failure is recorded final and the item given up.
//     A timeout is not retried (it would take as long again): an attempt
//     in which a step timed out (TimedOut: the Runner's time for the
//     attempt, or the warehouse's for a computation, ran out) is the
//     item's last, its failures recorded final at once.
//     A transient refusal (Transient: the engine unavailable, a conflict)
//     is tried again, without counting, until ctx ends. Another refusal
//     (invalid, not found) gives the item up at once. A waiting retry
//     holds no worker.
//   - Cursor. The work cursor moves past a command's events only when
//     every item of them, and of every command before them, is finished
//     (done or given up): a restart resumes with the first unfinished
//     one, so work is neither lost nor, beyond what was in flight, done
//     again (and what is done again is recorded once).

// Defaults of the pool.
const (
	DefaultConcurrency = 2
	DefaultAttempts    = 5
	// DefaultRetryBackoff is the wait before an item's second attempt.
	DefaultRetryBackoff = time.Second
	// maxQueued bounds the scheduled and repair items the pool holds
	// (queued, running or waiting to retry); the tail waits while it is
	// full.
	maxQueued = 1024
)

// maxQueuedPlan bounds the plan items (backfill, catch-up) the pool
// schedules; later ones are parked (a variable for tests).
var maxQueuedPlan = 1024

// Tables is what computing a step touches: the table it writes and the
// tables it reads, by any names that are equal exactly when the tables
// are (tidemark table ids).
type Tables struct {
	Writes string
	Reads  []string
}

// TablesOf gives the tables of a snapshot's steps as known to a state
// that has applied at least event sequence seq (the item's event). An
// error (ctx ended) stops the publisher.
type TablesOf func(ctx context.Context, seq uint64, snapshot string) (Tables, error)

// StepFailure is a step of an item whose computation failed.
type StepFailure struct {
	// Step is the index of the step in Item.Steps.
	Step int
	Err  error
}

// ItemFailed is what a Runner returns when steps of an item failed to
// compute (a warehouse error, a timeout): Failed are those steps, Skipped
// the later steps of the item that read what a failed step writes and
// were not computed. Every other step was computed and recorded.
type ItemFailed struct {
	Failed  []StepFailure
	Skipped []int
}

func (e *ItemFailed) Error() string {
	if len(e.Failed) == 0 {
		return "work: no step failed"
	}
	msg := e.Failed[0].Err.Error()
	if n := len(e.Failed) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more step(s))", n)
	}
	return msg
}

// Unwrap is the steps' errors.
func (e *ItemFailed) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}

// FailedID is the command id of the failure of step i of item at attempt
// (in the engine's reserved namespace: only the engine's in-process
// worker records it).
func FailedID(item string, i, attempt int) string {
	return commands.InternalID("work", fmt.Sprintf("%s/%d/failed/%d", item, i, attempt))
}

// task is an item in the pool: the steps still to compute (the others'
// ranges are nil), the attempt it is at, and when it may start.
type task struct {
	item    Item
	tables  []Tables
	attempt int
	// waits counts transient failures in a row (their backoff).
	waits   int
	readyAt time.Time
	// ord is the item's place in the stream (the order of intake).
	ord     uint64
	plan    bool
	running bool
	// cancelled: its plan was cancelled while it ran.
	cancelled bool
	mark      *mark
	// yield asks the attempt running (plan work) to give its worker back
	// between batches (Yielding).
	yield atomic.Bool
}

// mark is a command's events: the cursor moves past them (last, unless
// mid: within a group message) once left, their unfinished items, is 0.
type mark struct {
	last uint64
	mid  bool
	left int
}

// batch is a command's items as the tail hands them to the pool, and the
// plans its events cancelled.
type batch struct {
	items     []Item
	tables    [][]Tables
	last      uint64
	mid       bool
	cancelled []string
}

// ErrPlanCancelled is why the pool gave up a cancelled plan's item.
var ErrPlanCancelled = errors.New("work: the plan was cancelled")

// ErrYielded is what a Runner returns when it stopped an attempt between
// batches because the pool asked it to (Yielding): the batches it
// committed are recorded, the rest are not computed, and the item is
// taken up again later, the attempt not counted.
var ErrYielded = errors.New("work: the attempt gave its worker back to fresher work")

type yieldKey struct{}

// WithYield is ctx carrying flag, which the attempt running with it polls
// between batches (Yielding): the pool sets it to have its worker back.
func WithYield(ctx context.Context, flag *atomic.Bool) context.Context {
	return context.WithValue(ctx, yieldKey{}, flag)
}

// Yielding reports whether the pool asks the attempt ctx belongs to to
// give its worker back: a Runner polls it between batches, and stops
// (ErrYielded) when it is set. It is set only on plan work, when
// scheduled or repair work is ready and every worker is busy.
func Yielding(ctx context.Context) bool {
	f, _ := ctx.Value(yieldKey{}).(*atomic.Bool)
	return f != nil && f.Load()
}

// ErrTimedOut marks a step that ran out of its time (a Runner wraps it in
// the step's error, with the warehouse's ErrTimeout or the deadline it
// set): running it again would take as long, so the pool does not retry
// it (TimedOut).
var ErrTimedOut = errors.New("work: timed out")

// TimedOut reports whether a step's error is its own timeout: ErrTimedOut,
// or a deadline exceeded within an attempt whose context had not ended
// (the pool asks only then).
func TimedOut(err error) bool {
	return errors.Is(err, ErrTimedOut) || errors.Is(err, context.DeadlineExceeded)
}

// planWork reports whether item is plan work (backfill, catch-up) of plan.
func planWork(item Item, plan string) bool {
	return item.Plan == plan && isPlanWork(item)
}

// isPlanWork reports whether item is plan work (backfill, catch-up): all
// but the work that keeps environments fresh (scheduled, repair,
// restate), which the pool takes first.
func isPlanWork(item Item) bool {
	return item.RunKind == events.RunBackfill || item.RunKind == events.RunCatchUp
}

type result struct {
	t   *task
	err error
}

// waitsFor reports whether t, queued after u, must wait for u to finish:
// u (in the steps it still has to compute) writes a table t writes or
// reads. A later item never waits for an earlier one that only reads
// what it writes: every interval is written in one transaction, so the
// earlier one reads each interval whole, before or after the write.
func (t *task) waitsFor(u *task) bool {
	for j, b := range u.item.Steps {
		if len(b.Ranges) == 0 {
			continue
		}
		w := u.tables[j].Writes
		for i, a := range t.item.Steps {
			if len(a.Ranges) > 0 && (t.tables[i].Writes == w || slices.Contains(t.tables[i].Reads, w)) {
				return true
			}
		}
	}
	return false
}

// writes adds to w the tables t still has to write.
func (t *task) writes(w map[string]int, add int) {
	for j, b := range t.item.Steps {
		if len(b.Ranges) > 0 {
			w[t.tables[j].Writes] += add
			if w[t.tables[j].Writes] == 0 {
				delete(w, t.tables[j].Writes)
			}
		}
	}
}

// waitsForAny reports whether t writes or reads a table in w.
func (t *task) waitsForAny(w map[string]int) bool {
	if len(w) == 0 {
		return false
	}
	for i, a := range t.item.Steps {
		if len(a.Ranges) == 0 {
			continue
		}
		if w[t.tables[i].Writes] > 0 {
			return true
		}
		for _, r := range t.tables[i].Reads {
			if w[r] > 0 {
				return true
			}
		}
	}
	return false
}

// tablesOf is the tables of item's steps.
func (p *Publisher) tablesOf(ctx context.Context, item Item) ([]Tables, error) {
	out := make([]Tables, len(item.Steps))
	for i, st := range item.Steps {
		if p.Tables == nil {
			out[i] = Tables{Writes: st.Snapshot}
			continue
		}
		t, err := p.Tables(ctx, item.EventSeq, st.Snapshot)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func (p *Publisher) concurrency() int {
	if p.Concurrency < 1 {
		return DefaultConcurrency
	}
	return p.Concurrency
}

func (p *Publisher) attempts() int {
	if p.Attempts < 1 {
		return DefaultAttempts
	}
	return p.Attempts
}

// backoff is the wait after the n-th failure in a row (n >= 1).
func (p *Publisher) backoff(n int) time.Duration {
	first, most := p.RetryBackoff, p.MaxBackoff
	if first <= 0 {
		first = DefaultRetryBackoff
	}
	if most <= 0 {
		most = 10 * time.Second
	}
	d := min(first, most)
	for i := 1; i < n && d < most; i++ {
		d = min(2*d, most)
	}
	return d
}

// pool runs the items of the batches from in until ctx ends, moving the
// cursor with save as commands' items finish.
func (p *Publisher) pool(ctx context.Context, in <-chan batch, save func(context.Context, uint64) error) error {
	n := p.concurrency()
	log := p.workerLog()
	ctx, cancel := context.WithCancel(ctx)
	tasks := make(chan *task, n)
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				err := p.attempt(ctx, log, t)
				select {
				case results <- result{t, err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		close(tasks)
		wg.Wait()
	}()

	// queue is the tasks scheduled, in stream order; parked, the plan
	// tasks beyond maxQueuedPlan, in stream order (all later than the
	// queue's plan tasks), with the tables they write (parkedWrites).
	var queue, parked []*task
	parkedWrites := map[string]int{}
	var marks []*mark
	var ord uint64
	free, planRunning := n, 0
	// Plan work leaves one worker to scheduled and repair work (with
	// n = 1 it may take the only one).
	planCap := max(n-1, 1)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	finish := func(t *task, err error) {
		queue = slices.DeleteFunc(queue, func(u *task) bool { return u == t })
		t.mark.left--
		if p.Done != nil {
			p.Done(t.item, err)
		}
	}
	start := func(t *task) {
		t.running = true
		free--
		if t.plan {
			planRunning++
		}
		tasks <- t
	}
	for {
		var cursor uint64
		for len(marks) > 0 && marks[0].left == 0 {
			if !marks[0].mid {
				cursor = marks[0].last
			}
			marks = marks[1:]
		}
		if cursor > 0 {
			if err := save(ctx, cursor); err != nil {
				return err
			}
		}
		// Parked plan tasks take the room plan tasks left, in order.
		planHeld := 0
		for _, t := range queue {
			if t.plan {
				planHeld++
			}
		}
		for ; len(parked) > 0 && planHeld < maxQueuedPlan; planHeld++ {
			t := parked[0]
			parked = parked[1:]
			t.writes(parkedWrites, -1)
			at, _ := slices.BinarySearchFunc(queue, t.ord, func(u *task, ord uint64) int { return cmp.Compare(u.ord, ord) })
			queue = slices.Insert(queue, at, t)
		}
		now := time.Now()
		var next time.Time
		// ready reports whether queue[i] may start now: not running, not
		// waiting to retry, and no earlier unfinished task (nor, for
		// scheduled or repair work, a parked one) writes what it writes
		// or reads.
		ready := func(i int) bool {
			t := queue[i]
			if t.running || t.readyAt.After(now) {
				return false
			}
			if slices.ContainsFunc(queue[:i], t.waitsFor) {
				return false
			}
			return t.plan || !t.waitsForAny(parkedWrites)
		}
		for _, t := range queue {
			if !t.running && t.readyAt.After(now) && (next.IsZero() || t.readyAt.Before(next)) {
				next = t.readyAt
			}
		}
		// Scheduled and repair work first, then plan work on at most
		// planCap workers, unless a scheduled or repair task waits for it.
		for i, t := range queue {
			if free == 0 {
				break
			}
			if !t.plan && ready(i) {
				start(t)
			}
		}
		for i, t := range queue {
			if free == 0 || planRunning >= planCap {
				break
			}
			if t.plan && ready(i) {
				start(t)
			}
		}
		for j, u := range queue {
			if free == 0 {
				break
			}
			if u.plan || u.running {
				continue
			}
			for i, t := range queue[:j] {
				if free > 0 && t.plan && u.waitsFor(t) && ready(i) {
					start(t)
				}
			}
		}
		// Fresher work waiting with every worker busy: the latest plan
		// attempt running gives its worker back at its next batch.
		fresher := false
		for i, u := range queue {
			if free == 0 && planRunning > 0 && !u.plan && ready(i) {
				fresher = true
				break
			}
		}
		if fresher {
			for i := len(queue) - 1; i >= 0; i-- {
				if t := queue[i]; t.plan && t.running {
					if !t.yield.Swap(true) {
						log.Info("built-in worker: plan work gives its worker back to scheduled work at its next batch", "item", t.item.ID)
					}
					break
				}
			}
		}
		// (Since Go 1.23 a stopped or reset timer delivers no stale tick.)
		timer.Stop()
		var wake <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			wake = timer.C
		}
		intake := in
		if len(queue)-planHeld >= maxQueued {
			intake = nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case b, ok := <-intake:
			if !ok {
				in = nil
				continue
			}
			m := &mark{last: b.last, mid: b.mid, left: len(b.items)}
			marks = append(marks, m)
			for i, it := range b.items {
				ord++
				t := &task{item: it, tables: b.tables[i], attempt: 1, mark: m, ord: ord, plan: isPlanWork(it)}
				if t.plan && (len(parked) > 0 || planHeld >= maxQueuedPlan) {
					parked = append(parked, t)
					t.writes(parkedWrites, +1)
					continue
				}
				if t.plan {
					planHeld++
				}
				queue = append(queue, t)
			}
			for _, plan := range b.cancelled {
				for _, t := range slices.Clone(parked) {
					if planWork(t.item, plan) {
						parked = slices.DeleteFunc(parked, func(u *task) bool { return u == t })
						t.writes(parkedWrites, -1)
						log.Info("built-in worker: plan cancelled; its item given up", "item", t.item.ID, "plan", plan)
						finish(t, ErrPlanCancelled)
					}
				}
				for _, t := range slices.Clone(queue) {
					if !planWork(t.item, plan) {
						continue
					}
					if t.running {
						t.cancelled = true
						continue
					}
					log.Info("built-in worker: plan cancelled; its item given up", "item", t.item.ID, "plan", plan)
					finish(t, ErrPlanCancelled)
				}
			}
		case r := <-results:
			free++
			t := r.t
			t.running = false
			if t.plan {
				planRunning--
			}
			t.yield.Store(false)
			var failed *ItemFailed
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(r.err, ErrYielded) && !t.cancelled:
				// Taken up again as soon as priority lets it; not an
				// attempt.
				log.Info("built-in worker: plan work yielded; it resumes with the batches not done", "item", t.item.ID)
			case t.cancelled:
				log.Info("built-in worker: plan cancelled; its item given up", "item", t.item.ID, "plan", t.item.Plan, "err", r.err)
				finish(t, ErrPlanCancelled)
			case r.err == nil:
				log.Debug("built-in worker: item done", "item", t.item.ID, "run_kind", t.item.RunKind, "attempt", t.attempt)
				finish(t, nil)
			case errors.As(r.err, &failed):
				if t.attempt >= p.attempts() || TimedOut(failed) {
					log.Error("built-in worker: item failed; giving it up", "item", t.item.ID, "run_kind", t.item.RunKind, "attempts", t.attempt, "err", r.err)
					finish(t, r.err)
					continue
				}
				retry := t.item
				retry.Steps = slices.Clone(t.item.Steps)
				keep := map[int]bool{}
				for _, f := range failed.Failed {
					keep[f.Step] = true
				}
				for _, s := range failed.Skipped {
					keep[s] = true
				}
				for i := range retry.Steps {
					if !keep[i] {
						retry.Steps[i].Ranges = nil
					}
				}
				t.item, t.waits = retry, 0
				wait := p.backoff(t.attempt)
				t.attempt++
				t.readyAt = time.Now().Add(wait)
				log.Warn("built-in worker: item failed; trying it again", "item", t.item.ID, "run_kind", t.item.RunKind, "attempt", t.attempt, "in", wait, "err", r.err)
			case Transient(r.err):
				t.waits++
				wait := p.backoff(t.waits)
				t.readyAt = time.Now().Add(wait)
				log.Warn("built-in worker: running "+t.item.ID+"; retrying", "err", r.err, "in", wait)
			default:
				log.Error("built-in worker: item rejected; giving it up", "item", t.item.ID, "run_kind", t.item.RunKind, "err", r.err)
				finish(t, r.err)
			}
		}
	}
}

func (p *Publisher) workerLog() *slog.Logger {
	log := p.logger().With("subsystem", "worker")
	if a, ok := p.Runner.(interface{ ActorName() string }); ok {
		log = log.With("actor", a.ActorName())
	}
	return log
}

// attempt runs t once and records the steps that failed.
func (p *Publisher) attempt(ctx context.Context, log *slog.Logger, t *task) error {
	if p.Stats != nil {
		p.Stats.Begin()
	}
	at := p.now()
	if t.plan {
		ctx = WithYield(ctx, &t.yield)
	}
	err := p.Runner.Run(ctx, t.item, at)
	if ctx.Err() != nil {
		// Stopped: not a failure of the item.
		if p.Stats != nil {
			p.Stats.End(nil)
		}
		return ctx.Err()
	}
	var failed *ItemFailed
	if errors.As(err, &failed) {
		p.report(ctx, log, t, failed, at)
	}
	if p.Stats != nil {
		p.Stats.End(err)
	}
	return err
}

// report records each failed step of t's attempt (fail_work), final at
// the last attempt.
func (p *Publisher) report(ctx context.Context, log *slog.Logger, t *task, failed *ItemFailed, at time.Time) {
	actor := "worker:builtin"
	if a, ok := p.Runner.(interface{ ActorName() string }); ok && a.ActorName() != "" {
		actor = a.ActorName()
	}
	for _, f := range failed.Failed {
		if f.Step < 0 || f.Step >= len(t.item.Steps) {
			continue
		}
		st := t.item.Steps[f.Step]
		// A timed-out attempt is the last (pool).
		final := t.attempt >= p.attempts() || TimedOut(failed)
		log.Warn("built-in worker: step failed", "item", t.item.ID, "snapshot", st.Snapshot, "attempt", t.attempt, "final", final, "err", f.Err)
		if p.Reporter == nil || t.item.ID == "" || len(st.Ranges) == 0 {
			continue
		}
		ranges := st.Ranges[:min(len(st.Ranges), commands.MaxRanges)]
		cmd := &commands.FailWork{FailRun: commands.FailRun{
			Meta:  commands.Meta{ID: FailedID(t.item.ID, f.Step, t.attempt), Actor: actor, At: at, Correlation: st.RunID},
			Model: st.Model, Version: st.Version, Ranges: ranges, RunKind: t.item.RunKind, RunID: st.RunID,
			Worker: strings.TrimPrefix(actor, "worker:"), ExitStatus: -1, Error: commands.BoundText(f.Err.Error(), commands.MaxErrorText),
			Attempt: t.attempt, Final: final, Work: t.item.ID,
		}}
		var refused error
		err := p.retry(ctx, "built-in worker: recording the failure of "+t.item.ID, func() error {
			err := p.Reporter.Handle(ctx, cmd).Err()
			if err != nil && !Transient(err) {
				refused = err
				return nil
			}
			return err
		})
		if err == nil && refused != nil {
			log.Error("built-in worker: the failure of a step could not be recorded", "item", t.item.ID, "snapshot", st.Snapshot, "err", refused)
		}
	}
}
