package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/cluster"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/internal/jstest"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// join makes e a member whose lease never expires within a test: it
// changes hands only when given up.
func join(t *testing.T, e *engine.Engine) *cluster.Member {
	t.Helper()
	m, err := cluster.Join(t.Context(), parts(e, cluster.Config{LeaseTTL: time.Hour, Logger: jstest.Quiet()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	return m
}

// parts is cfg with e's parts.
func parts(e *engine.Engine, cfg cluster.Config) cluster.Config {
	cfg.Handler, cfg.Log, cfg.Proj, cfg.CatchUp = e, e.Log(), e.Projection(), e.CatchUp
	return cfg
}

// Join refuses a Config without the engine's parts, naming each, before
// it touches the server.
func TestJoinNeedsTheParts(t *testing.T) {
	_, err := cluster.Join(t.Context(), cluster.Config{Node: "n"})
	for _, f := range []string{"Handler", "Log", "Proj", "CatchUp"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+f+" is required") {
			t.Errorf("Join without %s: %v", f, err)
		}
	}
}

func awaitWriting(t *testing.T, m *cluster.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.AwaitWriting(ctx); err != nil {
		t.Fatalf("not the writer: %v", err)
	}
}

func register(version string) *commands.RegisterSnapshot {
	return &commands.RegisterSnapshot{Meta: commands.Meta{ID: commands.NewID(), At: t0}, Model: "events", Version: version, Cron: "@hourly", Start: t0}
}

// Of two members one is the writer; the other forwards what writes and
// answers once it has applied it. The writer leaving hands the lease over
// at once, and the other member carries on as the writer.
func TestForwardAndHandOver(t *testing.T) {
	node := jstest.Node(t)
	a := join(t, jstest.Engine(t, engine.Config{TrustCommandTime: true}, node))
	awaitWriting(t, a)
	eb := jstest.Engine(t, engine.Config{TrustCommandTime: true}, node)
	b := join(t, eb)
	if on, _ := b.Writing(); on {
		t.Fatal("two writers")
	}
	ctx := t.Context()
	first := register("v1")
	r := b.Handle(ctx, first)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if got := eb.Projection().Seq(); got < r.Seq {
		t.Fatalf("the forwarding member answered at seq %d, before applying seq %d", got, r.Seq)
	}
	if w := b.Writer(); w.Node == "" {
		t.Fatalf("b sees no writer: %+v", w)
	}

	a.Leave(ctx)
	awaitWriting(t, b)
	r = b.Handle(ctx, register("v2"))
	if err := r.Err(); err != nil {
		t.Fatalf("after the hand-over: %v", err)
	}
	// A retry of what the first writer stored is answered as a duplicate.
	if again := b.Handle(ctx, first); !again.Accepted || !again.Duplicate {
		t.Fatalf("a retry after the hand-over: %+v", again)
	}
}

// A read asks for a sequence the stream does not hold: refused naming
// after_seq, and nothing waits.
func TestAfterSeqBeyondTheStream(t *testing.T) {
	node := jstest.Node(t)
	m := join(t, jstest.Engine(t, engine.Config{TrustCommandTime: true}, node))
	awaitWriting(t, m)
	r := m.Handle(t.Context(), &commands.Status{Meta: commands.Meta{AfterSeq: 1_000_000}})
	var ce *commands.Error
	if r.Accepted || !errors.As(r.Err(), &ce) || ce.Code != commands.CodeInvalid || ce.Field != "after_seq" {
		t.Fatalf("after_seq beyond the stream: %+v", r)
	}
}
