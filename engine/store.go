package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/replay"
)

// A damaged store (a truncated or corrupted block file of the event
// stream) is found, never waited on: the stream denies deletes and purges
// and has no limits, so every sequence up to its last holds an event, and
// any sequence the server reports deleted, lost, or cannot deliver means
// lost events (replay.Damage). Open refuses such a store; OpenStore lets a
// reader see what is left.

// ErrDamaged marks an Open refused because the event stream lost events.
// The error also wraps the *replay.Damage naming them.
var ErrDamaged = errors.New("engine: refusing to open a damaged store")

// checkStore reports the events the stream lost, judged by its state and
// by the checkpoint taken at seen (0: none).
func (e *Engine) checkStore(ctx context.Context, seen uint64) error {
	var d *replay.Damage
	_, err := retryJS(ctx, e, func(ctx context.Context) (struct{}, error) {
		var err error
		_, d, err = replay.CheckStream(ctx, e.stream, 0, seen)
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("engine: stream info: %w", err)
	}
	if d != nil {
		return damaged(d)
	}
	return nil
}

func damaged(d *replay.Damage) error {
	return fmt.Errorf("%w: %w", ErrDamaged, d)
}

// Stall bounds, while the projection waits for a sequence: after
// stallProbe without progress it asks the stream whether the next
// sequence is there at all (missing: the wait ends with the damage at
// once); after stallLimit without progress although it is there, the
// wait gives up.
const (
	stallProbe = time.Second
	stallLimit = 30 * time.Second
)

// probe is the projector's stall check: nil when the events from..to
// are all there (the consumer is just slow), else the damage.
func (e *Engine) probe(ctx context.Context, from, to uint64) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return replay.Probe(pctx, e.stream, from, to)
}

// Store is a stopped store opened for reading (OpenStore).
type Store struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	// CheckpointSeq is the sequence of the projection checkpoint stored
	// with the stream (0: none): the stream held at least that many
	// events (replay.Options.MinLastSeq).
	CheckpointSeq uint64
}

// JetStream is the store's JetStream context.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Close stops the embedded server.
func (s *Store) Close() {
	s.nc.Close()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// OpenStore starts an embedded server on the data dir of a stopped store
// to read it: unlike Open it creates and changes nothing (no stream, no
// checkpoint) and folds no projection, so it opens a damaged store too;
// replay.ReadWith then reports what the stream lost.
func OpenStore(ctx context.Context, dataDir string) (*Store, error) {
	srv, err := startEmbedded(Config{DataDir: dataDir})
	if err != nil {
		return nil, err
	}
	s := &Store{srv: srv}
	if s.nc, err = nats.Connect("", nats.InProcessServer(srv), nats.Name("tidemark-reader")); err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("engine: connect: %w", err)
	}
	fail := func(err error) (*Store, error) { s.Close(); return nil, err }
	if s.js, err = jetstream.New(s.nc); err != nil {
		return fail(fmt.Errorf("engine: jetstream: %w", err))
	}
	if _, err := s.js.Stream(ctx, events.StreamName); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(fmt.Errorf("engine: no %s stream in %s: not a tidemark data dir", events.StreamName, dataDir))
		}
		return fail(fmt.Errorf("engine: stream %s: %w", events.StreamName, err))
	}
	if s.CheckpointSeq, err = StoredCheckpointSeq(ctx, s.js); err != nil {
		return fail(fmt.Errorf("engine: checkpoint bucket: %w", err))
	}
	return s, nil
}

// Failed is closed when the projection has stopped for good (Err says
// why); the engine then refuses every command. serve exits on it.
func (e *Engine) Failed() <-chan struct{} { return e.proj.failed }

// Err is why the projection stopped for good (nil while it runs).
func (e *Engine) Err() error {
	e.proj.mu.RLock()
	defer e.proj.mu.RUnlock()
	return e.proj.err
}

// verifyPrefix reads the stream up to seq, the checkpoint the projection
// started from, to find events lost before it (the projection never
// folds them, so it cannot notice): on damage the projection fails. It
// reads headers only and keeps nothing, in the background.
func (e *Engine) verifyPrefix(ctx context.Context, seq uint64) {
	_, err := replay.ReadWith(ctx, e.js, replay.Options{AtSeq: seq, CheckOnly: true})
	if d, ok := replay.IsDamage(err); ok {
		e.log.Error("the event stream lost events before the checkpoint", "checkpoint_seq", seq, "err", d)
		e.proj.fail(damaged(d))
		return
	}
	if err != nil && ctx.Err() == nil {
		e.log.Warn("could not verify the events before the checkpoint", "checkpoint_seq", seq, "err", err)
	}
}

// Logger is the engine's logger (Config.Logger).
func (e *Engine) Logger() *slog.Logger { return e.log }

// Storage is the event stream's replica count and storage, which the
// streams other packages provision (the work stream) follow.
func (e *Engine) Storage() (replicas int, memory bool) {
	return e.cfg.Replicas, e.cfg.MemoryStorage
}

// Retry runs a JetStream API call the way the engine provisions its own
// stream: on a cluster, attempts repeat for up to StreamWait until enough
// peers have joined; elsewhere one attempt is made.
func (e *Engine) Retry(ctx context.Context, call func(context.Context) error) error {
	_, err := retryJS(ctx, e, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}
