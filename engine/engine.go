// Package engine is tidemark's writer on NATS JetStream: it starts (or
// connects to) the server, owns the event stream, folds the live
// projection, and carries out commands: it reads the projection, calls the
// pure core (package decide) and appends the decision's events under its
// condition, re-deciding after a conflict. The loops that issue commands
// on their own live in package scheduler, the worker protocol in work.
// Importers: cmd/tidemark, scenario, bench, scheduler, work, tests.
//
// Data flows one way: command → validation → decision against the
// projection at sequence S → conditional append → stream → projection.
// Command handling in one engine is serialised by cmdMu; across engines
// (replicas) the expected-sequence condition on every append keeps two
// writers from both acting on one state: the loser re-reads and re-decides.
//
// Completions are group-committed (group.go): several groups may be in
// flight at once, but never two touching the same subject, table or
// command id, and every other command waits until none is in flight.
//
// Lock order: cmdMu, flightMu, then the projector's mu (held only while
// deciding).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/lease"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/views"
)

// Config configures an Engine. The zero value plus DataDir is a working
// embedded setup.
type Config struct {
	// DataDir holds the embedded server's JetStream store. Required unless
	// NatsURL is set.
	DataDir string
	// NatsURL connects to an external NATS server instead of embedding one.
	NatsURL string
	// Listen makes the embedded server accept clients on HOST:PORT (e.g.
	// 127.0.0.1:4222). Empty: in-process connections only.
	Listen string
	// SyncAlways makes the embedded server fsync every append before it
	// acknowledges it. Without it an acknowledged event can be lost if the
	// machine (not just the process) crashes within the sync interval.
	SyncAlways bool
	// MemoryStorage keeps the stream in memory (tests and benchmarks only:
	// nothing survives a restart).
	MemoryStorage bool
	// Replicas is the stream's replica count (1 unless clustered).
	Replicas int
	// ServerName names the embedded server (unique in a cluster). Default
	// "tidemark".
	ServerName string
	// ClusterName, ClusterListen (HOST:PORT) and Routes (nats://HOST:PORT
	// of the other members) make the embedded server a member of a
	// JetStream cluster.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// AuthFile is a nats-server configuration whose users and accounts
	// (authorization and accounts blocks: permissions, exports, imports)
	// the embedded server loads; User and Password are the engine's own
	// credentials (an admin), and its streams live in that user's account.
	// See docs/auth.conf.
	AuthFile, User, Password string
	// TLSCert and TLSKey (PEM files) make the embedded server require TLS
	// from network clients.
	TLSCert, TLSKey string
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
	// Node names this engine in the writer lease (default: the server's
	// name and a fresh id). LeaseTTL is how long the writer lease lives
	// without renewal (default lease.DefaultTTL): the longest an election
	// waits for a writer that stopped without giving the lease up.
	Node     string
	LeaseTTL time.Duration
	// CheckpointEvery is how many newly folded events make the engine
	// write a projection checkpoint to the KV bucket (and it writes one on
	// Close). 0: DefaultCheckpointEvery; negative: no checkpoints, and none
	// is loaded either.
	CheckpointEvery int
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.NatsURL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("engine: DataDir is required for the embedded server"))
	}
	if c.NatsURL != "" && c.Listen != "" {
		errs = append(errs, errors.New("engine: Listen applies to the embedded server only, not with NatsURL"))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("engine: Replicas %d: want 1..5", c.Replicas))
	}
	if c.NatsURL != "" && (c.ClusterName != "" || c.ClusterListen != "" || len(c.Routes) > 0) {
		errs = append(errs, errors.New("engine: cluster options apply to the embedded server only, not with NatsURL"))
	}
	if c.NatsURL != "" && (c.AuthFile != "" || c.TLSCert != "") {
		errs = append(errs, errors.New("engine: AuthFile and TLS apply to the embedded server; put credentials in NatsURL"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("engine: TLS needs both TLSCert and TLSKey"))
	}
	if (c.ClusterName == "") != (c.ClusterListen == "") {
		errs = append(errs, errors.New("engine: a cluster member needs both ClusterName and ClusterListen"))
	}
	return errors.Join(errs...)
}

