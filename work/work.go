// Package work is the worker protocol: the work items the engine's events
// make due (Of), the work-queue stream and consumer they travel on, and the
// Publisher that derives them from the event stream and hands them to
// workers (work/shell) or runs them in-process (a Runner, work/inproc).
// The Publisher takes the engine's parts as fields, never the engine: Log
// (the *eventlog.Log it follows and keeps its cursor beside), Clock,
// Logger, and Reporter (the commands.Handler that records failures).
//
// Importers: work/shell, work/inproc, work/sqlrun, scheduler, server,
// scenario, bench, cmd/tidemark.
package work

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// The work protocol. The engine turns the events that make work due — a
// scheduler tick's advances, a plan's backfill set, a catch-up request —
// into Items on the work-queue stream TIDEMARK_WORK, subject
// tidemark.work.<run_kind>, JSON encoded. Workers (tidemark worker, or any
// process that speaks this) pull them, compute each step in order, report
// each computed range with complete_work and each failure with fail_work
// (both name the item, and the engine checks them against it), and ack
// the item when every step is done. An item not acked
// within the ack wait is redelivered. A step of an SQL model carries its
// SQL (Step.SQL, filled by Publisher.SQL), enough for a worker to write
// it into the warehouse itself (work/sqlrun.Computer). Workers announce
// themselves with heartbeats (liveness.go). docs/events.md ("Work for
// workers") is the protocol's reference.
const (
	Stream        = "TIDEMARK_WORK"
	SubjectPrefix = "tidemark.work."
	// Consumer is the durable consumer all workers share. The engine
	// provisions it (Publisher.Prepare); workers only bind to it
	// (docs/auth.conf gives them no consumer create or update).
	Consumer = "tidemark-workers"
	// DefaultAckWait and DefaultMaxDeliver configure Consumer
	// unless the publisher says otherwise.
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 5
	// DuplicateWindow is the work stream's Nats-Msg-Id deduplication window:
	// replicas publishing the same work item within it store it once.
	DuplicateWindow = 5 * time.Minute
	// FormatKey is the work consumer's metadata key naming the work
	// format serve publishes (Format); workers read it when they bind.
	FormatKey = "tidemark.work_format"
	// Format is this build's work format: "2", items published as their
	// batches (Item.Batch) and completions carrying rows. A consumer
	// without FormatKey was provisioned by an older serve (whole items,
	// completions without rows): a worker then reports no rows.
	Format = "2"
	// cursorKey in the checkpoint bucket holds the last event sequence
	// the publisher has turned into work.
	cursorKey = "work_cursor"
)

// Subject is the subject of work of a run kind.
func Subject(kind events.RunKind) string { return SubjectPrefix + string(kind) }

// Item is one unit of work: steps computed in order (dependency
// order), by one worker.
type Item struct {
	// ID identifies the item; a batch of it is published with Nats-Msg-Id
	// Key().
	ID      string         `msgpack:"id" json:"id"`
	RunKind events.RunKind `msgpack:"run_kind" json:"run_kind"`
	Env     string         `msgpack:"env,omitempty" json:"env,omitempty"`
	Plan    string         `msgpack:"plan,omitempty" json:"plan,omitempty"`
	// EventSeq is the stream sequence of the first event that made the
	// work due.
	EventSeq uint64 `msgpack:"event_seq" json:"event_seq"`
	// At is when the work became due (the event's time).
	At    time.Time `msgpack:"at" json:"at"`
	Steps []Step    `msgpack:"steps" json:"steps"`
	// Batch, on a published message, names the batch it carries (Split):
	// "<step>/<batch>", the index of its step in the item and of the
	// batch in that step; Steps then holds that one step with that one
	// range. Empty: the whole item (the in-process sink).
	Batch string `msgpack:"batch,omitempty" json:"batch,omitempty"`
}

// Step is one model's ranges within an Item. A worker runs its
// command once per range (a contiguous batch).
type Step struct {
	Model    string           `msgpack:"model" json:"model"`
	Version  string           `msgpack:"version" json:"version"`
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	RunID    string           `msgpack:"run_id" json:"run_id"`
	// SQL is how to compute the step in the warehouse, for a model with
	// SQL, in items published to workers (Publisher.SQL); nil otherwise.
	SQL *SQL `msgpack:"sql,omitempty" json:"sql,omitempty"`
}

