package lease

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/internal/jstest"
)

func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(jstest.Node(t).Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := Ensure(t.Context(), js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

type member struct {
	l      *Lease
	cancel context.CancelFunc
	done   chan struct{}
}

func join(t *testing.T, kv jetstream.KeyValue, node string, ttl time.Duration) *member {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{l: New(Config{KV: kv, Node: node, TTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), cancel: cancel, done: make(chan struct{})}
	go func() { defer close(m.done); m.l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-m.done })
	return m
}

// await waits (bounded) until cond holds, re-checking whenever a lease
// changes.
func await(t *testing.T, what string, cond func() bool, ms ...*member) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		cases := make([]<-chan struct{}, len(ms))
		for i, m := range ms {
			cases[i] = m.l.Changed()
		}
		if cond() {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-cases[0]:
		case <-anyOf(cases[1:]):
		}
	}
}

func anyOf(chs []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	for _, c := range chs {
		go func() {
			select {
			case <-c:
				select {
				case out <- struct{}{}:
				default:
				}
			case <-time.After(30 * time.Second):
			}
		}()
	}
	return out
}

func held(m *member) bool { h, _ := m.l.Held(); return h }

// One of two engines holds the lease; the other sees it as the holder.
// Released, it passes to the other without waiting for it to expire.
func TestReleaseHandsOver(t *testing.T) {
	kv := bucket(t)
	a := join(t, kv, "a", time.Hour) // never expires by itself here
	await(t, "a to hold the lease", func() bool { return held(a) }, a)
	b := join(t, kv, "b", time.Hour)
	await(t, "b to see a as the holder", func() bool { _, h := b.l.Held(); return h.Node == "a" }, b)
	if held(b) {
		t.Fatal("b holds the lease a holds")
	}
	_, ha := a.l.Held()
	a.l.Release(t.Context())
	await(t, "b to take the released lease", func() bool { return held(b) }, b)
	_, hb := b.l.Held()
	if hb.Node != "b" || hb.Term <= ha.Term {
		t.Fatalf("b's hold %+v after a's %+v: want a later term", hb, ha)
	}
	if held(a) {
		t.Fatal("a still holds the lease it released")
	}
}

// A holder that stops renewing (its process died) loses the lease to
// another engine once TTL has passed.
func TestExpiredLeaseIsTaken(t *testing.T) {
	kv := bucket(t)
	ttl := 300 * time.Millisecond
	a := join(t, kv, "a", ttl)
	await(t, "a to hold the lease", func() bool { return held(a) }, a)
	b := join(t, kv, "b", ttl)
	a.cancel() // no release: as if killed
	<-a.done
	await(t, "b to take the expired lease", func() bool { return held(b) }, b)
}

// While its holder renews it, nobody else takes the lease, however long.
func TestRenewedLeaseIsKept(t *testing.T) {
	kv := bucket(t)
	ttl := 200 * time.Millisecond
	a := join(t, kv, "a", ttl)
	await(t, "a to hold the lease", func() bool { return held(a) }, a)
	b := join(t, kv, "b", ttl)
	// Watch the key for 20 renewals: it must stay a's.
	e, err := kv.Get(t.Context(), Key)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(t.Context(), Key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := e.Revision()
	for n := 0; n < 20; {
		select {
		case u := <-w.Updates():
			if u == nil {
				continue
			}
			if u.Revision() <= rev {
				continue
			}
			rev = u.Revision()
			n++
			if held(b) {
				t.Fatalf("b took the lease a keeps renewing (revision %d)", rev)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no renewal for 30s")
		}
	}
	if !held(a) {
		t.Fatal("a lost the lease it renews")
	}
}

// Taking the lease is a compare-and-set: of two engines that saw the same
// revision, one wins.
func TestTakeIsCompareAndSet(t *testing.T) {
	kv := bucket(t)
	a := New(Config{KV: kv, Node: "a"})
	b := New(Config{KV: kv, Node: "b"})
	ctx := t.Context()
	rev, term, err := a.take(ctx, 0)
	if err != nil || term == 0 {
		t.Fatalf("a takes the free lease: %v", err)
	}
	if _, _, err := b.take(ctx, 0); err == nil {
		t.Fatal("b created the lease a holds")
	}
	if _, _, err := b.take(ctx, term); err == nil {
		t.Fatal("b took the lease at a stale revision")
	}
	if _, _, err := b.take(ctx, rev); err != nil {
		t.Fatalf("b takes the lease at its current revision: %v", err)
	}
}
