package transport

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/internal/jstest"
)

// The Go client sends msgpack, the default, with no headers at all (the
// service reads a request without Content-Type as msgpack, and the
// engine's connection then parses no header per command); JSON says so.
func TestClientContentType(t *testing.T) {
	nc, err := nats.Connect("", nats.InProcessServer(jstest.Node(t).Server()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := NewClient(nc)
	got := make(chan nats.Header, 2)
	sub, err := nc.Subscribe(CommandSubject(c.User, commands.KindRegisterSnapshot), func(m *nats.Msg) {
		got <- m.Header
		asJSON := m.Header.Get(commands.HeaderContentType) == commands.ContentJSON
		r := nats.NewMsg(m.Reply)
		var err error
		r.Data, err = commands.EncodeReply(commands.Reply{Accepted: true}, asJSON)
		if asJSON {
			r.Header.Set(commands.HeaderContentType, commands.ContentJSON)
		}
		if err == nil {
			err = m.RespondMsg(r)
		}
		if err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for _, asJSON := range []bool{false, true} {
		c.JSON = asJSON
		cmd := &commands.RegisterSnapshot{Model: "m", Version: "v1", Cron: "@hourly", Start: time.Unix(0, 0).UTC()}
		if r, err := c.Do(t.Context(), cmd); err != nil || !r.Accepted {
			t.Fatalf("json %v: %v %+v", asJSON, err, r)
		}
		h := <-got
		switch {
		case !asJSON && len(h) != 0:
			t.Fatalf("a msgpack request carries headers %v", h)
		case asJSON && h.Get(commands.HeaderContentType) != commands.ContentJSON:
			t.Fatalf("a JSON request carries headers %v", h)
		}
	}
}