// Engine is a running tidemark engine.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	proj   *projector
	ids    *events.IDSource

	metrics   *metrics
	cp        *checkpoints
	cpMu      sync.Mutex
	cpSeq     uint64 // last checkpoint written or loaded
	loadedSeq uint64 // the checkpoint the projection started from (0: none)
	cpReject  string // why a stored checkpoint was not used

	lease       *lease.Lease
	roleMu      sync.Mutex
	writing     bool          // holds the lease and serves forwarded commands
	roleChanged chan struct{} // closed and replaced when writing changes

	cmdMu   sync.Mutex
	tail    uint64 // where the appends in flight end (guarded by cmdMu)
	queueMu sync.Mutex
	queue   []*waiter     // completions waiting for group commit
	lead    chan struct{} // capacity 1: held by the goroutine leading a group
	// flightMu guards flight, the groups published and not yet applied.
	// Lock order: cmdMu, flightMu, the projector's mu.
	flightMu sync.Mutex
	flight   flight
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   bool
}

// Open starts the engine: server (embedded unless NatsURL), stream, and
// the live projection, which it lets catch up with the stream before
// returning.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
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
	e := &Engine{cfg: cfg, log: cfg.Logger.With("subsystem", "engine"), ids: events.NewIDSource(), lead: make(chan struct{}, 1), roleChanged: make(chan struct{})}
	e.metrics = newMetrics(e)
	var err error
	if cfg.NatsURL == "" {
		if e.srv, err = startEmbedded(cfg); err != nil {
			return nil, err
		}
		opts := []nats.Option{nats.InProcessServer(e.srv), nats.Name("tidemark-engine")}
		if cfg.User != "" {
			opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
		}
		e.nc, err = nats.Connect("", opts...)
	} else {
		e.nc, err = nats.Connect(cfg.NatsURL, nats.Name("tidemark-engine"), nats.MaxReconnects(-1))
	}
	if err != nil {
		e.shutdownServer()
		return nil, fmt.Errorf("engine: connect: %w", err)
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("engine: jetstream: %w", err)
	}
	if e.stream, err = e.createStream(ctx); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("engine: stream %s: %w", events.StreamName, err)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.proj = newProjector(e.log.With("subsystem", "projection"))
	e.proj.probe, e.proj.lastSeq = e.probe, e.LastSeq
	var seen uint64 // the sequence the stored checkpoint was taken at
	if cfg.CheckpointEvery >= 0 {
		if cfg.CheckpointEvery == 0 {
			e.cfg.CheckpointEvery = DefaultCheckpointEvery
		}
		if e.cp, err = retryJS(ctx, e, func(ctx context.Context) (*checkpoints, error) {
			return openCheckpoints(ctx, e.js, e.stream, cfg.Replicas, cfg.MemoryStorage)
		}); err != nil {
			e.Close(ctx)
			return nil, err
		}
		var st *projections.State
		st, seen, err = e.cp.load(ctx)
		switch {
		case err != nil:
			e.cpReject = err.Error()
			e.log.Warn("checkpoint ignored; rebuilding the projections from the stream", "err", err)
		case st != nil:
			e.proj.st = st
			e.loadedSeq, e.cpSeq = st.Seq, st.Seq
			e.log.Info("projections loaded from checkpoint", "seq", st.Seq)
		}
	}
	if err := e.checkStore(ctx, seen); err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.proj.run(e.ctx, e.js); err != nil && e.ctx.Err() == nil {
			e.log.Error("projection stopped", "err", err)
			e.proj.fail(err)
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
	if e.cp != nil {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.checkpointLoop(e.ctx) }()
	}
	kv, err := retryJS(ctx, e, func(ctx context.Context) (jetstream.KeyValue, error) {
		return lease.Ensure(ctx, e.js, cfg.Replicas, cfg.MemoryStorage)
	})
	if err != nil {
		e.Close(ctx)
		return nil, err
	}
	node := cfg.Node
	if node == "" {
		name := cfg.ServerName
		if name == "" {
			name = e.nc.ConnectedServerName()
		}
		node = nodeName(name)
	}
	e.lease = lease.New(lease.Config{KV: kv, Node: node, TTL: cfg.LeaseTTL, Logger: e.log.With("subsystem", "lease")})
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.lease.Run(e.ctx) }()
	go func() { defer e.wg.Done(); e.roleLoop(e.ctx) }()
	return e, nil
}

