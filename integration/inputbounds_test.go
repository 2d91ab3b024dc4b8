package integration

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/transport"
	"github.com/vmihailenco/msgpack/v5"
)

// rawCase is a command body sent as is, and the rejection it must get.
type rawCase struct {
	name, kind, ct string
	body           []byte
	code, field    string
}

// sendRaw sends each case's body to the real service and checks the
// typed rejection; together they append nothing and change no state.
func sendRaw(t *testing.T, e *engine.Engine, nc *nats.Conn, cases []rawCase) {
	t.Helper()
	before, state := lastSeq(t, e), stateJSON(t, e)
	for _, c := range cases {
		m := nats.NewMsg(commands.Subject(c.kind))
		m.Header.Set(commands.HeaderContentType, c.ct)
		m.Data = c.body
		resp, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, err := commands.DecodeReply(resp.Data, commands.IsJSON(resp.Header.Get(commands.HeaderContentType)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Accepted || string(r.Code) != c.code || r.Field != c.field {
			t.Errorf("%s: got accepted=%v %s on %q (%s), want %s on %q", c.name, r.Accepted, r.Code, r.Field, r.Message, c.code, c.field)
		}
	}
	if after := lastSeq(t, e); after != before {
		t.Errorf("refused commands appended %d events", after-before)
	}
	if got := stateJSON(t, e); got != state {
		t.Errorf("refused commands changed the state:\nbefore %s\nafter  %s", state, got)
	}
}

func served(t *testing.T) (*engine.Engine, *nats.Conn) {
	t.Helper()
	e := open(t, engine.Config{})
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return e, connect(t, e)
}

// TestLookbackBounded (issue 15, item 9): a lookback beyond the documented
// maximum (10,000 intervals) is refused as invalid on lookback, in JSON and
// msgpack, before it can overflow the scheduler's interval arithmetic; the
// maximum itself is accepted.
func TestLookbackBounded(t *testing.T) {
	e, nc := served(t)
	reg := func(id string, lookback string) []byte {
		return []byte(`{"id":"` + id + `","model":"clicks","version":"v` + id + `","cron":"*/5 * * * *","start":"2026-12-01T00:00:00Z","lookback":` + lookback + `}`)
	}
	mp := mpMap(t, "id", "l3", "model", "clicks", "version", "vl3", "cron", "@hourly", "start", t0, "lookback", int64(1<<63-1))
	sendRaw(t, e, nc, []rawCase{
		{"lookback one over the maximum", "register_snapshot", commands.ContentJSON, reg("l1", "10001"), "invalid", "lookback"},
		{"lookback 2^62", "register_snapshot", commands.ContentJSON, reg("l2", strconv.FormatInt(1<<62, 10)), "invalid", "lookback"},
		{"lookback int64 max (msgpack)", "register_snapshot", commands.ContentMsgpack, mp, "invalid", "lookback"},
	})
	// The maximum is a valid lookback.
	m := nats.NewMsg(commands.Subject("register_snapshot"))
	m.Header.Set(commands.HeaderContentType, commands.ContentJSON)
	m.Data = reg("l4", "10000")
	resp, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := commands.DecodeReply(resp.Data, true); err != nil || !r.Accepted {
		t.Fatalf("lookback 10000: %v %+v", err, r)
	}
}

// mpMap encodes key, value, key, value, … as one msgpack map, in that
// order, repeated keys included.
func mpMap(t *testing.T, kv ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range kv {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}
