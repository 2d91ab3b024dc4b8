package commands

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const sessionsSQL = "SELECT session_id, ts FROM events\nWHERE ts >= @start_ts AND ts < @end_ts\n"

// register_snapshot carries sql and time_column in both encodings, and
// checks them with the definition (models.Definition.Validate).
func TestRegisterSnapshotSQL(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	in := &RegisterSnapshot{Meta: Meta{ID: "r1"}, Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0,
		DependsOn: []string{"events"}, SQL: sessionsSQL, TimeColumn: "ts"}
	for _, asJSON := range []bool{false, true} {
		got := roundTrip(t, in, asJSON)
		r := got.(*RegisterSnapshot)
		if !r.Start.Equal(t0) || r.SQL != in.SQL || r.TimeColumn != in.TimeColumn || !reflect.DeepEqual(r.DependsOn, in.DependsOn) || r.Model != in.Model {
			t.Fatalf("json=%v: decoded %+v", asJSON, got)
		}
	}
	// Without them, the body is what it was before they existed.
	b, _ := Encode(&RegisterSnapshot{Meta: Meta{ID: "r1"}, Model: "events", Version: "v1", Cron: "@hourly", Start: t0}, true)
	if strings.Contains(string(b), "sql") || strings.Contains(string(b), "time_column") {
		t.Fatalf("empty fields encoded: %s", b)
	}

	body := `{"id":"a","model":"sessions","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z","depends_on":["events"],` +
		`"time_column":"ts","sql":"-- sessions\nselect session_id, ts from events where ts >= @start_ts and ts < @end_ts"}`
	c, err := Decode(KindRegisterSnapshot, ContentJSON, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.(*RegisterSnapshot); r.TimeColumn != "ts" || !strings.HasPrefix(r.SQL, "-- sessions\nselect") {
		t.Fatalf("decoded %+v", r)
	}

	for _, c := range []struct{ name, edit, field, msg string }{
		{"unterminated", `"sql":"select 'a","time_column":"ts"`, "sql", "sql has an unterminated string literal at line 1, column 8"},
		{"unknown macro", `"sql":"select @start_date","time_column":"ts"`, "sql", "sql uses the macro @start_date at line 1, column 8: only @start_ts and @end_ts are defined"},
		{"sql alone", `"sql":"select 1"`, "time_column", "time_column is required when sql is set"},
		{"time column alone", `"time_column":"ts"`, "sql", "sql is required when time_column is set"},
		{"bad time column", `"sql":"select 1","time_column":"ts desc"`, "time_column", ""},
		{"sql not a string", `"sql":1,"time_column":"ts"`, "sql", ""},
	} {
		body := `{"id":"a","model":"m","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z",` + c.edit + `}`
		_, err := Decode(KindRegisterSnapshot, ContentJSON, []byte(body))
		ce, ok := err.(*Error)
		if !ok || ce.Field != c.field || (c.msg != "" && ce.Message != c.msg) {
			t.Errorf("%s: got %#v, want %s %q", c.name, err, c.field, c.msg)
		}
	}
}

// Two registrations that differ only in their query or time column are two
// commands (a retry with another query is not a duplicate).
func TestDigestSQL(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := func() *RegisterSnapshot {
		return &RegisterSnapshot{Meta: Meta{ID: "a", At: t0}, Model: "s", Version: "v1", Cron: "@hourly", Start: t0, SQL: "select 1", TimeColumn: "ts"}
	}
	d := Digest(base())
	for name, edit := range map[string]func(*RegisterSnapshot){
		"no sql":         func(c *RegisterSnapshot) { c.SQL, c.TimeColumn = "", "" },
		"another query":  func(c *RegisterSnapshot) { c.SQL = "select 2" },
		"another column": func(c *RegisterSnapshot) { c.TimeColumn = "event_ts" },
	} {
		c := base()
		edit(c)
		if Digest(c) == d {
			t.Errorf("%s: the same digest", name)
		}
	}
	same := base()
	same.Meta = Meta{ID: "b"}
	if Digest(same) != d {
		t.Error("the digest depends on Meta")
	}
}

// register_snapshot carries grain in both encodings (omitted when not
// set) and checks it with the definition, naming grain[i].
func TestRegisterSnapshotGrain(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	in := &RegisterSnapshot{Meta: Meta{ID: "r1"}, Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0,
		SQL: sessionsSQL, TimeColumn: "ts", Grain: []string{"session_id", "ts"}}
	for _, asJSON := range []bool{false, true} {
		got := roundTrip(t, in, asJSON)
		if r := got.(*RegisterSnapshot); !reflect.DeepEqual(r.Grain, in.Grain) {
			t.Fatalf("json=%v: grain %q", asJSON, r.Grain)
		}
	}
	if b, _ := Encode(&RegisterSnapshot{Meta: Meta{ID: "r1"}, Model: "events", Version: "v1", Cron: "@hourly", Start: t0}, true); strings.Contains(string(b), "grain") {
		t.Fatalf("an empty grain encoded: %s", b)
	}
	body := `{"id":"a","model":"m","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z","sql":"select 1 as id","time_column":"ts","grain":["id","id"]}`
	if _, err := Decode(KindRegisterSnapshot, ContentJSON, []byte(body)); err == nil || err.(*Error).Field != "grain[1]" {
		t.Fatalf("a repeated grain column: %#v", err)
	}
}