func step(snapshot string, ranges []interval.Range, runID string) Step {
	m, v, _ := events.ParseSnapshotID(snapshot)
	return Step{Model: m, Version: v, Snapshot: snapshot, Ranges: ranges, RunID: runID}
}

// Scheduled is the work of one tick's advances: per advance, its open
// repair debt first, then the rest.
func Scheduled(advs []events.SchedulerAdvanced) Item {
	item := Item{RunKind: events.RunScheduled}
	for _, a := range advs {
		item.Env = a.Env
		runID := "sched:" + a.Snapshot + ":" + a.Tick.Format(time.RFC3339)
		rest := interval.Set(a.Ranges)
		if len(a.Repairs) > 0 {
			item.Steps = append(item.Steps, step(a.Snapshot, a.Repairs, runID+":repair"))
			rest = rest.SubtractSet(a.Repairs)
		}
		if !rest.Empty() {
			item.Steps = append(item.Steps, step(a.Snapshot, rest, runID))
		}
	}
	return item
}

// Backfill is a plan's backfill set (fixed at build), in dependency
// order.
func Backfill(plan events.PlanBuilt) Item {
	item := Item{RunKind: events.RunBackfill, Env: plan.Env, Plan: plan.Plan}
	for _, c := range plan.Candidates {
		if set := interval.Set(c.Backfill); !set.Empty() {
			item.Steps = append(item.Steps, step(c.Snapshot, set, events.PlanRunID(events.RunBackfill, plan.Plan)))
		}
	}
	return item
}

// BackfillThrough is Backfill as st sees it now, stopped early: each
// candidate's set is cut at through floored to that candidate's unit, so
// a worker is only ever sent whole intervals (a zero through cuts
// nothing); a candidate whose table an incumbent of the plan's env serves
// meanwhile gets no step (decide.ForeignTable).
func BackfillThrough(st *projections.State, plan events.PlanBuilt, through time.Time) Item {
	cands := make([]events.Candidate, len(plan.Candidates))
	for i, c := range plan.Candidates {
		if decide.ForeignTable(st, plan.Plan, c.Snapshot) != "" {
			c.Backfill = nil
			cands[i] = c
			continue
		}
		if through.IsZero() {
			cands[i] = c
			continue
		}
		end := through
		if sn, ok := st.Snapshots[c.Snapshot]; ok {
			end = sn.Schedule.Unit().Floor(through)
		}
		set := interval.Set(c.Backfill)
		c.Backfill = set.Clip(interval.R(set.Start(), end))
		cands[i] = c
	}
	plan.Candidates = cands
	return Backfill(plan)
}

// CatchUp is a catch-up request's work: each candidate's suffix and
// the downstream intervals it invalidated, after the upstream suffix.
func CatchUp(req events.CatchUpRequested) Item {
	item := Item{RunKind: events.RunCatchUp, Env: req.Env, Plan: req.Plan}
	for _, w := range req.Work {
		if set := interval.NewSet(w.Ranges...).AddSet(w.Recompute); !set.Empty() {
			item.Steps = append(item.Steps, step(w.Snapshot, set, events.PlanRunID(events.RunCatchUp, req.Plan)))
		}
	}
	return item
}

// RepairItem is the repair work an accepted decision issued: per
// candidate accepted with a gap, the intervals that close its debt, in
// dependency order.
func RepairItem(d events.PromotionDecided) Item {
	item := Item{RunKind: events.RunRepair, Env: d.Env, Plan: d.Plan}
	for _, w := range d.Repairs {
		if len(w.Ranges) > 0 {
			item.Steps = append(item.Steps, step(w.Snapshot, w.Ranges, events.PlanRunID(events.RunRepair, d.Plan)))
		}
	}
	return item
}

// RestateItem is a restatement's work: per model, the intervals it
// invalidated (and those ready and missing in its range), the restated
// model first, then its downstream models in dependency order (a child's
// batches wait for its parent's overlapping ones: Split).
func RestateItem(r events.RestatementRequested) Item {
	item := Item{RunKind: events.RunRestate, Env: r.Env}
	for _, w := range r.Work {
		if len(w.Ranges) > 0 {
			item.Steps = append(item.Steps, step(w.Snapshot, w.Ranges, r.Run))
		}
	}
	return item
}

