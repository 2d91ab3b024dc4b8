package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
)

// TestCommandIDsCannotCollide (item 1): ids that differ only by
// surrounding space, ids in the engine's reserved namespace, and an id
// reused with another body are refused with typed errors naming `id`;
// nothing is acknowledged that was not stored.
func TestCommandIDsCannotCollide(t *testing.T) {
	s := openStrict(t, at(6))
	s.deploy(t, "prod", "d1", "v1")
	reg := func(id, model string) *commands.RegisterSnapshot {
		return &commands.RegisterSnapshot{Meta: commands.Meta{ID: id}, Model: model, Version: "v1", Cron: "@hourly", Start: t0}
	}
	if r := s.do(t, reg("reg-1", "clicks")); !r.Accepted || r.Duplicate {
		t.Fatalf("first registration: %+v", r)
	}
	seq, state := lastSeq(t, s.e), stateJSON(t, s.e)

	// Surrounding space: once mapped onto reg-1's Nats-Msg-Id, the stream
	// called it a duplicate and the client was told "applied".
	for _, id := range []string{"reg-1 ", " reg-1", "reg-1\t", "\treg-1"} {
		r := s.do(t, reg(id, "views"))
		refused(t, fmt.Sprintf("id %q", id), r, commands.CodeInvalid, "id")
	}
	if registered(s.e, "views@v1") {
		t.Error("views@v1 was registered under a padded id")
	}
	// Other characters outside the id charset, and a long id.
	for _, id := range []string{"reg 1", "reg-1\x00", "rég-1", strings.Repeat("x", commands.MaxIDLen+1)} {
		refused(t, fmt.Sprintf("id %q", id), s.do(t, reg(id, "views")), commands.CodeInvalid, "id")
	}
	unchanged(t, s.e, "ids outside the charset", seq, state)

	// The same id with another body (another cron; another kind) is an
	// idempotency conflict naming the id, never "already applied".
	other := reg("reg-1", "clicks")
	other.Cron = "@daily"
	for _, cmd := range []commands.Command{other, reg("reg-1", "views"), &commands.Promote{Meta: commands.Meta{ID: "reg-1"}, Plan: "d1"}} {
		r := s.do(t, cmd)
		refused(t, cmd.Kind()+" reusing reg-1", r, commands.CodeIdempotencyConflict, "id")
		if !strings.Contains(r.Message, `"reg-1"`) {
			t.Errorf("%s reusing reg-1: the message does not name the id: %s", cmd.Kind(), r.Message)
		}
	}
	unchanged(t, s.e, "reused id", seq, state)
	// The same command again (another actor is not another body) is the
	// duplicate it always was.
	again := reg("reg-1", "clicks")
	again.Actor = "retrying-client"
	if r := s.do(t, again); !r.Accepted || !r.Duplicate {
		t.Errorf("retry of reg-1: %+v", r)
	}

	// The engine's own ids are reserved: a client cannot claim them.
	for _, id := range []string{scheduler.TickID("prod", at(7)), scheduler.RetryID("d1", 9), "$work:work-9-scheduled/0"} {
		r := s.do(t, reg(id, "views"))
		refused(t, fmt.Sprintf("reserved id %q", id), r, commands.CodeInvalid, "id")
	}
	unchanged(t, s.e, "reserved ids", seq, state)
	if registered(s.e, "views@v1") {
		t.Error("views@v1 was registered")
	}

	// A client id that looks like an old internal one is just an id: the
	// scheduler's tick is still recorded.
	if r := s.do(t, reg("tick:prod:"+at(7).Format(time.RFC3339), "sessions")); !r.Accepted {
		t.Errorf("a tick-like client id: %+v", r)
	}
	s.set(at(7))
	advs, _, err := ticker(s.e).Tick(t.Context(), "prod", at(7), 0)
	if err != nil || len(advs) != 1 || advs[0].Tick != at(7) {
		t.Errorf("the scheduler's tick at 07:00 after a client used its id: %v %+v", err, advs)
	}
}

