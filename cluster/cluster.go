// Package cluster runs an engine as one member of the engines that share a
// stream (the nodes of a cluster, or several engines on one server), so
// that exactly one of them, the writer, decides and appends at a time.
//
// The writer is the holder of the writer lease (package lease). Every
// member answers the commands it is sent (Member.Handle, the command
// service's handler; Member.Serve serves the queries on every member and
// the commands that write on the writer only): a query from its own
// projection once that has applied the client's after_seq
// (read-your-writes, whichever member the client reaches); a command that
// writes, on the writer, by its engine, and elsewhere (a member that has
// just lost the lease, the engine's own commands) by forwarding it to the
// writer (transport.Forward), then waiting until its own projection has
// applied what the writer stored.
// The writer serves forwarded commands (transport.ServeWriter) only while
// it holds the lease; taking it, it first folds everything the stream
// holds, so it decides on everything the previous writer acknowledged.
//
// Invariants. The lease is for liveness; safety does not rest on it: every
// append carries the fencing token (the stream sequence its decision read,
// decide.Decision.Expect), so a deposed writer that has not noticed yet
// fails its append, re-reads, and is outvoted. The loops that issue
// commands on their own (scheduler, catch-up driver, work publisher) run
// where Writing says so (package server, for tidemark serve).
//
// It takes the engine's parts, not the engine (Config: the Handler, the
// *eventlog.Log, the live projection and CatchUp), so it imports no
// engine. Importers: server (serve's composition root), bench, tests.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/lease"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/transport"
)

// Config configures a Member: the parts of its engine it needs (Handler,
// Log, Proj, CatchUp: all required), and its settings.
type Config struct {
	// Handler carries out the commands this member writes while it is the
	// writer, and its queries: its engine.
	Handler commands.Handler
	// Log is the event log the engine writes through (Engine.Log). Its
	// JetStream handle provisions the lease bucket (under Log.Retry,
	// following Log.Config's replicas and storage), and that handle's
	// Conn is the connection the member forwards commands on and serves
	// forwarded commands on; its Reader tells the stream's last sequence
	// (a client's after_seq beyond it is refused).
	Log *eventlog.Log
	// Proj is the engine's live projection (Engine.Projection), which
	// answers for the sequences a member waits for.
	Proj *live.Projection
	// CatchUp waits until Proj has applied what the stream holds
	// (Engine.CatchUp): taking the lease, the member calls it before it
	// serves forwarded commands.
	CatchUp func(ctx context.Context) error
	// Node names this member in the lease (default: the server's name
	// and a fresh id).
	Node string
	// LeaseTTL is how long the writer lease lives without renewal
	// (default lease.DefaultTTL): the longest an election waits for a
	// writer that stopped without giving the lease up.
	LeaseTTL time.Duration
	// WritesGrace is how long the member goes on serving the commands that
	// write after it lost the lease (Serve; default DefaultWritesGrace).
	WritesGrace time.Duration
	Logger      *slog.Logger
}

// Validate names the engine's parts the Config lacks.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name    string
		missing bool
	}{{"Handler", c.Handler == nil}, {"Log", c.Log == nil}, {"Proj", c.Proj == nil}, {"CatchUp", c.CatchUp == nil}} {
		if f.missing {
			errs = append(errs, fmt.Errorf("cluster: Config.%s is required", f.name))
		}
	}
	return errors.Join(errs...)
}

// Member is an engine taking part in the election of the writer.
type Member struct {
	cfg         Config
	nc          *nats.Conn // cfg.Log's
	node        string
	lease       *lease.Lease
	log         *slog.Logger
	writesGrace time.Duration

	mu      sync.Mutex
	writing bool          // holds the lease and serves forwarded commands
	changed chan struct{} // closed and replaced when writing changes

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Join makes the engine whose parts cfg names a member: it provisions the
// lease bucket and starts taking part in the election. Call Leave before
// closing the engine.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	nc := cfg.Log.JetStream().Conn()
	if cfg.Node == "" {
		cfg.Node = fmt.Sprintf("%s/%s", nc.ConnectedServerName(), commands.NewID())
	}
	lc := cfg.Log.Config()
	var kv jetstream.KeyValue
	if err := cfg.Log.Retry(ctx, func(ctx context.Context) error {
		var err error
		kv, err = lease.Ensure(ctx, cfg.Log.JetStream(), lc.Replicas, lc.Memory)
		return err
	}); err != nil {
		return nil, err
	}
	if cfg.WritesGrace <= 0 {
		cfg.WritesGrace = DefaultWritesGrace
	}
	m := &Member{cfg: cfg, nc: nc, node: cfg.Node, log: cfg.Logger.With("subsystem", "cluster"), changed: make(chan struct{}), writesGrace: cfg.WritesGrace,
		lease: lease.New(lease.Config{KV: kv, Node: cfg.Node, TTL: cfg.LeaseTTL, Logger: cfg.Logger.With("subsystem", "lease")})}
	rctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.lease.Run(rctx) }()
	go func() { defer m.wg.Done(); m.follow(rctx) }()
	return m, nil
}

