package warehouse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sqlmeshValue is SQLMesh's value of one predefined variable for [s, e)
// (sqlmesh/utils/date.py: date_dict over make_inclusive_end's end),
// computed here as Python computes it: the end is e minus 1µs; _ds is
// to_ts(…)[0:10]; _ts is isoformat(sep=" ") (".ffffff" only when the
// microseconds are not zero); _millis is int(timestamp() * 1000); _epoch
// is _millis / 1000. date and dt values are the instants (a DATE at UTC
// midnight); ds and ts the text.
func sqlmeshValue(name string, s, e time.Time) any {
	x := s
	if strings.HasPrefix(name, "end_") {
		x = e.Add(-time.Microsecond)
	}
	if name == "execution_ds" {
		return e.Format(time.DateOnly)
	}
	ms := x.UnixMicro() / 1000
	switch name[strings.IndexByte(name, '_')+1:] {
	case "ds":
		return x.Format(time.DateOnly)
	case "date":
		return time.Date(x.Year(), x.Month(), x.Day(), 0, 0, 0, 0, time.UTC)
	case "ts":
		ts := x.Format(time.DateTime)
		if us := x.Nanosecond() / 1000; us != 0 {
			ts += fmt.Sprintf(".%06d", us)
		}
		return ts
	case "dt":
		return x
	case "millis":
		return ms
	case "epoch":
		return float64(ms) / 1000
	}
	panic(name)
}

// TestSQLMeshMacroValues runs every SQLMesh macro, rendered with the
// interval bound as the warehouse binds it ($1, $2), on each engine and
// compares it with SQLMesh's value: _ds and _ts cast to text in the engine
// (they are DATE and TIMESTAMP values, SQLMeshMacro), the others as they
// come.
func TestSQLMeshMacroValues(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	intervals := []struct{ s, e time.Time }{
		{at("2024-01-01 00:00:00"), at("2024-01-02 00:00:00")},             // a day
		{at("2024-02-29 13:00:00"), at("2024-02-29 14:00:00")},             // an hour
		{at("2024-02-29 10:15:30.123456"), at("2024-03-01 00:00:00.0015")}, // odd bounds: truncated millis, micros shown
	}
	// The day, as SQLMesh prints it (independently of sqlmeshValue).
	day := map[string]any{
		"start_ds": "2024-01-01", "end_ds": "2024-01-01", "execution_ds": "2024-01-02",
		"start_ts": "2024-01-01 00:00:00", "end_ts": "2024-01-01 23:59:59.999999",
		"start_millis": int64(1704067200000), "end_millis": int64(1704153599999),
		"start_epoch": 1704067200.0, "end_epoch": 1704153599.999,
	}
	for n, want := range day {
		if got := sqlmeshValue(n, intervals[0].s, intervals[0].e); got != want {
			t.Fatalf("sqlmeshValue(%s) = %v, want %v", n, got, want)
		}
	}
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		for _, iv := range intervals {
			for _, n := range sqlmeshNames {
				sql := "SELECT @" + n
				if strings.HasSuffix(n, "_ds") || strings.HasSuffix(n, "_ts") {
					sql = "SELECT CAST(@" + n + " AS VARCHAR)"
				}
				// Both parameters appear in every statement (the engines
				// want each bound one used).
				r, err := SubstituteMacrosIn(MacrosSQLMesh, sql+", @start_dt, @end_dt", ParamStart, ParamEnd, "")
				if err != nil {
					t.Fatal(err)
				}
				var got, s, e any
				if err := w.DB().QueryRowContext(t.Context(), r.Text, iv.s, iv.e).Scan(&got, &s, &e); err != nil {
					t.Fatalf("%s: %v", r.Text, err)
				}
				if tm, ok := got.(time.Time); ok {
					got = tm.UTC()
				}
				if want := sqlmeshValue(n, iv.s, iv.e); got != want {
					t.Errorf("[%s, %s) @%s = %#v, want %#v", iv.s, iv.e, n, got, want)
				}
			}
		}
	})
}

