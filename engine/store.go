package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/tidemark/tidemark/eventlog"
)

// A damaged store (a truncated or corrupted block file of the event
// stream) is found, never waited on: the stream denies deletes and purges
// and has no limits, so every sequence up to its last holds an event, and
// any sequence the server reports deleted, lost, or cannot deliver means
// lost events (eventlog.Damage). Open refuses such a store; the read-only
// verbs (cmd/tidemark store.go) let a reader see what is left.

// ErrDamaged marks an Open refused because the event stream lost events.
// The error also wraps the *eventlog.Damage naming them.
var ErrDamaged = errors.New("engine: refusing to open a damaged store")

// checkStore reports the events the stream lost, judged by its state and
// by the checkpoint taken at seen (0: none).
func (e *Engine) checkStore(ctx context.Context, seen uint64) error {
	var d *eventlog.Damage
	err := e.elog.Retry(ctx, func(ctx context.Context) error {
		var err error
		_, d, err = e.reader.Check(ctx, 0, seen)
		return err
	})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if d != nil {
		return damaged(d)
	}
	return nil
}

func damaged(d *eventlog.Damage) error {
	return fmt.Errorf("%w: %w", ErrDamaged, d)
}

// Failed is closed when the projection has stopped for good (Err says
// why); the engine then refuses every command. serve exits on it.
func (e *Engine) Failed() <-chan struct{} { return e.proj.Failed() }

// Err is why the projection stopped for good (nil while it runs).
func (e *Engine) Err() error {
	err := e.proj.Err()
	if d, ok := eventlog.IsDamage(err); ok && !errors.Is(err, ErrDamaged) {
		return damaged(d)
	}
	return err
}

// verifyPrefix reads the stream up to seq, the checkpoint the projection
// started from, to find events lost before it (the projection never
// folds them, so it cannot notice): on damage the projection fails. It
// reads headers only and keeps nothing, in the background.
func (e *Engine) verifyPrefix(ctx context.Context, seq uint64) {
	_, err := e.reader.Read(ctx, eventlog.ReadOptions{AtSeq: seq, CheckOnly: true})
	if d, ok := eventlog.IsDamage(err); ok {
		e.log.Error("the event stream lost events before the checkpoint", "checkpoint_seq", seq, "err", d)
		e.proj.Fail(damaged(d))
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
// stream (eventlog.Log.Retry): on a cluster, attempts repeat for up to
// eventlog.StreamWait until enough peers have joined; elsewhere one
// attempt is made.
func (e *Engine) Retry(ctx context.Context, call func(context.Context) error) error {
	return e.elog.Retry(ctx, call)
}