// Stats describes the live projection.
type Stats struct {
	// Seq is the last sequence applied.
	Seq uint64 `json:"seq"`
	// Folded counts the events this engine folded since it opened (not
	// those a checkpoint brought in).
	Folded uint64 `json:"folded"`
	// CheckpointSeq is the checkpoint the projection started from (0: it
	// folded the stream from the start).
	CheckpointSeq uint64 `json:"checkpoint_seq"`
	// CheckpointRejected says why a stored checkpoint was not used.
	CheckpointRejected string `json:"checkpoint_rejected,omitempty"`
	// Lag is how many stored events were not applied yet at the last
	// delivery.
	Lag uint64 `json:"lag"`
}

// Stats returns the projection's statistics.
func (e *Engine) Stats() Stats {
	e.proj.mu.RLock()
	defer e.proj.mu.RUnlock()
	return Stats{Seq: e.proj.st.Seq, Folded: e.proj.folded, CheckpointSeq: e.loadedSeq, CheckpointRejected: e.cpReject, Lag: e.proj.pending}
}

// Checkpoint writes the live projection to the checkpoint bucket now
// (nothing when it is already there, or checkpoints are off).
func (e *Engine) Checkpoint(ctx context.Context) error {
	if e.cp == nil || e.Err() != nil {
		// A projection stopped by a damaged store keeps the checkpoint
		// that shows how far the stream once reached.
		return nil
	}
	e.cpMu.Lock()
	defer e.cpMu.Unlock()
	var value []byte
	var seq uint64
	var err error
	e.proj.read(func(st *projections.State) {
		if st.Seq > e.cpSeq {
			value, seq, err = encodeCheckpoint(st, e.proj.lastID)
		}
	})
	if err != nil || value == nil {
		return err
	}
	if err := e.cp.save(ctx, value); err != nil {
		return fmt.Errorf("engine: checkpoint at seq %d: %w", seq, err)
	}
	e.cpSeq = seq
	return nil
}

