// Package lease decides which engine of a cluster is the writer: the
// holder of one key in a JetStream key-value bucket, renewed by its holder
// and taken over by another engine when it stops being renewed.
//
// Invariants. At most one engine holds the key at a revision: taking and
// renewing it are compare-and-set updates on the revision last seen, so of
// two engines racing, one wins. A holder that cannot renew within TTL
// considers the lease lost before any other engine may consider it
// expired (both measure TTL on their own monotonic clocks, the others from
// when they last saw the key change, which is after the renewal). The
// lease is for liveness only: two engines that both believe they hold it
// for a moment stay correct, because every append carries the fencing
// token (the stream sequence its decision read; see package decide), and
// the stale one's append fails.
//
// Importers: cluster.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the key-value bucket that holds the writer lease.
const Bucket = "tidemark-lease"

// Key is the lease's key in Bucket.
const Key = "writer"

// Defaults.
const (
	DefaultTTL = 2 * time.Second
)

// Holder is the lease's value: who holds it, and since which revision.
type Holder struct {
	// Node names the holding engine (Config.Node).
	Node string `json:"node"`
	// Term is the revision at which Node took the lease: it grows with
	// every change of holder.
	Term uint64 `json:"term"`
}

// Ensure creates (or updates) the lease bucket.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int, memory bool) (jetstream.KeyValue, error) {
	if replicas < 1 {
		replicas = 1
	}
	storage := jetstream.FileStorage
	if memory {
		storage = jetstream.MemoryStorage
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "tidemark: which engine is the writer (one key, renewed by its holder)",
		History: 1, Storage: storage, Replicas: replicas, MaxValueSize: 1024,
	})
	if err != nil {
		return nil, fmt.Errorf("lease: bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Config configures a Lease.
type Config struct {
	KV jetstream.KeyValue
	// Node names this engine; unique among the engines sharing KV.
	Node string
	// TTL is how long a lease lives without renewal. Default DefaultTTL.
	TTL time.Duration
	// Renew is how often the holder renews, and others look. Default
	// TTL/4, at most 500 ms.
	Renew  time.Duration
	Logger *slog.Logger
}

// Lease takes part in the election of one writer.
type Lease struct {
	cfg Config

	mu      sync.Mutex
	held    bool
	holder  Holder
	changed chan struct{} // closed and replaced when held or holder changes
	release chan chan struct{}
	stopped chan struct{} // closed when Run returns
}

// New returns a lease that runs once Run is called.
func New(cfg Config) *Lease {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Renew <= 0 {
		cfg.Renew = min(cfg.TTL/4, 500*time.Millisecond)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lease{cfg: cfg, changed: make(chan struct{}), release: make(chan chan struct{}), stopped: make(chan struct{})}
}

// Held reports whether this engine holds the lease, and the holder as last
// seen.
func (l *Lease) Held() (bool, Holder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.holder
}

// Changed is closed when Held's answer changes.
func (l *Lease) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *Lease) set(held bool, h Holder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if held == l.held && h == l.holder {
		return
	}
	if held != l.held {
		l.cfg.Logger.Info("writer lease", "held", held, "holder", h.Node, "term", h.Term)
	}
	l.held, l.holder = held, h
	close(l.changed)
	l.changed = make(chan struct{})
}

// Release gives the lease up now if held (so another engine need not wait
// for it to expire) and stops Run. Call it before closing the connection.
func (l *Lease) Release(ctx context.Context) {
	done := make(chan struct{})
	select {
	case l.release <- done:
		select {
		case <-done:
		case <-ctx.Done():
		}
	case <-l.stopped:
	case <-ctx.Done():
	}
}

// Run takes part in the election until ctx ends or Release: it renews the
// lease while it holds it, and takes it when its holder stopped renewing
// it for TTL (or nobody holds it).
func (l *Lease) Run(ctx context.Context) {
	defer close(l.stopped)
	kv, cfg := l.cfg.KV, l.cfg
	var (
		rev     uint64    // the key's revision as last seen (0: absent)
		seen    time.Time // when rev was last seen to change
		renewed time.Time // when this engine last renewed (while held)
		held    bool
		holder  Holder
	)
	tick := time.NewTicker(cfg.Renew)
	defer tick.Stop()
	for {
		now := time.Now()
		actx, cancel := context.WithTimeout(ctx, cfg.Renew*2)
		switch {
		case held:
			h := holder
			b, _ := json.Marshal(h)
			r, err := kv.Update(actx, Key, b, rev)
			switch {
			case err == nil:
				rev, renewed = r, now
			case isWrongRevision(err):
				held, holder = false, Holder{}
				cfg.Logger.Warn("writer lease taken over", "err", err)
			case now.Sub(renewed) > cfg.TTL*3/4:
				// Not renewed for most of TTL: others may take it soon.
				held, holder = false, Holder{}
				cfg.Logger.Warn("writer lease not renewed in time; giving it up", "err", err)
			}
		default:
			e, err := kv.Get(actx, Key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
				// Nobody holds it (never taken, or released).
				if r, term, err := l.take(actx, 0); err == nil {
					rev, renewed, held, holder = r, now, true, Holder{Node: cfg.Node, Term: term}
				}
			case err != nil:
				// The bucket is unreachable (an election): look again.
			case e.Revision() != rev:
				rev, seen = e.Revision(), now
				var h Holder
				if json.Unmarshal(e.Value(), &h) == nil {
					holder = h
				}
			case now.Sub(seen) > cfg.TTL:
				// Not renewed for TTL since this engine saw it change.
				if r, term, err := l.take(actx, rev); err == nil {
					rev, renewed, held, holder = r, now, true, Holder{Node: cfg.Node, Term: term}
				}
			}
		}
		cancel()
		l.set(held, holder)
		select {
		case <-ctx.Done():
			l.set(false, Holder{})
			return
		case done := <-l.release:
			if held {
				rctx, cancel := context.WithTimeout(context.Background(), cfg.TTL)
				if err := kv.Delete(rctx, Key, jetstream.LastRevision(rev)); err != nil {
					cfg.Logger.Warn("writer lease: release", "err", err)
				}
				cancel()
			}
			l.set(false, Holder{})
			close(done)
			return
		case <-tick.C:
		}
	}
}

// take sets the key to this engine at revision rev (0: the key is absent
// or deleted). It returns the key's new revision and the term: the
// revision of the take, which the value then records.
func (l *Lease) take(ctx context.Context, rev uint64) (uint64, uint64, error) {
	b, _ := json.Marshal(Holder{Node: l.cfg.Node})
	var term uint64
	var err error
	if rev == 0 {
		term, err = l.cfg.KV.Create(ctx, Key, b)
	} else {
		term, err = l.cfg.KV.Update(ctx, Key, b, rev)
	}
	if err != nil {
		return 0, 0, err
	}
	b, _ = json.Marshal(Holder{Node: l.cfg.Node, Term: term})
	if r, err := l.cfg.KV.Update(ctx, Key, b, term); err == nil {
		return r, term, nil
	}
	return term, term, nil
}

func isWrongRevision(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
