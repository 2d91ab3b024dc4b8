package models

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
)

// TestValidateAudits: each audit rule refuses with the field it concerns.
func TestValidateAudits(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	good := []Audit{
		{Name: "not_null", Kind: AuditNotNull, Columns: []string{"user_id", "ts"}},
		{Name: "unique_values", Kind: AuditUniqueValues, Columns: []string{"id"}},
		{Name: "number_of_rows", Kind: AuditNumberOfRows, Threshold: 1},
		{Name: "accepted_values", Kind: AuditAcceptedValues, Column: "status", IsIn: []string{"new", "paid"}},
		{Name: "accepted_range", Kind: AuditAcceptedRange, Column: "amount", Min: "0"},
		{Name: "no_future_rows", Kind: AuditCustom, SQL: "SELECT * FROM @this_model WHERE ts >= @end_ts", NonBlocking: true},
	}
	cases := []struct {
		name  string
		edit  func([]Audit) []Audit
		field string
		msg   string
	}{
		{"all kinds", func(a []Audit) []Audit { return a }, "", ""},
		{"none", func([]Audit) []Audit { return nil }, "", ""},
		{"too many", func(a []Audit) []Audit {
			var out []Audit
			for i := 0; i <= MaxAudits; i++ {
				out = append(out, Audit{Name: "a" + strings.Repeat("x", i), Kind: AuditNumberOfRows})
			}
			return out
		}, "audits", "audits: 33 audits, at most 32"},
		{"unknown kind", func(a []Audit) []Audit { a[1].Kind = "unique"; return a }, "audits[1].kind", ""},
		{"no kind", func(a []Audit) []Audit { a[1].Kind = ""; return a }, "audits[1].kind", ""},
		{"duplicate name", func(a []Audit) []Audit { a[2].Name = "not_null"; return a }, "audits[2].name", `audits[2].name "not_null": audits[0] has this name already (name one of them)`},
		{"name not an identifier", func(a []Audit) []Audit { a[0].Name = "no nulls"; return a }, "audits[0].name", ""},
		{"no name", func(a []Audit) []Audit { a[0].Name = ""; return a }, "audits[0].name", "audits[0].name is required"},
		{"column not an identifier", func(a []Audit) []Audit { a[0].Columns = []string{"id", "ts; drop"}; return a }, "audits[0].columns[1]", ""},
		{"no columns", func(a []Audit) []Audit { a[1].Columns = nil; return a }, "audits[1].columns", ""},
		{"built-in with sql", func(a []Audit) []Audit { a[0].SQL = "SELECT 1"; return a }, "audits[0].sql", ""},
		{"custom without sql", func(a []Audit) []Audit { a[5].SQL = ""; return a }, "audits[5].sql", ""},
		{"custom macro", func(a []Audit) []Audit { a[5].SQL = "SELECT * FROM @that_model"; return a }, "audits[5].sql",
			"audits[5].sql uses the macro @that_model at line 1, column 15: only @this_model, @start_ts and @end_ts are defined"},
		{"custom sql over the bound", func(a []Audit) []Audit { a[5].SQL = "SELECT " + strings.Repeat("x", MaxSQL); return a }, "audits[5].sql", ""},
		{"negative threshold", func(a []Audit) []Audit { a[2].Threshold = -1; return a }, "audits[2].threshold", ""},
		{"empty is_in", func(a []Audit) []Audit { a[3].IsIn = nil; return a }, "audits[3].is_in", ""},
		{"no column", func(a []Audit) []Audit { a[3].Column = ""; return a }, "audits[3].column", ""},
		{"range without bounds", func(a []Audit) []Audit { a[4].Min = ""; return a }, "audits[4].min", "audits[4].min accepted_range needs min or max (or both)"},
		{"another kind's field", func(a []Audit) []Audit { a[2].Columns = []string{"id"}; return a }, "audits[2].columns", ""},
		{"literal with a NUL", func(a []Audit) []Audit { a[3].IsIn[1] = "pa\x00id"; return a }, "audits[3].is_in[1]", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := make([]Audit, len(good))
			copy(as, good)
			for i := range as {
				as[i].IsIn = append([]string(nil), good[i].IsIn...)
			}
			d := Definition{Model: "events", Cron: "@hourly", Start: t0, Audits: c.edit(as)}
			err := d.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || fe.Key != c.field || (c.msg != "" && fe.Msg != c.msg) {
				t.Fatalf("got %#v, want field %s %q", err, c.field, c.msg)
			}
		})
	}
}

// Audits enter the fingerprint only when set: a version without audits
// keeps the golden fingerprint; each change to an audit is another version.
func TestFingerprintAudits(t *testing.T) {
	r := events.SnapshotRegistered{Model: "events", Cron: "0 * * * *", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Kind: events.Incremental}
	base := Fingerprint(r)
	r.Audits = []Audit{}
	if Fingerprint(r) != base {
		t.Fatal("an empty audits list changed the fingerprint")
	}
	r.Audits = []Audit{{Name: "not_null", Kind: AuditNotNull, Columns: []string{"id"}}}
	if got, want := Fingerprint(r), "b6b4387e9acc628c"; got != want {
		t.Errorf("Fingerprint with an audit = %s, want %s", got, want)
	}
	seen := map[string]string{base: "none", Fingerprint(r): "one"}
	for name, a := range map[string][]Audit{
		"non-blocking":   {{Name: "not_null", Kind: AuditNotNull, Columns: []string{"id"}, NonBlocking: true}},
		"another column": {{Name: "not_null", Kind: AuditNotNull, Columns: []string{"ts"}}},
		"another name":   {{Name: "ids", Kind: AuditNotNull, Columns: []string{"id"}}},
		"two":            {{Name: "not_null", Kind: AuditNotNull, Columns: []string{"id"}}, {Name: "n", Kind: AuditNumberOfRows, Threshold: 1}},
		"custom":         {{Name: "not_null", Kind: AuditCustom, SQL: "SELECT 1"}},
		"another custom": {{Name: "not_null", Kind: AuditCustom, SQL: "SELECT 2"}},
	} {
		c := r
		c.Audits = a
		fp := Fingerprint(c)
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s has the fingerprint of %s", name, prev)
		}
		seen[fp] = name
	}
}

// TestValidateAuditRangeBoundsOrder: an accepted_range whose min and max
// are both refused names min, every time (the bounds are checked in
// order, not in a map's random order).
func TestValidateAuditRangeBoundsOrder(t *testing.T) {
	bad := strings.Repeat("x", MaxAuditLiteral+1)
	d := Definition{Model: "events", Cron: "@hourly", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Audits: []Audit{{Name: "r", Kind: AuditAcceptedRange, Column: "amount", Min: bad, Max: bad}}}
	for i := range 64 {
		var fe *FieldError
		if err := d.Validate(); !errors.As(err, &fe) || fe.Field != "audits[0].min" {
			t.Fatalf("try %d: got %v, want audits[0].min", i, err)
		}
	}
}
