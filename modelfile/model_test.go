package modelfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const good = `models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
  - name: sessions
    version: v3
    cron: "@daily"
    interval_unit: hour
    start: 2026-12-01T00:00:00Z
    depends_on: [events]
`

func TestParse(t *testing.T) {
	ms, err := Parse("models.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Register.Model != "events" || !ms[0].Derived || ms[1].Register.Version != "v3" || ms[1].VersionLine != 6 || ms[1].Line != 5 {
		t.Fatalf("parsed %+v", ms)
	}
	again, _ := Parse("models.yaml", []byte(good))
	if again[0].Register.Version != ms[0].Register.Version {
		t.Fatalf("derived version not stable: %s vs %s", again[0].Register.Version, ms[0].Register.Version)
	}
	changed, err := Parse("models.yaml", []byte(strings.Replace(good, `cron: "@hourly"`, `cron: "*/30 * * * *"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if changed[0].Register.Version == ms[0].Register.Version {
		t.Fatal("a changed definition kept its derived version")
	}
	same, _ := Parse("models.yaml", []byte(strings.Replace(good, `cron: "@hourly"`, `cron: "0 * * * *"`, 1)))
	if same[0].Register.Version != ms[0].Register.Version {
		t.Fatal("@hourly and 0 * * * * are one definition")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"broken yaml", "models:\n  - name: events\n    cron: [\n", "models.yaml:3:"},
		{"unknown field", strings.Replace(good, "    depends_on: [events]\n", "    depends_on: [events]\n    colour: red\n", 1), `models.yaml:11: unknown field "colour"`},
		{"bad cron", strings.Replace(good, `cron: "@daily"`, `cron: "* * * * *"`, 1), "models.yaml:7: models[1].cron: interval: invalid schedule"},
		{"unit coarser than cron", strings.Replace(good, "interval_unit: hour", "interval_unit: year", 1), "models.yaml:8: models[1].interval_unit:"},
		{"bad unit", strings.Replace(good, "interval_unit: hour", "interval_unit: fortnight", 1), "models.yaml:8: models[1].interval_unit:"},
		{"unknown upstream", strings.Replace(good, "depends_on: [events]", "depends_on: [clicks]", 1), `models.yaml:10: models[1].depends_on[0]: unknown model "clicks"`},
		{"start", strings.Replace(good, "start: 2026-12-01T00:00:00Z\n  - name: sessions", "start: yesterday\n  - name: sessions", 1), `models.yaml:4: models[0].start: "yesterday" is not an RFC 3339 time`},
		{"unaligned start", strings.Replace(good, "start: 2026-12-01T00:00:00Z\n  - name: sessions", "start: 2026-12-01T00:30:00Z\n  - name: sessions", 1), "models.yaml:4: models[0].start: 2026-12-01T00:30:00Z is not aligned to the hour unit"},
		{"duplicate", good + "  - name: events\n    cron: \"@hourly\"\n    start: 2026-12-01T00:00:00Z\n", `models.yaml:11: models[2].name: model "events" is already defined at models[0]`},
		{"lookback over the bound", strings.Replace(good, "    depends_on: [events]\n", "    lookback: 10001\n    depends_on: [events]\n", 1), "models.yaml:10: models[1].lookback: lookback 10001: at most 10000 intervals"},
		{"negative lookback", strings.Replace(good, "    depends_on: [events]\n", "    lookback: -1\n    depends_on: [events]\n", 1), "models.yaml:10: models[1].lookback: lookback must be >= 0"},
		{"no models", "models: []\n", "models.yaml:1: models: at least one model is required"},
		{"no cron: the model's line", strings.Replace(good, "    cron: \"@daily\"\n", "", 1), "models.yaml:5: models[1].cron: cron is required"},
		{"version with +", strings.Replace(good, "version: v3", "version: v3+p1", 1), `models.yaml:6: models[1].version: "v3+p1": '+' is reserved for derived versions`},
		{"version ending in +", strings.Replace(good, "version: v3", "version: v3+", 1), `models.yaml:6: models[1].version: "v3+": '+' is reserved for derived versions`},
		{"start off the cron's unit", strings.Replace(good, "    interval_unit: hour\n    start: 2026-12-01T00:00:00Z", "    start: 2026-12-01T05:00:00Z", 1), "models.yaml:8: models[1].start: 2026-12-01T05:00:00Z is not aligned to the day unit"},
		{"start off the explicit unit", strings.Replace(good, "interval_unit: hour\n    start: 2026-12-01T00:00:00Z", "interval_unit: hour\n    start: 2026-12-01T05:30:00Z", 1), "models.yaml:9: models[1].start: 2026-12-01T05:30:00Z is not aligned to the hour unit"},
		{"start off by a second", strings.Replace(good, "interval_unit: hour\n    start: 2026-12-01T00:00:00Z", "interval_unit: hour\n    start: 2026-12-01T05:00:01Z", 1), "models.yaml:9: models[1].start: 2026-12-01T05:00:01Z is not aligned to the hour unit"},
		{"bad kind", strings.Replace(good, "    depends_on: [events]\n", "    depends_on: [events]\n    kind: sideways\n", 1), `models.yaml:11: models[1].kind: "sideways"`},
	}
	for _, c := range cases {
		_, err := Parse("models.yaml", []byte(c.body))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.name, err, c.want)
		}
	}
}

// A start on the unit is valid, whether the unit is given or derived from
// the cron.
func TestParseAlignedStarts(t *testing.T) {
	for _, body := range []string{
		strings.Replace(good, "interval_unit: hour\n    start: 2026-12-01T00:00:00Z", "interval_unit: hour\n    start: 2026-12-01T05:00:00Z", 1),
		strings.Replace(good, "start: 2026-12-01T00:00:00Z\n  - name: sessions", "start: 2026-12-01T05:00:00+05:00\n  - name: sessions", 1),
	} {
		if _, err := Parse("models.yaml", []byte(body)); err != nil {
			t.Errorf("%v\n%s", err, body)
		}
	}
}

const withSQL = `models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
  - name: sessions
    version: v1
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
    depends_on: [events]
    time_column: ts
    sql: |
      -- one row per session; ';' in a comment is fine
      SELECT session_id, min(ts) AS ts
      FROM events
      WHERE ts >= @start_ts AND ts < @end_ts
      GROUP BY session_id
`

// A version may carry its query as a block scalar; it is registered exactly
// as written (the block's lines, its final newline) and changes a derived
// version.
func TestParseSQL(t *testing.T) {
	ms, err := Parse("models.yaml", []byte(withSQL))
	if err != nil {
		t.Fatal(err)
	}
	s := ms[1].Register
	want := "-- one row per session; ';' in a comment is fine\nSELECT session_id, min(ts) AS ts\nFROM events\nWHERE ts >= @start_ts AND ts < @end_ts\nGROUP BY session_id\n"
	if s.Model != "sessions" || s.SQL != want || s.TimeColumn != "ts" {
		t.Fatalf("registered %q %q %q", s.Model, s.SQL, s.TimeColumn)
	}
	if ms[0].Register.SQL != "" || ms[0].Register.TimeColumn != "" {
		t.Fatalf("events has no sql: %+v", ms[0].Register)
	}
	// Without a version, the query is part of the derived one.
	derived := strings.Replace(withSQL, "    version: v1\n", "", 1)
	a, err := Parse("models.yaml", []byte(derived))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("models.yaml", []byte(strings.Replace(derived, "min(ts)", "max(ts)", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !a[1].Derived || a[1].Register.Version == b[1].Register.Version {
		t.Fatalf("a changed query kept its derived version %s", a[1].Register.Version)
	}
	noSQL := strings.Split(derived, "    time_column:")[0]
	c, err := Parse("models.yaml", []byte(noSQL))
	if err != nil {
		t.Fatal(err)
	}
	if c[1].Register.Version == a[1].Register.Version {
		t.Fatal("adding a query kept the derived version")
	}
}

func TestParseSQLErrors(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"unknown macro", strings.Replace(withSQL, "@end_ts", "@end_date", 1), "models.yaml:11: models[1].sql: uses the macro @end_date at line 4, column 32: only @start_ts and @end_ts are defined"},
		{"no time column", strings.Replace(withSQL, "    time_column: ts\n", "", 1), "models.yaml:5: models[1].time_column: is required when sql is set"},
		{"no sql", strings.Split(withSQL, "    sql: |")[0], "models.yaml:5: models[1].sql: is required when time_column is set"},
		{"bad time column", strings.Replace(withSQL, "time_column: ts", `time_column: "ts; drop"`, 1), `models.yaml:10: models[1].time_column: "ts; drop": a plain column name`},
		{"sql not a string", strings.Replace(withSQL, "    sql: |\n", "    sql:\n      - a\n    notsql: |\n", 1), "models.yaml:12:"},
	}
	for _, c := range cases {
		_, err := Parse("models.yaml", []byte(c.body))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.name, err, c.want)
		}
	}
}

// The audits list: built-ins by kind (name defaulting to it, blocking to
// true), custom ones by name and sql; problems name the field and line.
func TestParseAudits(t *testing.T) {
	body := good[:strings.Index(good, "  - name: sessions")] + `    audits:
      - not_null: {columns: [user_id, ts]}
      - unique_values: {columns: [id], name: ids}
      - number_of_rows: {threshold: 1}
      - accepted_values: {column: status, is_in: [new, paid, 3]}
      - accepted_range: {column: amount, min: 0, blocking: false}
      - name: no_future_rows
        sql: SELECT * FROM @this_model WHERE ts > now()
        blocking: false
`
	ms, err := Parse("models.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	as := ms[0].Register.Audits
	if len(as) != 6 {
		t.Fatalf("audits %+v", as)
	}
	if a := as[0]; a.Name != "not_null" || a.Kind != "not_null" || strings.Join(a.Columns, ",") != "user_id,ts" || a.NonBlocking {
		t.Errorf("not_null: %+v", a)
	}
	if a := as[1]; a.Name != "ids" || a.Kind != "unique_values" {
		t.Errorf("unique_values: %+v", a)
	}
	if a := as[2]; a.Threshold != 1 {
		t.Errorf("number_of_rows: %+v", a)
	}
	if a := as[3]; a.Column != "status" || strings.Join(a.IsIn, ",") != "new,paid,3" {
		t.Errorf("accepted_values: %+v", a)
	}
	if a := as[4]; a.Min != "0" || a.Max != "" || !a.NonBlocking {
		t.Errorf("accepted_range: %+v", a)
	}
	if a := as[5]; a.Kind != "custom" || a.Name != "no_future_rows" || !strings.Contains(a.SQL, "@this_model") || !a.NonBlocking {
		t.Errorf("custom: %+v", a)
	}
	plain, _ := Parse("models.yaml", []byte(good))
	if ms[0].Register.Version == plain[0].Register.Version {
		t.Error("audits did not change the derived version")
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"unknown kind", "- number_of_rows: {threshold: 1}", "- row_count: {threshold: 1}", `models.yaml:8: models[0].audits[2]: want a built-in audit`},
		{"unknown field", "{threshold: 1}", "{threshold: 1, column: x}", `models.yaml:8: models[0].audits[2].number_of_rows.column: unknown key "column"`},
		{"negative threshold", "{threshold: 1}", "{threshold: -1}", `models.yaml:8: models[0].audits[2].number_of_rows.threshold: must be >= 0, got -1`},
		{"bad column", "[user_id, ts]", "[user_id, 1ts]", `models.yaml:6: models[0].audits[0].columns[1]: "1ts": a plain column name`},
		{"duplicate name", "{columns: [id], name: ids}", "{columns: [id], name: not_null}", `models.yaml:7: models[0].audits[1].name: "not_null": audits[0] has this name already`},
		{"custom without sql", "        sql: SELECT * FROM @this_model WHERE ts > now()\n", "", `models.yaml:11: models[0].audits[5].sql: is required`},
		{"blocking not a bool", "blocking: false}", "blocking: no}", `models.yaml:10: models[0].audits[4].accepted_range.blocking: want true or false`},
	} {
		_, err := Parse("models.yaml", []byte(strings.Replace(body, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// grain: a list of columns, or one column as a string; it is registered
// and is part of a derived version; a bad one is refused naming grain[i].
func TestParseGrain(t *testing.T) {
	list := strings.Replace(withSQL, "    time_column: ts\n", "    time_column: ts\n    grain: [session_id, ts]\n", 1)
	ms, err := Parse("models.yaml", []byte(list))
	if err != nil {
		t.Fatal(err)
	}
	if g := ms[1].Register.Grain; fmt.Sprint(g) != "[session_id ts]" {
		t.Fatalf("grain %q", g)
	}
	one, err := Parse("models.yaml", []byte(strings.Replace(list, "[session_id, ts]", "session_id", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if g := one[1].Register.Grain; fmt.Sprint(g) != "[session_id]" {
		t.Fatalf("grain %q", g)
	}
	derived := strings.Replace(withSQL, "    version: v1\n", "", 1)
	a, err := Parse("models.yaml", []byte(derived))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("models.yaml", []byte(strings.Replace(derived, "    time_column: ts\n", "    time_column: ts\n    grain: session_id\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if a[1].Register.Version == b[1].Register.Version {
		t.Fatal("adding a grain kept the derived version")
	}
	for body, want := range map[string]string{
		strings.Replace(list, "[session_id, ts]", "[session_id, session_id]", 1): `models[1].grain[1]: "session_id" repeats grain[0]`,
		strings.Replace(list, "[session_id, ts]", `["a b"]`, 1):                  `models[1].grain[0]: "a b": a plain column name`,
		strings.Replace(list, "[session_id, ts]", "{a: b}", 1):                   "grain",
	} {
		if _, err := Parse("models.yaml", []byte(body)); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// A model file may name a schema-qualified model and depend on one; a name
// with two dots, or a reserved schema, is refused naming the line.
func TestParseQualifiedNames(t *testing.T) {
	body := strings.NewReplacer("name: events", "name: raw.events", "depends_on: [events]", "depends_on: [raw.events]", "name: sessions", "name: sushi.sessions").Replace(good)
	ms, err := Parse("models.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Register.Model != "raw.events" || ms[1].Register.Model != "sushi.sessions" || ms[1].Register.DependsOn[0] != "raw.events" {
		t.Fatalf("parsed %+v", ms)
	}
	for name, want := range map[string]string{
		"a.b.c":        `models.yaml:2: models[0].name: "a.b.c"`,
		"tidemark.x":   `models.yaml:2: models[0].name: "tidemark.x": its schema "tidemark" is reserved`,
		"Sushi.events": `models.yaml:2: models[0].name: "Sushi.events": its schema "Sushi": use lower-case letters only`,
	} {
		_, err := Parse("models.yaml", []byte(strings.Replace(body, "name: raw.events", "name: "+name, 1)))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want prefix %q", name, err, want)
		}
	}
}

// freshness is read as intervals (`3`) or a duration (`2h`), enters the
// registration (and so the derived version), and a bad one names its
// line and field.
func TestParseFreshness(t *testing.T) {
	plain, err := Parse("models.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ value, want string }{{"3", "3"}, {"2h", "2h"}, {`"90m"`, "90m"}} {
		ms, err := Parse("models.yaml", []byte(strings.Replace(good, "  - name: sessions", "    freshness: "+c.value+"\n  - name: sessions", 1)))
		if err != nil {
			t.Fatalf("freshness %s: %v", c.value, err)
		}
		if ms[0].Register.Freshness != c.want || ms[0].Register.Version == plain[0].Register.Version {
			t.Errorf("freshness %s: %q (version %s, without it %s)", c.value, ms[0].Register.Freshness, ms[0].Register.Version, plain[0].Register.Version)
		}
	}
	_, err = Parse("models.yaml", []byte(strings.Replace(good, "  - name: sessions", "    freshness: soon\n  - name: sessions", 1)))
	if want := `models.yaml:5: models[0].freshness: "soon": want a whole number of intervals`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("freshness soon: %v, want prefix %q", err, want)
	}
}
