package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
	"github.com/vmihailenco/msgpack/v5"
)

// TestBadInputTable: malformed and hostile commands, sent as raw bodies,
// each get their exact rejection code (and field), and the stream does
// not move.
func TestBadInputTable(t *testing.T) {
	e := open(t, engine.Config{})
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc := connect(t, e)
	ctx := t.Context()
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"events"}}))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(6)), Plan: "open", Env: "prod", Versions: map[string]string{"sessions": "v1"}}))

	manyRanges := make([]string, commands.MaxRanges+1)
	for i := range manyRanges {
		manyRanges[i] = `"` + at(0).Add(time.Duration(i)*time.Hour).Format(time.RFC3339) + "/" + at(0).Add(time.Duration(i+1)*time.Hour).Format(time.RFC3339) + `"`
	}
	manyModels := make([]string, commands.MaxPlanModels+1)
	for i := range manyModels {
		manyModels[i] = `"m` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":"v1"`
	}
	reg := `"model":"clicks","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z"`
	cmp := `"model":"events","version":"v1"`
	hourly := `"2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"`
	cases := []struct {
		name, kind, body, code, field string
	}{
		{"cron faster than 5 minutes", "register_snapshot", `{"id":"b1","model":"clicks","version":"v1","cron":"* * * * *","start":"2026-12-01T00:00:00Z"}`, "invalid", "cron"},
		{"unit coarser than cron", "register_snapshot", `{"id":"b2",` + reg + `,"interval_unit":"day"}`, "invalid", "cron"},
		{"unknown unit", "register_snapshot", `{"id":"b3",` + reg + `,"interval_unit":"fortnight"}`, "invalid", "interval_unit"},
		{"six-field cron", "register_snapshot", `{"id":"b4","model":"clicks","version":"v1","cron":"0 0 * * * *","start":"2026-12-01T00:00:00Z"}`, "invalid", "cron"},
		{"cron time zone", "register_snapshot", `{"id":"b5","model":"clicks","version":"v1","cron":"CRON_TZ=Europe/Paris 0 * * * *","start":"2026-12-01T00:00:00Z"}`, "invalid", "cron"},
		{"missing start", "register_snapshot", `{"id":"b6","model":"clicks","version":"v1","cron":"@hourly"}`, "invalid", "start"},
		{"unaligned start", "register_snapshot", `{"id":"b7","model":"clicks","version":"v1","cron":"@hourly","start":"2026-12-01T00:30:00Z"}`, "invalid", "start"},
		{"negative lookback", "register_snapshot", `{"id":"b8",` + reg + `,"lookback":-1}`, "invalid", "lookback"},
		{"lookback wrong type", "register_snapshot", `{"id":"b9",` + reg + `,"lookback":"three"}`, "malformed", "lookback"},
		{"huge lookback", "register_snapshot", `{"id":"b10",` + reg + `,"lookback":1e30}`, "malformed", "lookback"},
		{"unknown kind", "register_snapshot", `{"id":"b11",` + reg + `,"kind":"sideways"}`, "invalid", "kind"},
		{"depends on itself", "register_snapshot", `{"id":"b12",` + reg + `,"depends_on":["clicks"]}`, "invalid", "depends_on[0]"},
		{"dependency cycle", "register_snapshot", `{"id":"b13","model":"events","version":"v9","cron":"@hourly","start":"2026-12-01T00:00:00Z","depends_on":["sessions"]}`, "invalid", "depends_on"},
		{"model name with spaces", "register_snapshot", `{"id":"b14","model":"a b","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z"}`, "invalid", "model"},
		{"version with a dot", "register_snapshot", `{"id":"b15","model":"clicks","version":"v1.2","cron":"@hourly","start":"2026-12-01T00:00:00Z"}`, "invalid", "version"},
		{"unknown field", "register_snapshot", `{"id":"b16",` + reg + `,"colour":"red"}`, "malformed", "colour"},
		{"missing id", "register_snapshot", `{` + reg + `}`, "invalid", "id"},
		{"id too long", "register_snapshot", `{"id":"` + strings.Repeat("x", commands.MaxIDLen+1) + `",` + reg + `}`, "invalid", "id"},
		{"redefined version", "register_snapshot", `{"id":"b19","model":"events","version":"v1","cron":"@daily","start":"2026-12-01T00:00:00Z"}`, "conflict", "version"},
		{"start not a time", "register_snapshot", `{"id":"b20","model":"clicks","version":"v1","cron":"@hourly","start":"yesterday"}`, "malformed", "start"},
		{"end before start", "complete_intervals", `{"id":"c1",` + cmp + `,"ranges":["2026-12-01T02:00:00Z/2026-12-01T01:00:00Z"]}`, "malformed", "ranges"},
		{"range not a range", "complete_intervals", `{"id":"c2",` + cmp + `,"ranges":["tuesday"]}`, "malformed", "ranges"},
		{"negative unix range", "complete_intervals", "", "invalid", "ranges[0]"},
		{"unaligned interval", "complete_intervals", `{"id":"c4",` + cmp + `,"ranges":["2026-12-01T01:30:00Z/2026-12-01T02:00:00Z"]}`, "invalid", "ranges[0]"},
		{"interval not ended", "complete_intervals", `{"id":"c5","at":"2026-12-01T06:00:00Z",` + cmp + `,"ranges":["2026-12-01T06:00:00Z/2026-12-01T07:00:00Z"]}`, "invalid", "ranges[0]"},
		{"before the model's start", "complete_intervals", `{"id":"c6",` + cmp + `,"ranges":["2026-11-30T23:00:00Z/2026-12-01T00:00:00Z"]}`, "invalid", "ranges[0]"},
		{"no ranges", "complete_intervals", `{"id":"c7",` + cmp + `,"ranges":[]}`, "invalid", "ranges"},
		{"too many ranges", "complete_intervals", `{"id":"c8",` + cmp + `,"ranges":[` + strings.Join(manyRanges, ",") + `]}`, "limit_exceeded", "ranges"},
		{"unknown run kind", "complete_intervals", `{"id":"c9",` + cmp + `,"ranges":[` + hourly + `],"run_kind":"sometimes"}`, "invalid", "run_kind"},
		{"unknown model", "complete_intervals", `{"id":"c10","model":"nope","version":"v1","ranges":[` + hourly + `]}`, "not_found", "model"},
		{"unknown version", "complete_intervals", `{"id":"c11","model":"events","version":"v7","ranges":[` + hourly + `]}`, "not_found", "version"},
		{"ranges wrong type", "complete_intervals", `{"id":"c12",` + cmp + `,"ranges":"all of them"}`, "malformed", "ranges"},
		{"unaligned invalidation", "invalidate_intervals", `{"id":"i1",` + cmp + `,"ranges":["2026-12-01T01:00:00Z/2026-12-01T01:30:00Z"]}`, "invalid", "ranges[0]"},
		{"plan sets nothing", "build_plan", `{"id":"p1","plan":"px","env":"prod","versions":{}}`, "invalid", "versions"},
		{"plan of an unknown model", "build_plan", `{"id":"p2","plan":"px","env":"prod","versions":{"nope":"v1"}}`, "not_found", "versions.nope"},
		{"plan id taken", "build_plan", `{"id":"p3","plan":"open","env":"prod","versions":{"events":"v1"}}`, "conflict", "plan"},
		{"negative bound", "build_plan", `{"id":"p4","plan":"px","env":"prod","versions":{"events":"v1"},"max_trailing_gap_advances":-2}`, "invalid", "max_trailing_gap_advances"},
		{"bound wrong type", "build_plan", `{"id":"p5","plan":"px","env":"prod","versions":{"events":"v1"},"max_catch_up_advances":true}`, "malformed", "max_catch_up_advances"},
		{"too many models", "build_plan", `{"id":"p6","plan":"px","env":"prod","versions":{` + strings.Join(manyModels, ",") + `}}`, "limit_exceeded", "versions"},
		{"env name with a dot", "build_plan", `{"id":"p7","plan":"px","env":"prod.eu","versions":{"events":"v1"}}`, "invalid", "env"},
		{"promote an unknown plan", "promote", `{"id":"r1","plan":"nope"}`, "not_found", "plan"},
		{"version with a reserved +", "register_snapshot", `{"id":"r2","model":"clicks","version":"v1+d1","cron":"@hourly","start":"2026-12-01T00:00:00Z"}`, "invalid", "version"},
		{"finalize unpromoted", "finalize", `{"id":"f1","plan":"open"}`, "conflict", "plan"},
		{"advance without generation", "advance_scheduler", `{"id":"a1","env":"prod"}`, "invalid", "generation"},
		{"stale advance", "advance_scheduler", `{"id":"a2","env":"prod","generation":9}`, "stale_generation", "generation"},
		{"advance of an unknown env", "advance_scheduler", `{"id":"a3","env":"qa","generation":1}`, "not_found", "env"},
		{"failure without error", "fail_run", `{"id":"x1",` + cmp + `,"ranges":[` + hourly + `],"run_kind":"scheduled","attempt":1}`, "invalid", "error"},
		{"failure attempt 0", "fail_run", `{"id":"x2",` + cmp + `,"ranges":[` + hourly + `],"run_kind":"scheduled","error":"boom","attempt":0}`, "invalid", "attempt"},
		{"repairs of an unknown env", "open_repairs", `{"env":"qa"}`, "not_found", "env"},
		{"oversize body", "complete_intervals", `{"id":"o1","model":"` + strings.Repeat("a", commands.MaxBodyBytes) + `"}`, "too_large", ""},
		{"malformed json", "promote", `{"id":`, "malformed", ""},
		{"empty body", "promote", ``, "malformed", ""},
		{"not an object", "promote", `[1,2,3]`, "malformed", ""},
	}
	// The negative unix range goes as msgpack: [ -3600, 0 ].
	negBody, err := msgpack.Marshal(map[string]any{"id": "c3", "model": "events", "version": "v1", "ranges": [][]int64{{-3600, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	before := lastSeq(t, e)
	for _, c := range cases {
		m := nats.NewMsg(commands.Subject(c.kind))
		m.Header.Set(commands.HeaderContentType, commands.ContentJSON)
		m.Data = []byte(c.body)
		if c.body == "" && c.name == "negative unix range" {
			m.Header.Set(commands.HeaderContentType, commands.ContentMsgpack)
			m.Data = negBody
		}
		resp, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, err := commands.DecodeReply(resp.Data, commands.IsJSON(resp.Header.Get(commands.HeaderContentType)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Accepted || string(r.Code) != c.code || r.Field != c.field {
			t.Errorf("%s: got %s on %q (%s), want %s on %q", c.name, r.Code, r.Field, r.Message, c.code, c.field)
		}
	}
	if after := lastSeq(t, e); after != before {
		t.Fatalf("rejected commands appended %d events", after-before)
	}

	// A duplicate id is answered as a duplicate when the command is the
	// same (its clock aside), and refused when the body differs.
	first := must(t, e.Handle(ctx, &commands.CompleteIntervals{Meta: commands.Meta{ID: "dup-1", At: at(7)}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(6, 7)}}))
	again := e.Handle(ctx, &commands.CompleteIntervals{Meta: commands.Meta{ID: "dup-1", At: at(8)}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(6, 7)}})
	if !again.Duplicate || again.Seq != first.Seq || lastSeq(t, e) != first.Seq {
		t.Fatalf("duplicate id: %+v after %+v", again, first)
	}
	other := e.Handle(ctx, &commands.CompleteIntervals{Meta: commands.Meta{ID: "dup-1", At: at(8)}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(7, 8)}})
	if other.Accepted || other.Code != commands.CodeIdempotencyConflict || other.Field != "id" || lastSeq(t, e) != first.Seq {
		t.Fatalf("the duplicate id with another body: %+v", other)
	}
}

// TestRateLimit: a connection sending faster than the limit is refused
// with rate_limited, and those commands append nothing.
func TestRateLimit(t *testing.T) {
	e := open(t, engine.Config{})
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet(), RateLimit: 0.001, RateBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	c := transport.NewClient(connect(t, e))
	before := lastSeq(t, e)
	accepted, limited := 0, 0
	for i := 0; i < 6; i++ {
		r, err := c.Do(t.Context(), &commands.RegisterSnapshot{Meta: meta(at(1)), Model: "m" + strconv.Itoa(i), Version: "v1", Cron: "@hourly", Start: t0})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Accepted:
			accepted++
		case r.Code == commands.CodeRateLimited:
			limited++
		default:
			t.Fatalf("unexpected reply %+v", r)
		}
	}
	if accepted != 3 || limited != 3 || lastSeq(t, e) != before+3 {
		t.Fatalf("accepted %d, limited %d, appended %d", accepted, limited, lastSeq(t, e)-before)
	}
}
