package integration

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work"
	"github.com/vmihailenco/msgpack/v5"
)

// rawEvent encodes an event by hand, as a writer that checks nothing
// would (an older build, or a foreign one): the envelope at `at`, the
// payload as the reflective encoder writes it.
func rawEvent(t *testing.T, at time.Time, p events.Payload) []byte {
	t.Helper()
	data, err := msgpack.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := msgpack.Marshal(map[string]any{"id": events.NewIDSource().New(at), "type": string(p.EventType()), "schema": 1,
		"at": at, "causation": "old-build", "data": msgpack.RawMessage(data)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTimesThatPoison (item 5): times outside the documented range are
// refused in commands, naming the field; an out-of-range event already
// in the stream stops neither the work publisher nor the JSON status.
func TestTimesThatPoison(t *testing.T) {
	s := openStrict(t, at(7))
	ctx := t.Context()
	s.deploy(t, "prod", "d1", "v1")
	y10001 := time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)
	y2300 := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	seq, state := lastSeq(t, s.e), stateJSON(t, s.e)
	for _, start := range []time.Time{y10001, y2300, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)} {
		r := s.do(t, &commands.RegisterSnapshot{Meta: commands.Meta{ID: "far-" + start.Format("2006")}, Model: "clicks", Version: "v1", Cron: "@hourly", Start: start})
		refused(t, "start "+start.Format(time.RFC3339), r, commands.CodeInvalid, "start")
	}
	r := s.do(t, &commands.InvalidateIntervals{Meta: commands.Meta{ID: "far-inv"}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(0, 1), interval.R(at(1), y10001)}})
	refused(t, "a range to year 10001", r, commands.CodeInvalid, "ranges[1]")
	unchanged(t, s.e, "far times", seq, state)

	// Out-of-range events already stored: a plan built in year 10001 and
	// coverage to year 10001 of the incumbent.
	pub := &work.Publisher{Log: s.e.Log(), Clock: s.e.Now, Logger: quiet()}
	var mu sync.Mutex
	var published []string
	pub.Published = func(it work.Item) { mu.Lock(); published = append(published, it.Plan); mu.Unlock() }
	if err := pub.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go pub.Run(rctx)
	poison := []struct {
		subject string
		b       []byte
	}{
		{events.PlanSubject("poison"), rawEvent(t, y10001, events.PlanBuilt{Plan: "poison", Env: "prod", BuiltAt: y10001, Start: t0, End: at(1), Generation: 1, Policy: events.Policy{Version: 1},
			Candidates: []events.Candidate{{Model: "events", Snapshot: "events@v1", Table: "events@v1", Upstream: []string{}, Backfill: []interval.Range{rng(0, 1)}}}})},
		{events.SnapshotSubject("events", "v1"), rawEvent(t, at(7), events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{interval.R(at(7), y10001)}, RunKind: events.RunManual})},
		{events.EnvSubject("prod"), rawEvent(t, at(7), events.SchedulerAdvanced{Env: "prod", Model: "events", Snapshot: "events@v1", Tick: y10001, Frontier: y10001, Ranges: []interval.Range{}, Generation: 1})},
	}
	for _, p := range poison {
		if _, err := s.e.Log().JetStream().Publish(ctx, p.subject, p.b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.e.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// A plan built after them still gets its backfill published.
	must(t, s.e.Handle(ctx, &commands.RegisterSnapshot{Meta: own(), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	must(t, s.e.Handle(ctx, &commands.BuildPlan{Meta: own(), Plan: "after", Env: "prod", Versions: map[string]string{"events": "v2"}}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), published...)
		mu.Unlock()
		if len(got) > 0 && got[len(got)-1] == "after" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the work publisher did not publish the plan built after the bad events: published %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Status over JSON still answers, and shows the incumbent as its good
	// events left it.
	s.svc.JSON = true
	r = s.do(t, &commands.Status{Env: "prod"})
	if !r.Accepted || len(r.Envs) != 1 || len(r.Envs[0].Models) != 1 || !r.Envs[0].Models[0].Frontier.Equal(at(7)) {
		t.Fatalf("JSON status after the bad events: %+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	var skipped int
	s.e.Projection().Read(func(st *projections.State) { skipped = st.Skipped })
	if skipped != len(poison) {
		t.Errorf("the projection reports %d skipped events, want %d", skipped, len(poison))
	}
}
