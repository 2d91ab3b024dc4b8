package commands

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestRegisterSnapshots: a set decodes in both encodings to what was
// sent; every refusal names the registration's field.
func TestRegisterSnapshots(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	in := &RegisterSnapshots{Meta: Meta{ID: "s1", Actor: "cli:apply"}, Snapshots: []RegisterSnapshot{
		{Model: "raw", Version: "v1", Cron: "@hourly", Start: t0},
		{Model: "events", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"raw"}, SQL: "SELECT ts FROM raw", TimeColumn: "ts", Grain: []string{"ts"}},
	}}
	for _, asJSON := range []bool{false, true} {
		got := roundTrip(t, in, asJSON)
		a, _ := json.Marshal(got)
		w, _ := json.Marshal(in)
		if string(a) != string(w) || Digest(got) != Digest(in) {
			t.Fatalf("json=%v: decoded %s, want %s", asJSON, a, w)
		}
	}
	item := `{"model":"m","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z"}`
	for _, c := range []struct {
		name, body string
		code       Code
		field      string
	}{
		{"none", `{"id":"a","snapshots":[]}`, CodeInvalid, "snapshots"},
		{"no list", `{"id":"a"}`, CodeInvalid, "snapshots"},
		{"unknown field of a registration", `{"id":"a","snapshots":[{"model":"m","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z","force":true}]}`, CodeMalformed, "snapshots"},
		{"an id of its own", `{"id":"a","snapshots":[` + item + `,{"id":"b","model":"n","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z"}]}`, CodeInvalid, "snapshots[1]"},
		{"bad cron", `{"id":"a","snapshots":[` + item + `,{"model":"n","version":"v1","cron":"often","start":"2026-12-01T00:00:00Z"}]}`, CodeInvalid, "snapshots[1].cron"},
		{"bad version", `{"id":"a","snapshots":[{"model":"m","version":"v+1","cron":"@hourly","start":"2026-12-01T00:00:00Z"}]}`, CodeInvalid, "snapshots[0].version"},
		{"no version", `{"id":"a","snapshots":[{"model":"m","cron":"@hourly","start":"2026-12-01T00:00:00Z"}]}`, CodeInvalid, "snapshots[0].version"},
		{"a model twice", `{"id":"a","snapshots":[` + item + `,` + strings.Replace(item, "v1", "v2", 1) + `]}`, CodeInvalid, "snapshots[1].model"},
		{"too many", `{"id":"a","snapshots":[` + strings.Repeat(`{},`, MaxRegisterSnapshots) + `{}]}`, CodeLimit, "snapshots"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(KindRegisterSnapshots, ContentJSON, []byte(c.body))
			if !isRejection(err, c.code, c.field) {
				t.Fatalf("got %v, want %s on %q", err, c.code, c.field)
			}
		})
	}
	// msgpack: an unknown key of a registration is refused too.
	b, err := msgpack.Marshal(map[string]any{"id": "a", "snapshots": []any{map[string]any{"model": "m", "version": "v1", "cron": "@hourly", "start": t0, "force": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(KindRegisterSnapshots, ContentMsgpack, b); !isRejection(err, CodeMalformed, "snapshots") {
		t.Fatalf("msgpack unknown key of a registration: %v", err)
	}
}
