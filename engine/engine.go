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
	// refused (invalid, field at) unless its id is reserved
	// (commands.IsInternalID: the engine's own scheduler, catch-up driver
	// and built-in worker, in-process only), and a completion must cover
	// intervals that have ended by Clock.
	TrustCommandTime bool
	// MaxRetries bounds re-decisions after a conflict. Default 8.
	MaxRetries int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// CheckpointEvery is how many newly folded events make the engine write a projection
	// checkpoint to the KV bucket (and one on Close). 0: checkpoint.DefaultEvery; negative:
	// none written or loaded. CheckpointWhen, if set, gates the due ones (Keeper.When).
	CheckpointEvery int
	CheckpointWhen  func() bool
	// Coalesce stores each group of concurrent completions as one group message
	// (eventlog.AppendGroup): one fsync for the group under SyncAlways (docs/performance.md),
	// every append conditional on the stream's last sequence; off, pipelined messages of
	// their own (serve: on unless --no-coalesce). Readers understand both forms.
	Coalesce bool
	// Check vets a valid command before it is decided (serve: sqlcheck.ForEngine); its error refuses it.
	Check func(context.Context, commands.Command) error
	// LiveWorkers counts the live workers (serve: its roster); nil, not
	// known. With none live, a status reply names that as the cause of
	// lateness it knows no other cause of (views.NoWorker).
	LiveWorkers func() int
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
	elog   *eventlog.Log
	reader *eventlog.Reader // elog's
	proj   *live.Projection
	ids    *events.IDSource

	metrics   *metrics
	keeper    *checkpoint.Keeper // nil: checkpoints are off
	loadedSeq uint64             // the checkpoint the projection started from (0: none)
	cpReject  string             // why a stored checkpoint was not used

	cmdMu   sync.Mutex    // serialises deciding and publishing; guards idle and closed
	idle    chan struct{} // closed once the group last published is applied (nil: none yet)
	queueMu sync.Mutex
	queue   []*waiter // completions waiting for the committer (group.go)
	co      committer // the goroutine storing the groups (committer.go)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
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
	e := &Engine{cfg: cfg, log: cfg.Logger.With("subsystem", "engine"), ids: events.NewIDSource(), metrics: newMetrics()}
	js, err := jetstream.New(nc)
	if err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("engine: jetstream: %w", err)
	}
	if e.elog, err = eventlog.Ensure(ctx, js, eventlog.Config{
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
	if _, err := e.checkStore(ctx, seen); err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.proj = live.New(e.reader, from, e.log.With("subsystem", "projection"))
	if cfg.CheckpointEvery >= 0 {
		e.keeper = &checkpoint.Keeper{Proj: e.proj, KV: e.elog.Bucket(), Reader: e.reader, Every: e.cfg.CheckpointEvery, Seq: e.loadedSeq, Logger: e.log, When: cfg.CheckpointWhen}
	}
	e.spawn(func() {
		if err := e.proj.Run(e.ctx); err != nil {
			e.log.Error("projection stopped", "err", err)
		}
	})
	if err := e.CatchUp(ctx); err != nil {
		e.Close(ctx)
		return nil, err
	}
	if e.loadedSeq > 0 {
		// The events under the checkpoint are not folded: check the stream holds them, in the background.
		e.spawn(func() { e.verifyPrefix(e.ctx, e.loadedSeq) })
	}
	if e.keeper != nil {
		e.spawn(func() { e.keeper.Run(e.ctx) })
	}
	e.co.kick = make(chan struct{}, 1)
	e.spawn(func() { e.commitLoop(e.ctx) })
	return e, nil
}

// spawn runs fn on a goroutine of its own, which Close waits for.
func (e *Engine) spawn(fn func()) {
	e.wg.Add(1)
	go func() { defer e.wg.Done(); fn() }()
}

// Log is the event log the engine writes through (eventlog.Ensure'd on
// the connection Open was given): the components that follow the stream
// or keep state beside it take it (work.Publisher, notify.Notifier,
// cluster.Config): its JetStream handle (whose Conn is that connection),
// its Config (the replicas and storage other streams follow), Reader,
// Bucket (the state bucket: checkpoints, the work and notify cursors;
// always there, whether or not this engine writes checkpoints) and
// Retry.
func (e *Engine) Log() *eventlog.Log { return e.elog }

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
	e.elog.Close()
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

// Handle carries out one command: it validates it (and Config.Check),
// decides against the projection, appends conditionally, and waits until
// the projection has applied its events (read-your-writes). A command id
// already applied is answered as a duplicate and appends nothing.
func (e *Engine) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	r := e.handle(ctx, cmd)
	e.metrics.command(cmd.Kind(), r)
	return r
}

func (e *Engine) handle(ctx context.Context, cmd commands.Command) commands.Reply {
	m := cmd.Header()
	err := cmd.Validate()
	if err == nil && e.cfg.Check != nil {
		err = e.cfg.Check(ctx, cmd)
	}
	if err != nil {
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
		if e.cfg.LiveWorkers != nil && views.AnyLate(r.Envs) && e.cfg.LiveWorkers() == 0 {
			views.NoWorker(r.Envs)
		}
		r.Accepted, r.Seq = true, e.proj.Seq()
		return r
	}
	if err := e.Err(); err != nil { // the projection stopped for good: append nothing
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	switch cmd.(type) {
	case *commands.CompleteIntervals, *commands.CompleteWork:
		return e.commit(ctx, cmd)
	}
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if e.closed {
		return stopped()
	}
	e.waitIdle(ctx)
	return e.decideAndAppend(ctx, cmd)
}