// TestClientCannotSwallowEngineCommands (item 1): a client command with
// the id of the engine's catch-up retry, or of the built-in worker's
// completion, no longer takes its place.
func TestClientCannotSwallowEngineCommands(t *testing.T) {
	s := openStrict(t, at(6))
	ctx := t.Context()
	s.deploy(t, "prod", "d1", "v1")
	must(t, s.e.Handle(ctx, &commands.RegisterSnapshot{Meta: own(), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	p2 := must(t, s.e.Handle(ctx, &commands.BuildPlan{Meta: own(), Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v2"}, Bounds: commands.Bounds{MaxCatchUpAdvances: 1}}))
	must(t, s.e.Handle(ctx, &commands.CompleteIntervals{Meta: own(), Model: "events", Version: "v2", Ranges: p2.Plan.Candidates[0].Backfill}))
	s.set(at(7))
	if _, _, err := ticker(s.e).Tick(ctx, "prod", at(7), 0); err != nil {
		t.Fatal(err)
	}
	must(t, s.e.Handle(ctx, &commands.CompleteIntervals{Meta: own(), Model: "events", Version: "v1", Ranges: []interval.Range{rng(6, 7)}, RunKind: "scheduled"}))
	if r := must(t, s.e.Handle(ctx, &commands.Promote{Meta: own(), Plan: "p2"})); r.CatchUp == nil {
		t.Fatalf("want a catch-up request: %+v", r)
	}
	var reqSeq uint64
	s.e.Projection().Read(func(st *projections.State) { reqSeq = st.Plans["p2"].CatchUpSeq })

	// The attack: claim the retry's id before the work is done.
	r := s.do(t, &commands.RegisterSnapshot{Meta: commands.Meta{ID: scheduler.RetryID("p2", reqSeq)}, Model: "clicks", Version: "v1", Cron: "@hourly", Start: t0})
	refused(t, "the catch-up retry's id", r, commands.CodeInvalid, "id")
	// The id as it used to be spelled is an ordinary client id.
	legacy := fmt.Sprintf("catch-up-retry:p2:%d", reqSeq)
	if r := s.do(t, &commands.RegisterSnapshot{Meta: commands.Meta{ID: legacy}, Model: "views", Version: "v1", Cron: "@hourly", Start: t0}); !r.Accepted {
		t.Errorf("id %q: %+v", legacy, r)
	}
	must(t, s.e.Handle(ctx, &commands.CompleteIntervals{Meta: own(), Model: "events", Version: "v2", Ranges: []interval.Range{rng(6, 7)}, RunKind: "catch_up"}))
	if err := catchUps(s.e).Step(ctx); err != nil {
		t.Fatal(err)
	}
	var d *events.PromotionDecided
	s.e.Projection().Read(func(st *projections.State) { d = st.Plans["p2"].Decision })
	if d == nil || d.CatchUpSeq != reqSeq || d.Outcome != events.Accepted {
		t.Fatalf("the strict retry was not recorded: %+v", d)
	}

	// The built-in worker's completion ids: a client completing something
	// under the id the worker will use for a plan's backfill does not
	// stop the backfill from being recorded.
	pub := &work.Publisher{Log: s.e.Log(), Clock: s.e.Now, Logger: quiet(), Runner: &inproc.Worker{Handler: s.e, Actor: "worker:builtin"}}
	done := make(chan error, 8)
	pub.Done = func(item work.Item, err error) {
		if err != nil {
			err = fmt.Errorf("item %s: %w", item.ID, err)
		}
		select {
		case done <- err:
		default:
		}
	}
	if err := pub.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, s.e.Handle(ctx, &commands.RegisterSnapshot{Meta: own(), Model: "events", Version: "v3", Cron: "@hourly", Start: t0}))
	p3 := must(t, s.e.Handle(ctx, &commands.BuildPlan{Meta: own(), Plan: "p3", Env: "prod", Versions: map[string]string{"events": "v3"}}))
	item := fmt.Sprintf("work-%d-backfill", p3.Seq)
	for _, id := range []string{item + "/0", "$work:" + item + "/0"} {
		r := s.do(t, &commands.CompleteIntervals{Meta: commands.Meta{ID: id}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(0, 1)}, RunKind: "manual"})
		if strings.HasPrefix(id, "$") {
			refused(t, "the built-in worker's id", r, commands.CodeInvalid, "id")
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go pub.Run(rctx)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backfill item was not run")
	}
	var cov interval.Set
	s.e.Projection().Read(func(st *projections.State) { cov = st.SnapshotCoverage("events@v3") })
	if want := interval.NewSet(p3.Plan.Candidates[0].Backfill...); !cov.Equal(want) {
		t.Fatalf("events@v3 covers %v after its backfill, want %v", cov, want)
	}
}

// TestDuplicateAckIsProved (item 1): when the stream answers a publish as
// a duplicate of a message that is not this command (a foreign writer
// used its Nats-Msg-Id), the client is not told "applied": either the
// command is stored after all, or it is refused.
func TestDuplicateAckIsProved(t *testing.T) {
	s := openStrict(t, at(7))
	ctx := t.Context()
	s.deploy(t, "prod", "d1", "v1")
	ids := events.NewIDSource()
	for _, c := range []struct {
		cmd     commands.Command
		foreign events.Payload // on the subject the command writes
	}{
		// a completion (the group-commit path) and a registration (one at a time)
		{&commands.CompleteIntervals{Meta: commands.Meta{ID: "done-1"}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(6, 7)}},
			events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{rng(0, 1)}, RunKind: events.RunManual}},
		{&commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg-9"}, Model: "events", Version: "v9", Cron: "@hourly", Start: t0},
			events.IntervalsInvalidated{Snapshot: "events@v9", Table: "events@v9", Ranges: []interval.Range{rng(0, 1)}}},
	} {
		cmd := c.cmd
		foreign := events.New(ids, at(7), c.foreign)
		foreign.Causation = "foreign"
		b, err := events.Encode(foreign)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(c.foreign.Subject())
		m.Data = b
		m.Header.Set(jetstream.MsgIDHeader, eventlog.MsgID(cmd.Kind(), cmd.Header().ID, false))
		ack, err := s.e.Log().JetStream().PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.e.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		r := s.do(t, cmd)
		var stored bool
		var cov interval.Set
		s.e.Projection().Read(func(st *projections.State) {
			_, stored = st.Commands[cmd.Header().ID]
			cov = st.SnapshotCoverage("events@v1")
		})
		t.Logf("%s after a foreign message took its message id: accepted %v, code %q, seq %d (the foreign one: %d): %s", cmd.Kind(), r.Accepted, r.Code, r.Seq, ack.Sequence, r.Message)
		switch {
		case r.Accepted && (!stored || r.Seq == ack.Sequence):
			t.Errorf("%s: acknowledged (seq %d, duplicate %v) but not stored", cmd.Kind(), r.Seq, r.Duplicate)
		case r.Accepted && cmd.Kind() == commands.KindCompleteIntervals && !cov.Covers(rng(6, 7)):
			t.Errorf("%s: acknowledged but the coverage lacks it: %v", cmd.Kind(), cov)
		case !r.Accepted && stored:
			t.Errorf("%s: refused (%s) but stored", cmd.Kind(), r.Message)
		}
	}
}