// Of turns one command's events (consecutive, same causation) into
// the work they make due, if any: a plan's backfill, a tick's advances, a
// catch-up request, the repair an acceptance issued, a restatement. Undecodable records
// make no work.
func Of(group []events.Record) []Item {
	var out []Item
	var advs []events.SchedulerAdvanced
	first := uint64(0)
	for _, r := range group {
		if r.Err != nil {
			continue
		}
		var item Item
		switch p := r.Event.Payload.(type) {
		case events.SchedulerAdvanced:
			if first == 0 {
				first = r.Seq
			}
			advs = append(advs, p)
			continue
		case events.PlanBuilt:
			item = Backfill(p)
		case events.CatchUpRequested:
			item = CatchUp(p)
		case events.PromotionDecided:
			item = RepairItem(p)
		case events.RestatementRequested:
			item = RestateItem(p)
		default:
			continue
		}
		item.EventSeq, item.At = r.Seq, r.Event.OccurredAt
		out = append(out, item)
	}
	if len(advs) > 0 {
		item := Scheduled(advs)
		item.EventSeq, item.At = first, group[0].Event.OccurredAt
		out = append(out, item)
	}
	var kept []Item
	for _, it := range out {
		if len(it.Steps) > 0 {
			// The projection keeps the same item under the same id
			// (projections.State.Work): a worker's report is checked
			// against it.
			it.ID = events.WorkID(it.EventSeq, it.RunKind)
			kept = append(kept, it)
		}
	}
	return kept
}

// StreamConfig is the configuration of the work-queue stream.
func StreamConfig(replicas int, memory bool) jetstream.StreamConfig {
	cfg := eventlog.StreamConfig(replicas, memory)
	return jetstream.StreamConfig{
		Name: Stream, Description: "tidemark work for workers: backfill, scheduled and catch-up runs",
		Subjects: []string{SubjectPrefix + ">"}, Storage: cfg.Storage, Replicas: cfg.Replicas,
		Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew, MaxMsgs: -1, MaxBytes: -1,
		Duplicates: DuplicateWindow,
	}
}

// ConsumerConfig is the configuration of the durable consumer the
// workers share: explicit acks, an item redelivered after ackWait without
// an ack or heartbeat, at most maxDeliver deliveries.
func ConsumerConfig(ackWait time.Duration, maxDeliver int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: Consumer, Description: "tidemark workers (provisioned by the engine)", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxDeliver: maxDeliver, MaxAckPending: 1000,
	}
}

