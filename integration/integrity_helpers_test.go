package integration

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
)

// Integrity tests (issue 15, items 1, 4 and 5): what a hostile but
// authenticated client (the service role of docs/auth.conf) can do to
// command ids and times, against an engine run as `tidemark serve` runs
// it.

// strictEngine is an engine as `tidemark serve` runs it: docs/auth.conf,
// a listener, its own clock as the only clock (commands may not carry
// `at`), and the command service. The test moves the clock; svc is a
// client with the service role.
type strictEngine struct {
	e   *engine.Engine
	now atomic.Pointer[time.Time]
	svc *transport.Client
}

func openStrict(t *testing.T, now time.Time) *strictEngine {
	t.Helper()
	s := &strictEngine{}
	s.set(now)
	node := authNode(t, "")
	e := jstest.Engine(t, engine.Config{Clock: func() time.Time { return *s.now.Load() }}, node)
	s.e = e
	clientURL := node.ClientURL()
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	nc, _ := asUser(t, clientURL, "service")
	s.svc = transport.NewClient(nc)
	s.svc.Timeout = 10 * time.Second
	return s
}

func (s *strictEngine) set(now time.Time) { s.now.Store(&now) }

// do sends cmd as the service user.
func (s *strictEngine) do(t *testing.T, cmd commands.Command) commands.Reply {
	t.Helper()
	r, err := s.svc.Do(t.Context(), cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd.Kind(), err)
	}
	return r
}

// own is an in-process command of the operator: a fresh id, no `at`.
func own() commands.Meta { return commands.Meta{ID: commands.NewID(), Actor: "test"} }

// deploy registers events@version (hourly from t0), plans it into env,
// backfills and promotes it, in-process and on the engine's clock.
func (s *strictEngine) deploy(t *testing.T, env, plan, version string) {
	t.Helper()
	ctx := t.Context()
	must(t, s.e.Handle(ctx, &commands.RegisterSnapshot{Meta: own(), Model: "events", Version: version, Cron: "@hourly", Start: t0}))
	pr := must(t, s.e.Handle(ctx, &commands.BuildPlan{Meta: own(), Plan: plan, Env: env, Versions: map[string]string{"events": version}}))
	for _, c := range pr.Plan.Candidates {
		if len(c.Backfill) > 0 {
			must(t, s.e.Handle(ctx, &commands.CompleteIntervals{Meta: own(), Model: c.Model, Version: version, Ranges: c.Backfill, RunKind: "backfill"}))
		}
	}
	if r := must(t, s.e.Handle(ctx, &commands.Promote{Meta: own(), Plan: plan})); r.Decision == nil || r.Decision.Outcome != events.Accepted {
		t.Fatalf("deploy %s: %+v", plan, r)
	}
}

// refused checks that r is a rejection with code on field.
func refused(t *testing.T, what string, r commands.Reply, code commands.Code, field string) {
	t.Helper()
	if r.Accepted || r.Code != code || r.Field != field {
		t.Errorf("%s: want %s on %q, got accepted=%v code=%q field=%q duplicate=%v: %s", what, code, field, r.Accepted, r.Code, r.Field, r.Duplicate, r.Message)
	}
}

// unchanged checks that nothing was appended and the state is as before.
func unchanged(t *testing.T, e *engine.Engine, what string, seq uint64, state string) {
	t.Helper()
	if got := lastSeq(t, e); got != seq {
		t.Errorf("%s: the stream moved from %d to %d", what, seq, got)
	}
	if got := stateJSON(t, e); got != state {
		t.Errorf("%s: the projection changed", what)
	}
}

func registered(e *engine.Engine, snapshot string) bool {
	ok := false
	e.Projection().Read(func(st *projections.State) { _, ok = st.Snapshots[snapshot] })
	return ok
}
