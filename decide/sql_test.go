package decide

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
)

const sessionsSQL = "SELECT session_id, min(ts) AS ts FROM events\nWHERE ts >= @start_ts AND ts < @end_ts\nGROUP BY session_id\n"

func sqlSessions(sql, col string) *commands.RegisterSnapshot {
	return &commands.RegisterSnapshot{Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"events"}, SQL: sql, TimeColumn: col}
}

// A registration's query and time column are recorded, and are part of
// the definition: registering them again is a duplicate, any change to
// them under the same version is refused like any other definition change.
func TestRegisterSQL(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	dec := w.must(sqlSessions(sessionsSQL, "ts"), t0)
	if len(dec.Events) != 1 {
		t.Fatalf("events: %+v", dec.Events)
	}
	reg := dec.Events[0].(events.SnapshotRegistered)
	if reg.SQL != sessionsSQL || reg.TimeColumn != "ts" {
		t.Fatalf("registered %q %q", reg.SQL, reg.TimeColumn)
	}
	noSQL := reg
	noSQL.SQL, noSQL.TimeColumn, noSQL.Fingerprint = "", "", ""
	if reg.Fingerprint != models.Fingerprint(reg) || reg.Fingerprint == models.Fingerprint(noSQL) {
		t.Fatalf("fingerprint %s does not cover the query", reg.Fingerprint)
	}
	if sn := w.st.Snapshots["sessions@v1"]; sn.SQL != sessionsSQL || sn.TimeColumn != "ts" {
		t.Fatalf("projected %+v", sn)
	}

	dup := w.must(sqlSessions(sessionsSQL, "ts"), t0)
	if len(dup.Events) != 0 || dup.Reply.Message != "snapshot already registered with this definition" {
		t.Fatalf("same query again: %+v", dup)
	}
	for name, c := range map[string]*commands.RegisterSnapshot{
		"another query":       sqlSessions(strings.Replace(sessionsSQL, "min(ts)", "max(ts)", 1), "ts"),
		"whitespace":          sqlSessions(strings.TrimSuffix(sessionsSQL, "\n"), "ts"),
		"another time column": sqlSessions(strings.Replace(sessionsSQL, "AS ts", "AS event_ts", 1), "event_ts"),
		"no query":            sqlSessions("", ""),
	} {
		ce := w.refused(c, t0, commands.CodeConflict)
		if ce.Field != "version" || !strings.Contains(ce.Message, "sessions@v1 is already registered with a different definition") {
			t.Errorf("%s: %v", name, ce)
		}
	}
	// Adding a query to a version without one is a change too.
	w.hourly("clicks", "v1")
	w.refused(&commands.RegisterSnapshot{Model: "clicks", Version: "v1", Cron: "@hourly", Start: t0, SQL: "select 1 as ts", TimeColumn: "ts"}, t0, commands.CodeConflict)
	// An invalid query is refused before it is decided (an unknown macro;
	// statements and references are the engine's parser's: sqlcheck).
	if ce := w.refused(sqlSessions("select @stop as ts", "ts"), t0, commands.CodeInvalid); ce.Field != "sql" {
		t.Errorf("unknown macro: %v", ce)
	}
}

// A version a plan derives for a downstream model keeps its incumbent's
// query and time column.
func TestDerivedVersionKeepsSQL(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	w.must(sqlSessions(sessionsSQL, "ts"), t0)
	w.deploy("prod", "deploy-1", map[string]string{"events": "v1", "sessions": "v1"}, h(1))
	w.hourly("events", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(2))
	sn, ok := w.st.Snapshots["sessions@v1+p1"]
	if !ok {
		t.Fatal("no derived version")
	}
	if sn.SQL != sessionsSQL || sn.TimeColumn != "ts" || sn.Fingerprint != models.Fingerprint(sn.SnapshotRegistered) {
		t.Fatalf("derived %+v", sn.SnapshotRegistered)
	}
}

// A grain is recorded with the version and is part of its definition; a
// version a plan derives keeps it; an invalid one is refused naming
// grain[i].
func TestRegisterGrain(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	c := sqlSessions(sessionsSQL, "ts")
	c.Grain = []string{"session_id"}
	dec := w.must(c, t0)
	if reg := dec.Events[0].(events.SnapshotRegistered); len(reg.Grain) != 1 || reg.Grain[0] != "session_id" {
		t.Fatalf("registered grain %q", reg.Grain)
	}
	w.refused(sqlSessions(sessionsSQL, "ts"), t0, commands.CodeConflict) // the same version without it
	w.deploy("prod", "deploy-1", map[string]string{"events": "v1", "sessions": "v1"}, h(1))
	w.hourly("events", "v2")
	w.plan("p1", "prod", map[string]string{"events": "v2"}, h(2))
	if sn := w.st.Snapshots["sessions@v1+p1"]; sn == nil || len(sn.Grain) != 1 || sn.Grain[0] != "session_id" {
		t.Fatalf("derived %+v", sn)
	}
	bad := sqlSessions(sessionsSQL, "ts")
	bad.Version, bad.Grain = "v2", []string{"session_id", "session_id"}
	if ce := w.refused(bad, t0, commands.CodeInvalid); ce.Field != "grain[1]" {
		t.Errorf("a repeated grain column: %v", ce)
	}
}
