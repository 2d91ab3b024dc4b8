package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
)

// Keeper writes checkpoints of Proj to KV: Run whenever Every events were
// folded since the last one, Save on demand (the engine's Close).
type Keeper struct {
	Proj *live.Projection
	KV   jetstream.KeyValue
	// Every is how many newly folded events make a checkpoint due.
	// Default DefaultEvery.
	Every int
	// Seq is the sequence of the checkpoint stored already (the one Proj
	// started from; 0: none).
	Seq uint64
	// Logger receives Run's failures. Default slog.Default().
	Logger *slog.Logger
	// When, if set, is asked before each checkpoint Run finds due: Run
	// writes only while it says true (in a cluster, while this member is
	// the writer: one member writes the checkpoints all of them load).
	// Save, on demand and on the engine's Close, does not ask.
	When func() bool

	mu sync.Mutex // guards Seq while Run and Save share the keeper
}

// Save writes the projection to KV now: nothing when it is there already,
// or when the projection failed (a projection stopped by a damaged store
// keeps the checkpoint that shows how far the stream once reached).
func (k *Keeper) Save(ctx context.Context) error {
	if k.Proj.Err() != nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var value []byte
	var seq uint64
	var err error
	k.Proj.ReadLast(func(st *projections.State, lastID string) {
		if st.Seq > k.Seq {
			seq = st.Seq
			value, err = Encode(st, lastID)
		}
	})
	if err != nil || value == nil {
		return err
	}
	if _, err := k.KV.Put(ctx, Key, value); err != nil {
		return fmt.Errorf("checkpoint: at seq %d: %w", seq, err)
	}
	k.Seq = seq
	return nil
}

// Run writes a checkpoint whenever Every events were folded since the
// last one, until ctx ends or the projection fails.
func (k *Keeper) Run(ctx context.Context) {
	every := k.Every
	if every <= 0 {
		every = DefaultEvery
	}
	log := k.Logger
	if log == nil {
		log = slog.Default()
	}
	for {
		changed, err := k.Proj.Watch()
		if err != nil {
			return
		}
		k.mu.Lock()
		due := k.Proj.Seq() >= k.Seq+uint64(every)
		k.mu.Unlock()
		if due && (k.When == nil || k.When()) {
			if err := k.Save(ctx); err != nil && ctx.Err() == nil {
				log.Warn("checkpoint", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
