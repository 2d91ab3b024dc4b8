package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/checkpoint"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/views"
)

// Config configures an Engine: the writer's concerns only (the server it
// writes through is natsnode's). The zero value is a working setup.
type Config struct {
	// MemoryStorage keeps the stream in memory (tests and benchmarks only:
	// nothing survives a restart).
	MemoryStorage bool
	// Replicas is the stream's replica count (1 unless clustered).
	Replicas int
	// Clock gives the time of commands that carry none. Default time.Now.
	Clock func() time.Time
	// TrustCommandTime makes a command's At its clock, whoever sends it:
	// for an engine on a simulated clock (the scenario runner, tests).
	// Off (serve), Clock is the only clock: a command carrying At is
	// refused (invalid, field at) unless its id is in the reserved
	// namespace (commands.IsInternalID: the engine's own scheduler,
	// catch-up driver and built-in worker, in-process only), and a
	// completion must cover intervals that have ended by Clock.
	TrustCommandTime bool
	// MaxRetries bounds re-decisions after a conflict. Default 8.
	MaxRetries int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// CheckpointEvery is how many newly folded events make the engine
	// write a projection checkpoint to the KV bucket (and it writes one on
	// Close). 0: checkpoint.DefaultEvery; negative: no checkpoints, and none
	// is loaded either.
	CheckpointEvery int
	// Coalesce stores each group of concurrent completions as one group
	// message (eventlog.AppendGroup): one fsync for the group under
	// SyncAlways, where it pays (docs/performance.md). One group is in
	// flight at a time, and every append is conditional on the stream's
	// last sequence. serve turns it on with fsync. Readers understand
	// both forms whatever this says.
	Coalesce bool
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Replicas < 0 || c.Replicas > 5 {
		return fmt.Errorf("engine: Replicas %d: want 1..5", c.Replicas)
	}
	return nil
}

// ErrStopped is returned by an engine that is closing or closed.
var ErrStopped = errors.New("engine: stopped")

// Engine is a running tidemark engine.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	elog   *eventlog.Log
	reader *eventlog.Reader
	proj   *live.Projection
	ids    *events.IDSource

	metrics   *metrics
	keeper    *checkpoint.Keeper // nil: checkpoints are off
	loadedSeq uint64             // the checkpoint the projection started from (0: none)
	cpReject  string             // why a stored checkpoint was not used

	cmdMu   sync.Mutex
	tail    uint64 // where the appends in flight end (guarded by cmdMu)
	queueMu sync.Mutex
	queue   []*waiter     // completions waiting for group commit
	lead    chan struct{} // capacity 1: held by the goroutine leading a group
	co      committer     // Config.Coalesce: the goroutine storing the groups (committer.go)
	// flightMu guards flight, the groups published and not yet applied.
	// Lock order: cmdMu, flightMu, the live projection's mu.
	flightMu sync.Mutex
	flight   flight
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   bool
}