// checkpointLoop writes a checkpoint whenever CheckpointEvery events were
// folded since the last one.
func (e *Engine) checkpointLoop(ctx context.Context) {
	for {
		changed, err := e.proj.watch()
		if err != nil {
			return
		}
		e.cpMu.Lock()
		due := e.proj.seq() >= e.cpSeq+uint64(e.cfg.CheckpointEvery)
		e.cpMu.Unlock()
		if due {
			if err := e.Checkpoint(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("checkpoint", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// AppendTimeout bounds one append (and the re-read after a lost ack): a
// publish the stream does not answer (a leader election on a cluster) is
// treated as ambiguous and retried with the same message ids.
const AppendTimeout = 5 * time.Second

// StreamWait bounds how long Open waits for a clustered stream to become
// available (its peers to join and elect a leader).
const StreamWait = 2 * time.Minute

// createStream creates or updates the event stream.
func (e *Engine) createStream(ctx context.Context) (jetstream.Stream, error) {
	return retryJS(ctx, e, func(ctx context.Context) (jetstream.Stream, error) {
		return e.js.CreateOrUpdateStream(ctx, StreamConfig(e.cfg.Replicas, e.cfg.MemoryStorage))
	})
}

// retryJS runs a JetStream API call. On a cluster the first calls fail or
// go unanswered until enough peers have joined and a meta leader is
// elected: each attempt is bounded, and attempts repeat for up to
// StreamWait. Elsewhere one attempt is made.
func retryJS[T any](ctx context.Context, e *Engine, call func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(StreamWait)
	backoff := 100 * time.Millisecond
	clustered := e.cfg.ClusterName != "" || e.cfg.Replicas > 1
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := call(actx)
		cancel()
		if err == nil || !clustered || time.Now().After(deadline) || ctx.Err() != nil {
			return v, err
		}
		e.log.Info("waiting for the cluster", "err", err)
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// Conn is the engine's NATS connection (for serving commands).
func (e *Engine) Conn() *nats.Conn { return e.nc }

// JetStream is the engine's JetStream context.
func (e *Engine) JetStream() jetstream.JetStream { return e.js }

// Server is the embedded server, or nil with NatsURL.
func (e *Engine) Server() *server.Server { return e.srv }

// ClientURL is a URL other processes can connect to, when there is one.
func (e *Engine) ClientURL() string {
	if e.srv != nil && e.cfg.Listen != "" {
		return e.srv.ClientURL()
	}
	return e.cfg.NatsURL
}

// Close stops the projection and the connection, then the embedded server.
func (e *Engine) Close(ctx context.Context) error {
	e.cmdMu.Lock()
	e.closed = true
	e.cmdMu.Unlock()
	if e.lease != nil {
		// Give the lease up first: another engine takes over at once.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e.lease.Release(rctx)
		cancel()
	}
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	if e.cp != nil && e.proj != nil {
		if err := e.Checkpoint(ctx); err != nil {
			e.log.Warn("checkpoint on close", "err", err)
		}
	}
	if e.nc != nil {
		_ = e.nc.Drain()
		e.nc.Close()
	}
	e.shutdownServer()
	return nil
}

func (e *Engine) shutdownServer() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
}

// LastSeq is the stream's last sequence as the server reports it now.
func (e *Engine) LastSeq(ctx context.Context) (uint64, error) {
	info, err := e.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("engine: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// CatchUp waits until the projection has applied everything the stream held
// when it was called. It fails at once, with ErrDamaged, when the stream
// lost events the projection would otherwise wait for (see store.go).
func (e *Engine) CatchUp(ctx context.Context) error {
	var d *replay.Damage
	st, err := retryJS(ctx, e, func(ctx context.Context) (jetstream.StreamState, error) {
		var err error
		var st jetstream.StreamState
		st, d, err = replay.CheckStream(ctx, e.stream, 0, 0)
		return st, err
	})
	if err != nil {
		return fmt.Errorf("engine: stream info: %w", err)
	}
	if d != nil {
		return damaged(d)
	}
	return e.proj.waitFor(ctx, st.LastSeq)
}

// View runs fn with the live projection state under its read lock. fn must
// not keep or modify st.
func (e *Engine) View(fn func(st *projections.State)) { e.proj.read(fn) }

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
	if m.AfterSeq > 0 {
		if err := e.awaitSeq(ctx, m.AfterSeq); err != nil {
			return commands.Rejection(err)
		}
	}
	_, isQuery := cmd.(commands.Query)
	if on, _ := e.Writing(); !on && !isQuery && e.lease != nil {
		// Sent on as received: the writer's clock gives it its time.
		return e.forward(ctx, cmd)
	}
	if m.At.IsZero() {
		m.At = e.Now()
	}
	m.At = m.At.UTC()
	if q, ok := cmd.(commands.Query); ok {
		var r commands.Reply
		var err error
		e.proj.read(func(st *projections.State) { r, err = views.Answer(st, q, m.At) })
		if err != nil {
			return commands.Rejection(err)
		}
		r.Accepted, r.Seq = true, e.proj.seq()
		return r
	}
	if err := e.Err(); err != nil {
		// The projection stopped for good (a damaged store): decide and
		// append nothing.
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	switch cmd.(type) {
	case *commands.CompleteIntervals, *commands.CompleteWork:
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
		e.proj.read(func(st *projections.State) { d, err = decide.Decide(st, cmd) })
		if err != nil {
			return commands.Rejection(err)
		}
		if len(d.Events) == 0 {
			d.Reply.Accepted = true
			return d.Reply
		}
		evs := e.commandEvents(m, digest, d.Events)
		started := time.Now()
		actx, cancel := context.WithTimeout(ctx, AppendTimeout)
		seq, err := e.appendEvents(actx, cmd.Kind(), m.ID, digest, evs, d.Expect)
		cancel()
		e.metrics.appendS.Observe(time.Since(started).Seconds())
		switch {
		case err == nil:
			// The writer's own events are the stream's next ones: apply
			// them now, so the reply need not wait for the consumer (which
			// stalls for seconds when its server stops).
			first := seq + 1 - uint64(len(evs))
			for i, ev := range evs {
				if !e.proj.applyOwn(first+uint64(i), ev) {
					break
				}
			}
			if err := e.proj.waitFor(ctx, seq); err != nil {
				return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "appended at seq %d but the projection did not catch up: %v", seq, err))
			}
			d.Reply.Accepted, d.Reply.Seq, d.Reply.Events = true, seq, len(evs)
			return d.Reply
		case errors.Is(err, ErrConflict), errors.Is(err, ErrAmbiguous):
			lastErr = err
			e.log.Debug("re-deciding", "kind", cmd.Kind(), "id", m.ID, "attempt", attempt, "err", err)
			cctx, cancel := context.WithTimeout(ctx, AppendTimeout)
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