// Publisher follows the event stream and hands the work it makes due
// (Of, one command's events at a time, in stream order) to a sink:
// by default it publishes each item to TIDEMARK_WORK for `tidemark worker`
// processes; with Runner set it runs the items in-process instead (the
// built-in worker of `serve --builtin-worker`), on a bounded pool of
// Concurrency workers with bounded retries (pool.go states its rules:
// which items may run beside which, how failures are retried and
// recorded, when the cursor moves).
//
// The cursor: the publisher keeps the last event sequence it has turned
// into work in the log's state bucket (key work_cursor, shared by both
// sinks, so switching between them neither loses nor repeats work; the
// bucket is there whether or not the engine writes checkpoints, since
// eventlog.Ensure creates it with the stream). On
// its very first start it begins at the stream's end: history is not
// work. After a restart it resumes after the cursor, so work made due
// while it was down (a plan built, a tick recorded, a catch-up requested
// through another replica) is still done. The cursor moves only after
// every item of a command's events, and of every command before them, is
// published or finished in-process; an item interrupted by a stop is
// delivered again after the restart. Each published batch carries a
// Nats-Msg-Id derived from the event sequence and the batch (Item.Key: a
// restart within the duplicate window publishes nothing twice); each in-process completion
// and failure carries a command id derived from the item id and step
// (and attempt), so an item run again (after a restart, or by another
// replica's built-in worker) is recorded once.
type Publisher struct {
	// Log is the event log the publisher follows (the engine's,
	// Engine.Log): its reader (Tail, LastSeq), its state bucket (the
	// cursor), and its JetStream handle, Config and Retry (the work
	// stream and consumer Prepare provisions follow its replicas and
	// storage). Nil: the publisher follows nothing, and Prepare and Run
	// refuse with ErrNoLog; only its in-process pool runs (fed directly,
	// as the pool tests do).
	Log *eventlog.Log
	// Clock gives the time in-process items are run at and exhausted
	// work is recorded at. Default time.Now (serve: the engine's,
	// Engine.Now).
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Runner, when set, is the in-process sink: items are run with
	// Runner.Run instead of being published, and TIDEMARK_WORK is not
	// used.
	Runner Runner
	// SQL, when set, fills each published step's SQL (the warehouse
	// computation of an SQL model) so that workers can compute it; in-
	// process items are not changed.
	SQL SQLOf
	// Published, when set, is called after each item is stored.
	Published func(Item)
	// Done, when set, is called after each item run in-process is
	// finished: err is nil, or why it was given up (a rejection, or its
	// last attempt's *ItemFailed).
	Done func(item Item, err error)
	// MaxBackoff caps the wait between attempts of an item (failed, or
	// refused for a reason that may pass: unavailable, conflict,
	// internal). Default 10s.
	MaxBackoff time.Duration
	// AckWait and MaxDeliver configure the work consumer Prepare
	// provisions (ConsumerConfig). Defaults DefaultAckWait and
	// DefaultMaxDeliver.
	AckWait    time.Duration
	MaxDeliver int
	// Metadata is set on that consumer (workers read it when they bind:
	// serve records its layout there).
	Metadata map[string]string
	// Progress, when set, gives what each item's reports have recorded
	// done (the engine's projection). With it, each published item is cut
	// into batches (Split, batch.go), one message each, and a batch that
	// reads an earlier step's table is held until the batches of that step
	// overlapping its range are done; without it, items are published
	// whole.
	Progress DoneOf
	// Gone, when set, says why a step's work is no longer wanted (its
	// plan was cancelled): a restart deriving an item again publishes none
	// of such a step's batches (they would be refused).
	Gone GoneOf
	// BatchConcurrency bounds the batches of an SQL step published and
	// not yet done when its model sets no batch_concurrency (serve: its
	// warehouse's default); 0: unbounded.
	BatchConcurrency int

	// Concurrency is how many items the in-process sink runs at once.
	// Default DefaultConcurrency.
	Concurrency int
	// Attempts bounds the attempts at an in-process item whose steps fail
	// to compute (*ItemFailed); the last failure is recorded final and the
	// item given up. Default DefaultAttempts.
	Attempts int
	// RetryBackoff is the wait before an in-process item's second attempt;
	// it doubles with each failure, up to MaxBackoff. Default
	// DefaultRetryBackoff.
	RetryBackoff time.Duration
	// Reporter, when set, records each failed step of an in-process item
	// (fail_work, a RunFailed event with the error's text): the engine.
	Reporter commands.Handler
	// Tables, when set, gives what each step writes and reads, which
	// decides the items that may run beside each other (pool.go).
	Tables TablesOf
	// Stats, when set, counts the in-process attempts (the built-in
	// worker's heartbeat).
	Stats *Stats

	prepared bool
	start    uint64
	// waiting holds, per item id, the published sink's batches waiting for
	// their parents' (Progress), in order; the cursor stays before their
	// item's event while any wait.
	waiting map[string]*held
}

// held is an item whose batches the published sink is admitting: those
// not published yet (in order), the run ids and batch_concurrency of its
// steps, and per step with a bound the batches published and not known
// done.
type held struct {
	item      Item
	runs      []string
	limits    []int
	parts     []Part
	published map[int][]interval.Range
}

// Runner runs a work item in-process (work/inproc, work/sqlrun): each
// step with ranges, in order. Steps whose computation failed are returned
// as an *ItemFailed (the others are recorded); any other error is the
// engine's refusal, or a stop. Run is called by several of the pool's
// workers at once, for items that touch no common table.
type Runner interface {
	Run(ctx context.Context, item Item, at time.Time) error
}

// ErrNoLog refuses Prepare and Run of a Publisher without a Log: there is
// no stream to follow and no bucket for the cursor.
var ErrNoLog = errors.New("work: the publisher has no event log to follow (Publisher.Log is nil)")

// now is the publisher's clock, in UTC.
func (p *Publisher) now() time.Time {
	if p.Clock == nil {
		return time.Now().UTC()
	}
	return p.Clock().UTC()
}

// logger is the publisher's logger.
func (p *Publisher) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// minBackoff is the first wait before an item is attempted again.
const minBackoff = 100 * time.Millisecond

