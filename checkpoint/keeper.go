package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
)

// Keeper writes checkpoints of Proj to KV: Run whenever Every events were
// folded since the last one, Save on demand (the engine's Close).
//
// Several keepers may share one KV (the members of a cluster). A keeper
// never replaces a newer checkpoint of the same stream with an older one:
// each write is conditional on the revision it read, and a stored
// checkpoint at or past the projection's sequence is left in place unless
// Reader shows it is not this stream's (the event at its sequence has
// another id). One Reader cannot read is kept too: a replica behind, an
// election, or a stream that lost its tail (the stored sequence is then
// the evidence Open's damage check needs).
type Keeper struct {
	Proj *live.Projection
	KV   jetstream.KeyValue
	// Reader tells whether a stored checkpoint newer than the projection
	// is another stream's (the event at its sequence has another id):
	// only then is it replaced. Nil: a newer one is always replaced.
	Reader *eventlog.Reader
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
	// Read, decide, write under the revision read; another keeper's write
	// in between makes the write fail, and the decision is taken again.
	for attempt := 1; ; attempt++ {
		entry, err := k.KV.Get(ctx, Key)
		var rev uint64
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("checkpoint: at seq %d: read the stored one: %w", seq, err)
		default:
			rev = entry.Revision()
			if stored := k.newer(ctx, entry.Value(), seq); stored != 0 {
				k.Seq = stored
				return nil
			}
		}
		if rev == 0 {
			_, err = k.KV.Create(ctx, Key, value)
		} else {
			_, err = k.KV.Update(ctx, Key, value, rev)
		}
		if err == nil {
			k.Seq = seq
			return nil
		}
		lost := errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
		if !lost || attempt == 3 {
			return fmt.Errorf("checkpoint: at seq %d: %w", seq, err)
		}
		// The read may have come from a replica behind (a KV get is a
		// direct get): give it time to catch up.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// newer is the sequence of the stored checkpoint b when it is usable (this
// build could load it), at or past seq, and not shown to be another
// stream's; 0 otherwise: b may be replaced.
func (k *Keeper) newer(ctx context.Context, b []byte, seq uint64) uint64 {
	h, ok := usable(b)
	if !ok || h.Seq < seq || k.Reader == nil {
		return 0
	}
	rec, err := k.Reader.Get(ctx, h.Seq)
	if err == nil && (rec.Err == nil || errors.Is(rec.Err, events.ErrForeign)) && rec.Event.ID != h.LastEventID {
		return 0 // another stream's checkpoint
	}
	return h.Seq
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