// Open starts the engine on nc (a natsnode.Node's connection, which the
// caller closes after the engine): it ensures the event log and lets the
// live projection catch up with it before returning.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Engine, error) {
	if nc == nil {
		return nil, errors.New("engine: no NATS connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine{cfg: cfg, log: cfg.Logger.With("subsystem", "engine"), ids: events.NewIDSource(), lead: make(chan struct{}, 1)}
	e.metrics = newMetrics()
	e.nc = nc
	var err error
	if e.js, err = jetstream.New(e.nc); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("engine: jetstream: %w", err)
	}
	if e.elog, err = eventlog.Ensure(ctx, e.js, eventlog.Config{
		Replicas: cfg.Replicas, Memory: cfg.MemoryStorage, Clustered: nc.ConnectedClusterName() != "", Logger: e.log,
	}); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.reader = e.elog.Reader()
	e.ctx, e.cancel = context.WithCancel(context.Background())
	var from *projections.State // the checkpoint's state (nil: none)
	var seen uint64             // the sequence the stored checkpoint was taken at
	if cfg.CheckpointEvery >= 0 {
		if cfg.CheckpointEvery == 0 {
			e.cfg.CheckpointEvery = checkpoint.DefaultEvery
		}
		var st *projections.State
		st, seen, err = checkpoint.Load(ctx, e.reader, e.elog.Bucket())
		switch {
		case err != nil:
			e.cpReject = err.Error()
			e.log.Warn("checkpoint ignored; rebuilding the projections from the stream", "err", err)
		case st != nil:
			from = st
			e.loadedSeq = st.Seq
			e.log.Info("projections loaded from checkpoint", "seq", st.Seq)
		}
	}
	if err := e.checkStore(ctx, seen); err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.proj = live.New(e.reader, from, e.log.With("subsystem", "projection"))
	if cfg.CheckpointEvery >= 0 {
		e.keeper = &checkpoint.Keeper{Proj: e.proj, KV: e.elog.Bucket(), Every: e.cfg.CheckpointEvery, Seq: e.loadedSeq, Logger: e.log}
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.proj.Run(e.ctx); err != nil {
			e.log.Error("projection stopped", "err", err)
		}
	}()
	if err := e.CatchUp(ctx); err != nil {
		e.Close(ctx)
		return nil, err
	}
	if e.loadedSeq > 0 {
		// The events under the checkpoint are not folded: check that the
		// stream still holds them all, in the background.
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.verifyPrefix(e.ctx, e.loadedSeq) }()
	}
	if e.keeper != nil {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.keeper.Run(e.ctx) }()
	}
	if cfg.Coalesce {
		e.startCommitter()
	}
	return e, nil
}

// Bucket is the state bucket, which also holds the work publisher's
// cursor (package work); nil when checkpoints are off (CheckpointEvery < 0).
func (e *Engine) Bucket() jetstream.KeyValue {
	if e.keeper == nil {
		return nil
	}
	return e.elog.Bucket()
}

// Conn is the connection the engine was opened on (for serving commands).
func (e *Engine) Conn() *nats.Conn { return e.nc }

// JetStream is the engine's JetStream context.
func (e *Engine) JetStream() jetstream.JetStream { return e.js }

// Close stops the projection and writes a last checkpoint. It leaves the
// connection open: its owner (a natsnode.Node) closes it afterwards.
func (e *Engine) Close(ctx context.Context) error {
	e.cmdMu.Lock()
	e.closed = true
	e.cmdMu.Unlock()
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	if e.keeper != nil {
		if err := e.Checkpoint(ctx); err != nil {
			e.log.Warn("checkpoint on close", "err", err)
		}
	}
	return nil
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.cfg.Clock().UTC() }

var _ commands.Handler = (*Engine)(nil)

// Handle carries out one command: it validates it, decides against the
// projection, appends conditionally, and waits until the projection has
// applied its own events (read-your-writes for the next command). A command
// id already applied is answered as a duplicate and appends nothing.
func (e *Engine) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	r := e.handle(ctx, cmd)
	e.metrics.command(cmd.Kind(), r)
	return r
}

