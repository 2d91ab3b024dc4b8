package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
)

// TestCommandsOverNATS drives the engine through the micro service with
// msgpack and JSON bodies, checks rejections append nothing, and that a
// restart on the same data dir rebuilds identical projections.
func TestCommandsOverNATS(t *testing.T) {
	dir := t.TempDir()
	node := nodeOn(t, dir)
	e := open(t, engine.Config{}, node)
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	// One endpoint per kind for each subject form (with and without the user).
	if info := svc.Info(); info.Name != "tidemark" || len(info.Endpoints) != 2*len(commands.Kinds) {
		t.Fatalf("service info: %+v", info)
	}
	nc := connect(t, e)
	mp := transport.NewClient(nc)
	js := transport.NewClient(nc)
	js.JSON = true
	ctx := t.Context()
	do := func(c *transport.Client, cmd commands.Command) commands.Reply {
		t.Helper()
		r, err := c.Do(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	deploy(t, clientHandler{t, mp}, "prod", "d1", "v1", at(6))
	r := do(js, &commands.AdvanceScheduler{Meta: meta(at(9)), Env: "prod", Generation: 1})
	must(t, r)
	if len(r.Advances) != 1 || !interval.Set(r.Advances[0].Ranges).Equal(interval.NewSet(rng(6, 9))) {
		t.Fatalf("advance: %+v", r.Advances)
	}
	must(t, do(js, &commands.CompleteIntervals{Meta: meta(at(9)), Model: "events", Version: "v1", Ranges: r.Advances[0].Ranges, RunKind: events.RunScheduled}))

	// Rejections: typed, naming the field, appending nothing.
	before := lastSeq(t, e)
	rejections := []struct {
		cmd         commands.Command
		code, field string
	}{
		{&commands.CompleteIntervals{Meta: meta(at(9)), Model: "nope", Version: "v1", Ranges: []interval.Range{rng(1, 2)}}, "not_found", "model"},
		{&commands.CompleteIntervals{Meta: meta(at(9)), Model: "events", Version: "v9", Ranges: []interval.Range{rng(1, 2)}}, "not_found", "version"},
		{&commands.CompleteIntervals{Meta: meta(at(9)), Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(at(1).Add(30*60e9), at(2))}}, "invalid", "ranges[0]"},
		{&commands.CompleteIntervals{Meta: meta(at(9)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(9, 10)}}, "invalid", "ranges[0]"},
		{&commands.RegisterSnapshot{Meta: meta(at(9)), Model: "events", Version: "v2", Cron: "* * * * *", Start: t0}, "invalid", "cron"},
		{&commands.RegisterSnapshot{Meta: meta(at(9)), Model: "events", Version: "v1", Cron: "@daily", Start: t0}, "conflict", "version"},
		{&commands.Promote{Meta: meta(at(9)), Plan: "nope"}, "not_found", "plan"},
		{&commands.AdvanceScheduler{Meta: meta(at(10)), Env: "prod"}, "invalid", "generation"},
		{&commands.AdvanceScheduler{Meta: meta(at(10)), Env: "prod", Generation: 7}, "stale_generation", "generation"},
		{&commands.AdvanceScheduler{Meta: meta(at(10)), Env: "qa", Generation: 1}, "not_found", "env"},
		{&commands.BuildPlan{Meta: meta(at(9)), Plan: "d1", Env: "prod", Versions: map[string]string{"events": "v1"}}, "conflict", "plan"},
		{&commands.BuildPlan{Meta: meta(at(9)), Plan: "p7", Env: "prod", Versions: map[string]string{"events": "v5"}}, "not_found", "versions.events"},
	}
	for _, rj := range rejections {
		for _, c := range []*transport.Client{mp, js} {
			rj.cmd.Header().ID = commands.NewID()
			got := do(c, rj.cmd)
			if got.Accepted || string(got.Code) != rj.code || got.Field != rj.field {
				t.Errorf("%s (json=%v): got %+v, want %s on %s", rj.cmd.Kind(), c.JSON, got, rj.code, rj.field)
			}
		}
	}
	raw := []struct {
		name, ct, body, code, field string
	}{
		{"unknown field", commands.ContentJSON, `{"id":"x1","model":"events","version":"v1","colour":"red"}`, "malformed", "colour"},
		{"end before start", commands.ContentJSON, `{"id":"x2","model":"events","version":"v1","ranges":["2026-12-01T02:00:00Z/2026-12-01T01:00:00Z"]}`, "malformed", "ranges"},
		{"malformed json", commands.ContentJSON, `{"id":`, "malformed", ""},
		{"malformed msgpack", commands.ContentMsgpack, "\xc1\xc1", "malformed", ""},
		{"missing id", commands.ContentJSON, `{"model":"events","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}`, "invalid", "id"},
		{"oversize", commands.ContentJSON, `{"id":"x3","model":"` + strings.Repeat("a", commands.MaxBodyBytes) + `"}`, "too_large", ""},
	}
	for _, rc := range raw {
		m := nats.NewMsg(commands.Subject(commands.KindCompleteIntervals))
		m.Header.Set(commands.HeaderContentType, rc.ct)
		m.Data = []byte(rc.body)
		resp, err := nc.RequestMsg(m, 10e9)
		if err != nil {
			t.Fatalf("%s: %v", rc.name, err)
		}
		got, err := commands.DecodeReply(resp.Data, commands.IsJSON(resp.Header.Get(commands.HeaderContentType)))
		if err != nil {
			t.Fatalf("%s: %v", rc.name, err)
		}
		if got.Accepted || string(got.Code) != rc.code || got.Field != rc.field {
			t.Errorf("%s: got %+v, want %s on %q", rc.name, got, rc.code, rc.field)
		}
	}
	if after := lastSeq(t, e); after != before {
		t.Fatalf("rejected commands appended %d events", after-before)
	}

	// A retried command (same id) is applied once.
	cmd := &commands.CompleteIntervals{Meta: meta(at(10)), Model: "events", Version: "v1", Ranges: []interval.Range{rng(9, 10)}, RunKind: events.RunScheduled}
	first := must(t, do(mp, cmd))
	again := must(t, do(js, cmd))
	if first.Duplicate || !again.Duplicate || again.Seq != first.Seq || lastSeq(t, e) != first.Seq {
		t.Fatalf("retry: first %+v, again %+v, last %d", first, again, lastSeq(t, e))
	}

	// Restart on the same data dir: identical projections.
	live := stateJSON(t, e)
	svc.Stop()
	e.Close(ctx)
	node.Close()
	e2 := open(t, engine.Config{}, nodeOn(t, dir))
	if got := stateJSON(t, e2); got != live {
		t.Fatalf("projections differ after restart:\n live %s\n back %s", live, got)
	}
	// And the dedup survives the restart (beyond any duplicate window).
	if r := must(t, e2.Handle(ctx, cmd)); !r.Duplicate {
		t.Fatalf("retry after restart applied again: %+v", r)
	}
	var inc string
	e2.Projection().Read(func(st *projections.State) { inc = st.Env("prod").Incumbents["events"] })
	if inc != "events@v1" {
		t.Fatalf("incumbent after restart: %q", inc)
	}
}

type clientHandler struct {
	t *testing.T
	c *transport.Client
}

func (h clientHandler) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	r, err := h.c.Do(ctx, cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}