// TestSQLMeshMacrosWrite: a model in SQLMesh's vocabulary filtering its
// source with the inclusive end (BETWEEN) reads exactly the interval's
// rows, over a TIMESTAMP column (@start_ts/@end_ts) and a DATE column
// (@start_ds/@end_ds); its custom audits render SQLMesh's macros too.
// Each model's row counts what it read, so rows the outer filter of a
// write would drop still show.
func TestSQLMeshMacrosWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ts := Model{Name: "by_ts", Table: "by_ts__1", TimeColumn: "ts", Macros: MacrosSQLMesh,
			SQL: "SELECT @start_dt AS ts, count(*) AS n FROM raw.page_views WHERE ts BETWEEN @start_ts AND @end_ts"}
		ds := Model{Name: "by_ds", Table: "by_ds__1", TimeColumn: "ts", Macros: MacrosSQLMesh,
			SQL: "SELECT @START_DT AS ts, count(*) AS n FROM (SELECT CAST(ts AS DATE) AS d FROM raw.page_views) v\nWHERE d BETWEEN @start_ds AND @end_ds"}
		// One every 7 minutes from day0 00:00 (seed): a range of whole
		// minutes [a, b) holds the rows i with a <= 7i < b. A row falls on
		// day 7's start (7·1440 minutes): BETWEEN the exclusive end would
		// read it.
		rowsIn := func(r Range) int64 {
			a, b := int64(r.Start.Sub(day0)/time.Minute), int64(r.End.Sub(day0)/time.Minute)
			return (b+6)/7 - (a+6)/7
		}
		for _, c := range []struct {
			m Model
			r Range
		}{
			{ts, Range{day(0), day(1)}},
			{ts, Range{day(6), day(7)}},
			{ts, Range{day0.Add(time.Hour), day0.Add(2 * time.Hour)}},
			{ds, Range{day(6), day(7)}},
			{ds, Range{day(1), day(3)}},
		} {
			want := rowsIn(c.r)
			if _, err := w.WriteInterval(t.Context(), c.m, c.r.Start, c.r.End); err != nil {
				t.Fatalf("%s %v: %v", c.m.Name, c.r, err)
			}
			got := scalar(t, w, fmt.Sprintf("SELECT n FROM %s WHERE ts = $1", qualified(Schema, c.m.Table)), c.r.Start)
			if got != want {
				t.Errorf("%s over [%s, %s) read %d rows, want %d", c.m.Name, c.r.Start, c.r.End, got, want)
			}
		}
		runAuditCases(t, w, ts, Range{day(6), day(7)}, []auditCase{
			{name: "in range", audit: Audit{Name: "in_range", Kind: AuditCustom,
				SQL: "SELECT * FROM @this_model WHERE ts NOT BETWEEN @start_dt AND @end_ts OR n <> 205"}, passed: true},
			{name: "macro values", audit: Audit{Name: "values", Kind: AuditCustom,
				SQL: "SELECT * FROM @this_model WHERE CAST(@end_ds AS VARCHAR) = '2026-01-07' AND @execution_ds = DATE '2026-01-08' AND @end_millis - @start_millis = 86399999"}, passed: false, count: 1},
			{name: "tidemark's", audit: Audit{Name: "tidemark", Kind: AuditCustom,
				SQL: "SELECT * FROM @this_model WHERE ts >= @end_ts"}, passed: true},
		})
	})
}

func TestSubstituteMacrosIn(t *testing.T) {
	// tidemark's vocabulary is SubstituteMacros, this unused.
	a, err := SubstituteMacrosIn("", "SELECT @start_ts, @end_ts", "S", "E", "T")
	if err != nil || a.Text != "SELECT S, E" {
		t.Fatalf("tidemark vocabulary: %q, %v", a.Text, err)
	}
	if _, err := SubstituteMacrosIn("", "SELECT @start_ds", "S", "E", "T"); err == nil {
		t.Fatal("tidemark's vocabulary took @start_ds")
	}
	// @this_model in a model's SQL is its table; refused without one.
	sql := "SELECT @start_ds AS d,\n @this_model.x FROM @This_Model"
	r, err := SubstituteMacrosIn(MacrosSQLMesh, sql, "S", "E", `"tidemark"."t__1"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `SELECT CAST(S AS DATE) AS d,` + "\n" + ` "tidemark"."t__1".x FROM "tidemark"."t__1"`; r.Text != want {
		t.Fatalf("rendered %q, want %q", r.Text, want)
	}
	// Offsets map back: the text after the last macro, and inside one.
	if i := strings.LastIndex(r.Text, "FROM"); r.Source(i) != strings.LastIndex(sql, "FROM") {
		t.Errorf("Source(%d) = %d, want %d", i, r.Source(i), strings.LastIndex(sql, "FROM"))
	}
	if i := strings.Index(r.Text, `"t__1".x`); r.Source(i) != strings.Index(sql, "@this_model") {
		t.Errorf("Source inside @this_model = %d", r.Source(i))
	}
	var me *MacroError
	for _, c := range []struct{ vocab, sql, this, has string }{
		{MacrosSQLMesh, "SELECT 1 FROM @this_model", "", "reading its own table"},
		{MacrosSQLMesh, "SELECT 1,\n @start_hour", "T", "@start_hour: SQLMesh's macros defined here are @start_ds"},
		{MacrosSQLMesh, "SELECT $1", "T", "positional parameter"},
		{"jinja", "SELECT 1", "T", `vocabulary "jinja"`},
	} {
		_, err := SubstituteMacrosIn(c.vocab, c.sql, "S", "E", c.this)
		if !errors.As(err, &me) || !strings.Contains(err.Error(), c.has) {
			t.Errorf("%s %q: %v, want a *MacroError saying %q", c.vocab, c.sql, err, c.has)
		}
	}
	if _, err := SubstituteMacrosIn(MacrosSQLMesh, "SELECT 1,\n @start_hour", "S", "E", ""); !errors.As(err, &me) || me.Offset != strings.Index("SELECT 1,\n @start_hour", "@") {
		t.Errorf("unknown macro placed at %v", err)
	}
	// An audit's @this_model is the audited rows, in either vocabulary.
	for _, v := range []string{"", MacrosSQLMesh} {
		r, err := SubstituteAuditMacrosIn(v, "SELECT * FROM @this_model", "S", "E")
		if err != nil || r.Text != "SELECT * FROM "+ThisModel {
			t.Errorf("audit in %q: %q, %v", v, r.Text, err)
		}
	}
	// render gives the model's own table to @this_model.
	q, err := render(Model{Name: "m", Table: "m__1", Macros: MacrosSQLMesh, SQL: "SELECT * FROM @this_model"}, "S", "E")
	if err != nil || !strings.Contains(q, `FROM "tidemark"."m__1"`) {
		t.Errorf("render: %q, %v", q, err)
	}
}