func (e *Engine) handle(ctx context.Context, cmd commands.Command) commands.Reply {
	m := cmd.Header()
	if err := cmd.Validate(); err != nil {
		return commands.Rejection(err)
	}
	if !m.At.IsZero() && !e.cfg.TrustCommandTime && !commands.IsInternalID(m.ID) {
		return commands.Rejection(commands.Errorf(commands.CodeInvalid, "at",
			"at %s: this engine runs on its own clock, the only clock; send the command without at", m.At.UTC().Format(time.RFC3339)))
	}
	if m.At.IsZero() {
		m.At = e.Now()
	}
	m.At = m.At.UTC()
	if q, ok := cmd.(commands.Query); ok {
		var r commands.Reply
		var err error
		e.proj.Read(func(st *projections.State) { r, err = views.Answer(st, q, m.At) })
		if err != nil {
			return commands.Rejection(err)
		}
		r.Accepted, r.Seq = true, e.proj.Seq()
		return r
	}
	if err := e.Err(); err != nil {
		// The projection stopped for good (a damaged store): decide and
		// append nothing.
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	switch cmd.(type) {
	case *commands.CompleteIntervals, *commands.CompleteWork:
		if e.cfg.Coalesce {
			return e.commit(ctx, cmd)
		}
		return e.combine(ctx, cmd)
	}
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if e.closed {
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", ErrStopped))
	}
	e.waitIdle(ctx)
	return e.decideAndAppend(ctx, cmd)
}

// decideAndAppend decides one command and appends its events, re-deciding
// after a conflict. The caller holds cmdMu.
func (e *Engine) decideAndAppend(ctx context.Context, cmd commands.Command) commands.Reply {
	m := cmd.Header()
	digest := commands.Digest(cmd)
	var lastErr error
	for attempt := 0; attempt <= e.cfg.MaxRetries; attempt++ {
		var d decide.Decision
		var err error
		e.proj.Read(func(st *projections.State) {
			if d, err = decide.Decide(st, cmd); err == nil {
				e.fence(st, &d)
			}
		})
		if err != nil {
			return commands.Rejection(err)
		}
		if len(d.Events) == 0 {
			d.Reply.Accepted = true
			return d.Reply
		}
		evs := e.commandEvents(m, digest, d.Events)
		started := time.Now()
		actx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
		seq, err := e.elog.Append(actx, msgID(cmd.Kind(), m.ID), evs, d.Expect)
		cancel()
		e.metrics.appendS.Observe(time.Since(started).Seconds())
		switch {
		case err == nil:
			// The writer's own events are the stream's next ones: apply
			// them now, so the reply need not wait for the consumer (which
			// stalls for seconds when its server stops).
			first := seq + 1 - uint64(len(evs))
			for i, ev := range evs {
				if !e.proj.ApplyOwn(first+uint64(i), ev) {
					break
				}
			}
			if err := e.waitFor(ctx, seq); err != nil {
				return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seq, err))
			}
			d.Reply.Accepted, d.Reply.Seq, d.Reply.Events = true, seq, len(evs)
			return d.Reply
		case errors.Is(err, eventlog.ErrConflict), errors.Is(err, eventlog.ErrAmbiguous):
			lastErr = err
			e.log.Debug("re-deciding", "kind", cmd.Kind(), "id", m.ID, "attempt", attempt, "err", err)
			cctx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
			cerr := e.CatchUp(cctx)
			cancel()
			if cerr != nil && ctx.Err() == nil && attempt < e.cfg.MaxRetries {
				// The stream may be electing a leader: try again.
				e.log.Debug("re-reading the stream failed; retrying", "err", cerr)
				continue
			}
			if cerr != nil {
				return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "re-reading the stream: %v", cerr))
			}
		default:
			return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "append: %v", err))
		}
	}
	return commands.Rejection(commands.Errorf(commands.CodeConflict, "", "the state kept changing: gave up after %d attempts (nothing was appended; the last: %v)", e.cfg.MaxRetries+1, lastErr))
}

// msgID is the message id of the events of command kind with id
// (eventlog.MsgID).
func msgID(kind, id string) string { return eventlog.MsgID(kind, id, commands.IsInternalID(id)) }

// commandEvents wraps a command's payloads in events caused by it, each
// carrying the command's digest.
func (e *Engine) commandEvents(m *commands.Meta, digest string, payloads []events.Payload) []events.Event {
	evs := make([]events.Event, len(payloads))
	for i, p := range payloads {
		ev := events.New(e.ids, m.At, p)
		ev.Causation, ev.Actor, ev.Correlation, ev.Digest = m.ID, m.Actor, m.Correlation, digest
		evs[i] = ev
	}
	return evs
}