// Leave gives the lease up if held (another member takes over at once)
// and stops serving forwarded commands.
func (m *Member) Leave(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	m.lease.Release(rctx)
	cancel()
	m.cancel()
	m.wg.Wait()
}

// Node is this member's name in the writer lease (Config.Node).
func (m *Member) Node() string { return m.node }

// Writing reports whether this member is the writer now, and a channel
// closed when that changes.
func (m *Member) Writing() (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writing, m.changed
}

// AwaitWriting blocks until this member is the writer (or ctx ends).
func (m *Member) AwaitWriting(ctx context.Context) error {
	for {
		on, changed := m.Writing()
		if on {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Writer is the lease's holder as this member last saw it.
func (m *Member) Writer() lease.Holder {
	_, h := m.lease.Held()
	return h
}

func (m *Member) setWriting(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writing == on {
		return
	}
	m.writing = on
	close(m.changed)
	m.changed = make(chan struct{})
}

// follow serves forwarded commands while this member holds the lease.
func (m *Member) follow(ctx context.Context) {
	var w *transport.Writer
	defer func() {
		m.setWriting(false)
		if w != nil {
			w.Stop()
		}
	}()
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
			return true
		}
	}
	for {
		changed := m.lease.Changed()
		held, _ := m.lease.Held()
		switch {
		case held && w == nil:
			cctx, cancel := context.WithTimeout(ctx, eventlog.AppendTimeout)
			err := m.cfg.CatchUp(cctx)
			cancel()
			if err != nil {
				m.log.Warn("writer lease held but the stream could not be read; retrying", "err", err)
				if !retry() {
					return
				}
				continue
			}
			sw, err := transport.ServeWriter(m.nc, m.cfg.Handler, 0, 0, m.log)
			if err != nil {
				m.log.Warn("serving forwarded commands", "err", err)
				if !retry() {
					return
				}
				continue
			}
			w = sw
			m.setWriting(true)
		case !held && w != nil:
			m.setWriting(false)
			w.Stop()
			w = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

var _ commands.Handler = (*Member)(nil)

// Handle answers cmd on this member: after waiting for its after_seq, a
// query locally, a command that writes by the writer (this member's
// engine, or the writer it is forwarded to). A command is forwarded as
// received: the writer's clock gives it its time.
func (m *Member) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	if seq := cmd.Header().AfterSeq; seq > 0 {
		if err := m.awaitSeq(ctx, seq); err != nil {
			return commands.Rejection(err)
		}
	}
	_, query := cmd.(commands.Query)
	if on, _ := m.Writing(); on || query {
		return m.cfg.Handler.Handle(ctx, cmd)
	}
	return m.forward(ctx, cmd)
}

// forward sends cmd to the writer. The engine's own commands (reserved
// ids: a scheduler tick, a catch-up retry) go too: the forwarding subject
// lies in the engine's account, out of every client's reach. Like a
// command carried out here, the reply comes once this member's projection
// has applied what it stored.
func (m *Member) forward(ctx context.Context, cmd commands.Command) commands.Reply {
	if err := cmd.Validate(); err != nil {
		return commands.Rejection(err)
	}
	r, err := transport.Forward(ctx, m.nc, cmd)
	if err != nil {
		return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "%v", err))
	}
	if r.Seq > 0 {
		if err := m.cfg.Proj.WaitFor(ctx, r.Seq); err != nil {
			return commands.Rejection(commands.Errorf(commands.CodeUnavailable, "", "stored at seq %d by the writer, but this member did not apply it: %v", r.Seq, err))
		}
	}
	return r
}

// awaitSeq waits until the projection has applied seq (a client's
// after_seq). A sequence the stream does not hold yet is refused at once.
func (m *Member) awaitSeq(ctx context.Context, seq uint64) error {
	p := m.cfg.Proj
	if seq <= p.Seq() {
		return nil
	}
	last, err := m.cfg.Log.Reader().LastSeq(ctx)
	if err != nil {
		return commands.Errorf(commands.CodeUnavailable, "", "%v", err)
	}
	if seq > last {
		return commands.Errorf(commands.CodeInvalid, "after_seq", "after_seq %d is beyond the stream's last sequence %d", seq, last)
	}
	if err := p.WaitFor(ctx, seq); err != nil {
		return commands.Errorf(commands.CodeUnavailable, "", "waiting for seq %d: %v", seq, err)
	}
	return nil
}
