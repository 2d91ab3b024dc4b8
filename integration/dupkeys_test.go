package integration

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDuplicateKeysRefused (issue 15, item 9): a body that names a key
// twice is refused as malformed on that key — JSON or msgpack, at the top
// level or inside a map — instead of the last value silently winning; it
// appends nothing.
func TestDuplicateKeysRefused(t *testing.T) {
	e, nc := served(t)
	deploy(t, e, "prod", "d1", "v1", at(6))
	must(t, e.Handle(t.Context(), &commands.RegisterSnapshot{Meta: meta(at(6)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	js := func(s string) []byte { return []byte(s) }
	hourly := `"2026-12-01T06:00:00Z/2026-12-01T07:00:00Z"`
	sendRaw(t, e, nc, []rawCase{
		{"json: version twice", "complete_intervals", commands.ContentJSON,
			js(`{"id":"k1","model":"events","version":"v1","ranges":[` + hourly + `],"version":"v2"}`), "malformed", "version"},
		{"json: id twice", "promote", commands.ContentJSON, js(`{"id":"k2","plan":"d1","id":"k3"}`), "malformed", "id"},
		{"json: escaped duplicate", "promote", commands.ContentJSON, js(`{"id":"k4","plan":"d1","\u0070lan":"d1"}`), "malformed", "plan"},
		{"json: nested duplicate", "build_plan", commands.ContentJSON,
			js(`{"id":"k5","plan":"p2","env":"prod","versions":{"events":"v1","events":"v2"}}`), "malformed", "versions.events"},
		{"json: lookback twice", "register_snapshot", commands.ContentJSON,
			js(`{"id":"k6","model":"clicks","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z","lookback":1,"lookback":2}`), "malformed", "lookback"},
		{"msgpack: version twice", "complete_intervals", commands.ContentMsgpack,
			mpMap(t, "id", "k7", "model", "events", "version", "v1", "ranges", [][]int64{{at(6).Unix(), at(7).Unix()}}, "version", "v2"), "malformed", "version"},
		{"msgpack: plan twice", "promote", commands.ContentMsgpack, mpMap(t, "id", "k8", "plan", "d1", "plan", "d1"), "malformed", "plan"},
		{"msgpack: nested duplicate", "build_plan", commands.ContentMsgpack,
			mpMap(t, "id", "k9", "plan", "p2", "env", "prod", "versions", mpRaw(t, mpMap(t, "events", "v1", "events", "v2"))), "malformed", "versions.events"},
	})
}

// mpRaw embeds already encoded msgpack as a value.
func mpRaw(t *testing.T, b []byte) msgpack.RawMessage { return msgpack.RawMessage(b) }