// Prepare creates the work stream and the durable consumer the workers
// share (neither is needed in-process), and fixes where the publisher
// starts. Call it before the engine accepts commands (serve does): on a
// first start the publisher begins at the stream's end as of now, and a
// command accepted before that point would make no work.
func (p *Publisher) Prepare(ctx context.Context) error {
	e := p.Log
	if e == nil {
		return ErrNoLog
	}
	if p.Runner == nil {
		cfg := e.Config()
		if err := e.Retry(ctx, func(ctx context.Context) error {
			_, err := e.JetStream().CreateOrUpdateStream(ctx, StreamConfig(cfg.Replicas, cfg.Memory))
			return err
		}); err != nil {
			return fmt.Errorf("engine: work stream: %w", err)
		}
		ackWait, maxDeliver := p.AckWait, p.MaxDeliver
		if ackWait <= 0 {
			ackWait = DefaultAckWait
		}
		if maxDeliver == 0 {
			maxDeliver = DefaultMaxDeliver
		}
		if err := e.Retry(ctx, func(ctx context.Context) error {
			cfg := ConsumerConfig(ackWait, maxDeliver)
			cfg.Metadata = map[string]string{FormatKey: Format}
			for k, v := range p.Metadata {
				cfg.Metadata[k] = v
			}
			_, err := e.JetStream().CreateOrUpdateConsumer(ctx, Stream, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("engine: work consumer %s: %w", Consumer, err)
		}
	}
	cursor, err := p.cursor(ctx)
	if err != nil {
		return err
	}
	p.start, p.prepared = cursor, true
	return nil
}

// Run follows the stream until ctx ends (preparing first if Prepare was
// not called since the last Run). Run again after a stop (serve runs it
// each time its engine becomes the writer), it prepares again: it starts
// after the cursor as saved now, which another writer's publisher may
// have moved meanwhile, and holds no batch from before (the items whose
// batches still wait are derived again after the cursor).
func (p *Publisher) Run(ctx context.Context) error {
	e := p.Log
	if !p.prepared { // Prepare refuses a Publisher without a Log
		if err := p.Prepare(ctx); err != nil {
			return err
		}
	}
	cursor := p.start
	p.prepared, p.waiting = false, nil
	log := p.logger().With("subsystem", "work")
	if p.Runner == nil {
		unwatch, err := p.watchExhausted(ctx, log)
		if err != nil {
			return err
		}
		defer unwatch()
	}
	save := func(ctx context.Context, last uint64) error {
		return p.retry(ctx, "saving the work cursor", func() error {
			_, err := e.Bucket().Put(ctx, cursorKey, []byte(strconv.FormatUint(last, 10)))
			return err
		})
	}
	// The in-process sink: the pool runs the items while the tail reads
	// on.
	var batches chan batch
	var pooled chan error
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	if p.Runner != nil {
		batches, pooled = make(chan batch), make(chan error, 1)
		go func() {
			pooled <- p.pool(tctx, batches, save)
			stop()
		}()
		defer func() { <-pooled }()
	}
	var group []events.Record
	// flush delivers the work of the group, then moves the cursor past it;
	// it fails only when ctx ends (the cursor then stays put).
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		items := Of(group)
		cancelled := cancelledBy(group)
		var woken wake
		if batches == nil && len(p.waiting) > 0 {
			woken = wakeBy(group)
		}
		end := group[len(group)-1]
		last := end.Seq
		group = group[:0]
		// Within a group message (eventlog.GroupSubject) the cursor moves
		// past it only at its last event: one before it is not all of seq.
		midGroup := end.Count > 0 && end.Index < end.Count-1
		if batches != nil {
			b := batch{items: items, last: last, mid: midGroup, cancelled: cancelled}
			for _, item := range items {
				t, err := p.tablesOf(tctx, item)
				if err != nil {
					return err
				}
				b.tables = append(b.tables, t)
			}
			select {
			case batches <- b:
				return nil
			case <-tctx.Done():
				return tctx.Err()
			}
		}
		for _, item := range items {
			if err := p.deliver(tctx, item); err != nil {
				return err
			}
		}
		woken.cancelled = cancelled
		if err := p.wake(tctx, woken, last); err != nil {
			return err
		}
		if midGroup {
			return nil
		}
		return save(tctx, p.hold(last))
	}
	err := e.Reader().WithLogger(log).Tail(tctx, cursor+1, func(en eventlog.Entry) error {
		rec := en.Record
		if rec.Err != nil {
			// Not this build's event (or a time out of range): it makes
			// no work, and the work after it is still delivered.
			log.Error("event cannot be decoded; it makes no work", "seq", rec.Seq, "subject", rec.Subject, "err", rec.Err)
			rec.Event = events.Event{}
		}
		if len(group) > 0 && group[0].Event.Causation != rec.Event.Causation {
			if err := flush(); err != nil {
				return err
			}
		}
		group = append(group, rec)
		// A command's events are one atomic batch, each marked "i/n": the
		// group is complete at its last event.
		if en.Last() {
			return flush()
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if pooled != nil && tctx.Err() != nil {
		stop()
		perr := <-pooled
		pooled <- perr
		return fmt.Errorf("work: publisher: %w", perr)
	}
	return fmt.Errorf("work: publisher: %w", err)
}

// cancelledBy is the plans the group's events cancel.
func cancelledBy(group []events.Record) []string {
	var out []string
	for _, r := range group {
		if p, ok := r.Event.Payload.(events.PlanCancelled); ok && r.Err == nil {
			out = append(out, p.Plan)
		}
	}
	return out
}

// deliver publishes item until that succeeds or ctx ends: whole, or
// (Progress set) as its batches (admit), those already done (a restart
// re-deriving the item) left out.
func (p *Publisher) deliver(ctx context.Context, item Item) error {
	return p.retry(ctx, "publishing work", func() error {
		described, err := describe(ctx, p.SQL, item)
		if err != nil {
			return err
		}
		if p.Progress == nil {
			return p.publish(ctx, described)
		}
		tables, err := p.tablesOf(ctx, described)
		if err != nil {
			return err
		}
		h := &held{item: item, published: map[int][]interval.Range{}}
		for _, st := range described.Steps {
			h.runs = append(h.runs, st.RunID)
			lim := 0
			if st.SQL != nil {
				lim = cmp.Or(st.SQL.BatchConcurrency, p.BatchConcurrency)
			}
			h.limits = append(h.limits, lim)
		}
		progress := p.progressOnce()
		gone := map[int]bool{}
		for i, st := range described.Steps {
			if p.Gone == nil {
				break
			}
			why, err := p.Gone(ctx, item.EventSeq, item.RunKind, st.RunID)
			if err != nil {
				return err
			}
			if why != "" {
				gone[i] = true
				p.logger().Info("work no longer wanted not published", "subsystem", "work", "item", item.ID, "snapshot", st.Snapshot, "why", why)
			}
		}
		for _, part := range Split(described, tables) {
			if gone[part.Step] {
				continue
			}
			done, err := part.isDone(ctx, progress, item.EventSeq)
			if err != nil {
				return err
			}
			if !done {
				h.parts = append(h.parts, part)
			}
		}
		if err := p.admit(ctx, h, item.EventSeq); err != nil {
			return err
		}
		if len(h.parts) > 0 {
			if p.waiting == nil {
				p.waiting = map[string]*held{}
			}
			p.waiting[item.ID] = h
		}
		return nil
	})
}

// admit publishes, in order, each of h's batches that may start now, as
// a state at seq knows the item's progress: the batches of earlier steps
// it reads are done (Part.Needs), and fewer of its own step's batches
// are published and not done than the step's batch_concurrency. The
// others stay in h.parts.
func (p *Publisher) admit(ctx context.Context, h *held, seq uint64) error {
	progress := p.progressOnce()
	inFlight := map[int]int{}
	for step, rs := range h.published {
		if h.limits[step] <= 0 {
			continue
		}
		done, err := progress(ctx, seq, h.item.ID, h.item.Steps[step].Snapshot)
		if err != nil {
			return err
		}
		rs = slices.DeleteFunc(rs, done.Covers)
		h.published[step], inFlight[step] = rs, len(rs)
	}
	var still []Part
	for i, part := range h.parts {
		if lim := h.limits[part.Step]; lim > 0 && inFlight[part.Step] >= lim {
			still = append(still, part)
			continue
		}
		ready, err := part.ready(ctx, progress, seq)
		if err == nil && ready {
			err = p.publish(ctx, part.Item)
		}
		if err != nil {
			h.parts = append(still, h.parts[i:]...)
			return err
		}
		if !ready {
			still = append(still, part)
			continue
		}
		if h.limits[part.Step] > 0 {
			h.published[part.Step] = append(h.published[part.Step], part.Item.Steps[0].Ranges[0])
			inFlight[part.Step]++
		}
	}
	h.parts = still
	return nil
}

// progressOnce is Progress asked at most once per item and snapshot: one
// pass over an item's batches reads each step's progress once, not once
// per batch.
func (p *Publisher) progressOnce() DoneOf {
	memo := map[[2]string]interval.Set{}
	return func(ctx context.Context, seq uint64, id, snapshot string) (interval.Set, error) {
		k := [2]string{id, snapshot}
		if s, ok := memo[k]; ok {
			return s, nil
		}
		s, err := p.Progress(ctx, seq, id, snapshot)
		if err == nil {
			memo[k] = s
		}
		return s, err
	}
}

// GoneOf says why the work of run runID (of run kind kind) is no longer
// wanted, "" when it is, as known to a state that has applied at least
// seq.
type GoneOf func(ctx context.Context, seq uint64, kind events.RunKind, runID string) (string, error)

// wake is what a command's events change for the batches waiting: the
// items they report batches of done, the runs they record failed for
// good, the plans they cancel.
type wake struct {
	done map[string]bool
	// failed holds, per work item id, its batches recorded failed for
	// good; failedRuns the runs (run kind + " " + run id) of final
	// failures naming no item.
	failed     map[string][]events.RunFailed
	failedRuns map[string]bool
	cancelled  []string
}

// wakeBy is what group changes for waiting batches.
func wakeBy(group []events.Record) wake {
	var w wake
	for _, r := range group {
		if r.Err != nil {
			continue
		}
		switch e := r.Event.Payload.(type) {
		case events.IntervalsCompleted:
			if e.Work != "" {
				if w.done == nil {
					w.done = map[string]bool{}
				}
				w.done[e.Work] = true
			}
		case events.RunFailed:
			switch {
			case !e.Final:
			case e.Work != "":
				if w.failed == nil {
					w.failed = map[string][]events.RunFailed{}
				}
				w.failed[e.Work] = append(w.failed[e.Work], e)
			default:
				if w.failedRuns == nil {
					w.failedRuns = map[string]bool{}
				}
				w.failedRuns[string(e.RunKind)+" "+e.RunID] = true
			}
		}
	}
	return w
}

// wake publishes the waiting batches of the items w reports done whose
// parents are now done, as a state at seq knows them; gives up the
// waiting batches of a step w records a batch of failed for good, and
// those that read it (transitively), which will not be written (the
// item's other steps go on: a failed batch no longer counts against its
// step's batch_concurrency);
// and gives up the waiting batches of the plans w cancels, and of items
// a run of which failed for good naming no item. Items are taken in
// stream order (their events'), so the batches woken go out oldest item
// first whatever order the map holds them in.
func (p *Publisher) wake(ctx context.Context, w wake, seq uint64) error {
	if len(p.waiting) == 0 || len(w.done) == 0 && len(w.failed) == 0 && len(w.failedRuns) == 0 && len(w.cancelled) == 0 {
		return nil
	}
	log := p.logger().With("subsystem", "work")
	ids := make([]string, 0, len(p.waiting))
	for id := range p.waiting {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(p.waiting[a].item.EventSeq, p.waiting[b].item.EventSeq), strings.Compare(a, b))
	})
	for _, id := range ids {
		h := p.waiting[id]
		item := h.item
		if slices.Contains(w.cancelled, item.Plan) && (item.RunKind == events.RunBackfill || item.RunKind == events.RunCatchUp) {
			log.Info("batches of a cancelled plan not published", "item", id, "batches", len(h.parts))
			delete(p.waiting, id)
			continue
		}
		// A failure naming no item (fail_run, or one recorded before
		// failures named their item): matched by its run.
		if i := slices.IndexFunc(h.runs, func(run string) bool { return w.failedRuns[string(item.RunKind)+" "+run] }); i >= 0 {
			log.Warn("batches not published: a batch of their item failed for good", "item", id, "run_id", h.runs[i], "batches", len(h.parts))
			delete(p.waiting, id)
			continue
		}
		if fs := w.failed[id]; len(fs) > 0 {
			if dropped := h.failed(fs); dropped > 0 {
				log.Warn("batches not published: they read a batch that failed for good", "item", id, "batches", dropped, "failed", fs[0].Snapshot)
			}
		} else if !w.done[id] {
			continue
		}
		if err := p.retry(ctx, "publishing work", func() error { return p.admit(ctx, h, seq) }); err != nil {
			return err
		}
		if len(h.parts) == 0 {
			delete(p.waiting, id)
		}
	}
	return nil
}

// failed takes fs, final failures of h's batches, into account: their
// ranges no longer count as in flight, and the waiting batches of a
// failed snapshot, or that need one, or a snapshot of a batch so given
// up, are given up (parts are in step order: one pass is transitive);
// other steps' batches go on. It returns how many were given up.
func (h *held) failed(fs []events.RunFailed) int {
	dead := map[string]bool{}
	for _, f := range fs {
		dead[f.Snapshot] = true
		for step, st := range h.item.Steps {
			if st.Snapshot == f.Snapshot {
				failed := interval.NewSet(f.Ranges...)
				h.published[step] = slices.DeleteFunc(h.published[step], failed.Overlaps)
			}
		}
	}
	n := len(h.parts)
	h.parts = slices.DeleteFunc(h.parts, func(part Part) bool {
		if dead[part.Item.Steps[0].Snapshot] {
			return true // the failed step's other batches: its model fails them too, as the built-in worker stops a step at its first failure
		}
		for snap := range part.Needs {
			if dead[snap] {
				dead[part.Item.Steps[0].Snapshot] = true
				return true
			}
		}
		return false
	})
	return n - len(h.parts)
}

// hold is where the work cursor may move to after last: before the
// event of the earliest item with batches waiting (a restart derives it
// again and publishes what is not done), else last.
func (p *Publisher) hold(last uint64) uint64 {
	for _, h := range p.waiting {
		if seq := h.item.EventSeq; seq <= last {
			last = seq - 1
		}
	}
	return last
}

// Transient reports whether a failed command may succeed when sent again
// unchanged: the engine was unavailable, the state kept changing, the
// connection was rate limited, an unexpected internal failure, or a
// failure that is not a command rejection at all (a transport error).
func Transient(err error) bool {
	var ce *commands.Error
	if !errors.As(err, &ce) {
		return true
	}
	switch ce.Code {
	case commands.CodeUnavailable, commands.CodeConflict, commands.CodeRateLimited, commands.CodeInternal:
		return true
	}
	return false
}

// retry runs fn until it succeeds or ctx ends (then it returns ctx's
// error), waiting between attempts from 100ms, doubling, up to MaxBackoff.
func (p *Publisher) retry(ctx context.Context, what string, fn func() error) error {
	maxBackoff := p.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 10 * time.Second
	}
	backoff := min(minBackoff, maxBackoff)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.logger().Warn(what+"; retrying", "err", err, "in", backoff)
		if sleep(ctx, backoff); ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (p *Publisher) cursor(ctx context.Context) (uint64, error) {
	e := p.Log
	entry, err := e.Bucket().Get(ctx, cursorKey)
	if err == nil {
		seq, perr := strconv.ParseUint(string(entry.Value()), 10, 64)
		if perr == nil {
			return seq, nil
		}
		p.logger().Warn("work cursor unreadable; starting at the stream's end", "value", string(entry.Value()))
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, fmt.Errorf("engine: work cursor: %w", err)
	}
	last, err := e.Reader().LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := e.Bucket().Put(ctx, cursorKey, []byte(strconv.FormatUint(last, 10))); err != nil {
		return 0, fmt.Errorf("engine: work cursor: %w", err)
	}
	return last, nil
}

func (p *Publisher) publish(ctx context.Context, item Item) error {
	js := p.Log.JetStream()
	b, trimmed, err := encode(item, js.Conn().MaxPayload())
	if trimmed {
		p.logger().Error("work item too large for the server with its steps' SQL; published with sql.error instead, so SQL workers report its steps failed", "item", item.ID, "run_kind", item.RunKind, "max_payload", js.Conn().MaxPayload())
	}
	if err != nil {
		// It never will encode: report it and go on, or it would hold up
		// all later work (events.Decode keeps times printable, so only a
		// bug gets here).
		p.logger().Error("work item cannot be encoded; skipped", "item", item.ID, "run_kind", item.RunKind, "err", err)
		return nil
	}
	m := nats.NewMsg(Subject(item.RunKind))
	m.Data = b
	// Each batch of an item is a message of its own: its key, not the
	// item's id, or the stream would keep only the first batch.
	m.Header.Set(jetstream.MsgIDHeader, item.Key())
	m.Header.Set("Content-Type", "application/json")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("engine: publish %s: %w", item.ID, err)
	}
	if p.Published != nil {
		p.Published(item)
	}
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
