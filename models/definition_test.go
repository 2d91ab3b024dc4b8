package models

import (
	"errors"
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
		{"bad name", func(d *Definition) { d.Model = "a b" }, "model", "name", `model "a b": use letters, digits, '_' and '-' (at most 128)`, `"a b": use letters, digits, '_' and '-' (at most 128)`},
		{"derived version", func(d *Definition) { d.Version = "v1+p1" }, "version", "version", `version "v1+p1": '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'`, `"v1+p1": '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'`},
		{"unit coarser than cron", func(d *Definition) { d.Unit = interval.Day }, "cron", "interval_unit", "", ""},
		{"unaligned start", func(d *Definition) { d.Start = t0.Add(30 * time.Minute) }, "start", "start", "start 2026-12-01T00:30:00Z is not aligned to the hour unit", "2026-12-01T00:30:00Z is not aligned to the hour unit"},
		{"lookback over the bound", func(d *Definition) { d.Lookback = MaxLookback + 1 }, "lookback", "lookback", "lookback 10001: at most 10000 intervals", "lookback 10001: at most 10000 intervals"},
		{"bad kind", func(d *Definition) { d.Kind = "full" }, "kind", "kind", `kind "full": want incremental or forward_only`, `"full": want incremental or forward_only`},
		{"forward only", func(d *Definition) { d.Kind = events.ForwardOnly }, "", "", "", ""},
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
			if fe.Field != c.field || fe.Key != c.key || (c.msg != "" && (fe.Msg != c.msg || fe.Detail != c.detail)) {
				t.Fatalf("got %+v, want %s/%s %q %q", fe, c.field, c.key, c.msg, c.detail)
			}
		})
	}
}
