package models

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// Validate names each problem twice: for the command API (Field, Msg) and
// for files, whose location names the field (Key, Detail).
func TestValidate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ok := Definition{Model: "events", Cron: "@hourly", Start: t0}
	cases := []struct {
		name                    string
		edit                    func(*Definition)
		field, key, msg, detail string
	}{
		{"valid without a version", func(*Definition) {}, "", "", "", ""},
		{"bad name", func(d *Definition) { d.Model = "a b" }, "model", "name", `model "a b": use lower-case letters, digits, '_' and '-' (at most 63 bytes)`, `"a b": use lower-case letters, digits, '_' and '-' (at most 63 bytes)`},
		{"derived version", func(d *Definition) { d.Version = "v1+p1" }, "version", "version", `version "v1+p1": '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'`, `"v1+p1": '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'`},
		{"unit coarser than cron", func(d *Definition) { d.Unit = interval.Day }, "cron", "interval_unit", "", ""},
		{"unaligned start", func(d *Definition) { d.Start = t0.Add(30 * time.Minute) }, "start", "start", "start 2026-12-01T00:30:00Z is not aligned to the hour unit", "2026-12-01T00:30:00Z is not aligned to the hour unit"},
		{"lookback over the bound", func(d *Definition) { d.Lookback = MaxLookback + 1 }, "lookback", "lookback", "lookback 10001: at most 10000 intervals", "lookback 10001: at most 10000 intervals"},
		{"bad kind", func(d *Definition) { d.Kind = "table" }, "kind", "kind", `kind "table": want incremental, forward_only, full, view or seed`, `"table": want incremental, forward_only, full, view or seed`},
		{"full without sql", func(d *Definition) { d.Kind = "full" }, "sql", "sql", "sql is required for a full model", "is required for a full model"},
		{"seed without content", func(d *Definition) { d.Kind = "seed" }, "seed", "seed", "seed is required for a seed: its CSV content", "is required for a seed: its CSV content"},
		{"seed content on incremental", func(d *Definition) { d.Seed = "a\n1\n" }, "seed", "seed", `seed is only for kind seed (kind is "incremental")`, `is only for kind seed (kind is "incremental")`},
		{"bad macros", func(d *Definition) { d.Macros = "jinja" }, "macros", "macros", `macros "jinja": want "sqlmesh" or nothing (tidemark's @start_ts and @end_ts)`, `"jinja": want "sqlmesh" or nothing (tidemark's @start_ts and @end_ts)`},
		{"forward only", func(d *Definition) { d.Kind = events.ForwardOnly }, "", "", "", ""},
		{"sql model", func(d *Definition) {
			d.SQL, d.TimeColumn = "SELECT * FROM raw WHERE ts >= @start_ts AND ts < @end_ts", "ts"
		}, "", "", "", ""},
		{"sql forward only", func(d *Definition) {
			d.Kind, d.SQL, d.TimeColumn = events.ForwardOnly, "with x as (select 1) select * from x", "ts"
		}, "", "", "", ""},
		{"sql without time column", func(d *Definition) { d.SQL = "SELECT 1" }, "time_column", "time_column", "time_column is required when sql is set", "is required when sql is set"},
		{"time column without sql", func(d *Definition) { d.TimeColumn = "ts" }, "sql", "sql", "sql is required when time_column is set", "is required when time_column is set"},
		{"blank sql", func(d *Definition) { d.SQL, d.TimeColumn = " \n\t", "ts" }, "sql", "sql", "sql is empty", "is empty"},
		{"sql over the bound", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT "+strings.Repeat("x", MaxSQL), "ts" }, "sql", "sql", "sql is 65543 bytes: at most 65536", "is 65543 bytes: at most 65536"},
		{"sql macro", func(d *Definition) { d.SQL, d.TimeColumn = "-- a\nSELECT @stop", "ts" }, "sql", "sql", `sql uses the macro @stop at line 2, column 8: only @start_ts and @end_ts are defined`, `uses the macro @stop at line 2, column 8: only @start_ts and @end_ts are defined`},
		{"sql unknown macro", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT * FROM raw\nWHERE ts >= @start_ds", "ts" }, "sql", "sql", "sql uses the macro @start_ds at line 2, column 13: only @start_ts and @end_ts are defined", ""},
		{"sql unterminated", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT 'a", "ts" }, "sql", "sql", "sql has an unterminated string literal at line 1, column 8", ""},
		{"time column not an identifier", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT 1", "1ts" }, "time_column", "time_column", `time_column "1ts": a plain column name (letters, digits and '_', not starting with a digit)`, ""},
		{"time column quoted", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT 1", `"ts"` }, "time_column", "time_column", "", ""},
		{"time column too long", func(d *Definition) { d.SQL, d.TimeColumn = "SELECT 1", strings.Repeat("t", 64) }, "time_column", "time_column", "", ""},
		{"self dependency", func(d *Definition) { d.DependsOn = []string{"a", "events"} }, "depends_on[1]", "depends_on[1]", "a model cannot depend on itself", "a model cannot depend on itself"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := ok
			c.edit(&d)
			err := d.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("want *FieldError, got %v", err)
			}
			if fe.Field != c.field || fe.Key != c.key || (c.msg != "" && fe.Msg != c.msg) || (c.detail != "" && fe.Detail != c.detail) {
				t.Fatalf("got %+v, want %s/%s %q %q", fe, c.field, c.key, c.msg, c.detail)
			}
		})
	}
}
