package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/live"
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
// by the checkpoint taken at seen (0: none); else it returns the stream's
// last sequence.
func (e *Engine) checkStore(ctx context.Context, seen uint64) (uint64, error) {
	var last uint64
	var d *eventlog.Damage
	err := e.elog.Retry(ctx, func(ctx context.Context) error {
		var err error
		last, d, err = e.reader.Check(ctx, 0, seen)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	if d != nil {
		return 0, fmt.Errorf("%w: %w", ErrDamaged, d)
	}
	return last, nil
}

// damaged marks err ErrDamaged when it is an *eventlog.Damage not yet
// marked.
func damaged(err error) error {
	if d, ok := eventlog.IsDamage(err); ok && !errors.Is(err, ErrDamaged) {
		return fmt.Errorf("%w: %w", ErrDamaged, d)
	}
	return err
}

// Failed is closed when the projection has stopped for good (Err says
// why); the engine then refuses every command. serve exits on it.
func (e *Engine) Failed() <-chan struct{} { return e.proj.Failed() }

// Err is why the projection stopped for good (nil while it runs).
func (e *Engine) Err() error { return damaged(e.proj.Err()) }

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

// Stats describes the live projection (live.Stats: Seq, Folded counts
// the events folded since the engine opened, not those a checkpoint
// brought in, Lag).
type Stats struct {
	live.Stats
	// CheckpointSeq is the checkpoint the projection started from (0: it
	// folded the stream from the start).
	CheckpointSeq uint64 `json:"checkpoint_seq"`
	// CheckpointRejected says why a stored checkpoint was not used.
	CheckpointRejected string `json:"checkpoint_rejected,omitempty"`
}

// Stats returns the projection's statistics.
func (e *Engine) Stats() Stats {
	return Stats{Stats: e.proj.Stats(), CheckpointSeq: e.loadedSeq, CheckpointRejected: e.cpReject}
}

// Checkpoint writes the live projection to the checkpoint bucket now
// (nothing when it is already there, when checkpoints are off, or when the
// projection failed: checkpoint.Keeper.Save).
func (e *Engine) Checkpoint(ctx context.Context) error {
	if e.keeper == nil {
		return nil
	}
	return e.keeper.Save(ctx)
}

// CatchUp waits until the projection has applied everything the stream held
// when it was called. It fails at once, with ErrDamaged, when the stream
// lost events the projection would otherwise wait for (see store.go).
func (e *Engine) CatchUp(ctx context.Context) error {
	last, err := e.checkStore(ctx, 0)
	if err != nil {
		return err
	}
	return e.waitFor(ctx, last)
}

// waitFor waits until the projection has applied seq (live.WaitFor); a
// projection that found the stream damaged fails it with ErrDamaged.
func (e *Engine) waitFor(ctx context.Context, seq uint64) error {
	return damaged(e.proj.WaitFor(ctx, seq))
}

// Projection is the engine's live projection.
func (e *Engine) Projection() *live.Projection { return e.proj }
