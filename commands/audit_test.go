package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// A completion's audit outcomes are not part of what it asks: the same
// batch audited otherwise (computed again) has the same digest.
func TestDigestIgnoresAudits(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := CompleteIntervals{Model: "m", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, Work: "work-3-backfill"}
	d := c
	d.Audits = []events.AuditOutcome{{Audit: "not_null", Count: 3}}
	if Digest(&c) != Digest(&d) {
		t.Error("complete_intervals: the digest depends on audits")
	}
	if Digest(&CompleteWork{CompleteIntervals: c}) != Digest(&CompleteWork{CompleteIntervals: d}) {
		t.Error("complete_work: the digest depends on audits")
	}
	if len(d.Audits) != 1 {
		t.Error("Digest changed the command's audits")
	}
}

// Each bound of an outcome is refused with the field it concerns, over
// the wire as well (msgpack and JSON).
func TestValidateAuditOutcomes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := func() *CompleteWork {
		return &CompleteWork{CompleteIntervals: CompleteIntervals{Meta: Meta{ID: "c-1"}, Model: "m", Version: "v1",
			Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, Work: "work-3-backfill",
			Audits: []events.AuditOutcome{
				{Audit: "not_null", Count: 2, Columns: []string{"id", "ts"}, Sample: [][]string{{"", "2026"}, {"", "2027"}}},
				{Audit: "number_of_rows", Passed: true, Count: 40},
			}}}
	}
	long := strings.Repeat("x", events.MaxAuditValue+1)
	cases := []struct {
		name  string
		edit  func(*CompleteWork)
		code  Code
		field string
	}{
		{"valid", func(*CompleteWork) {}, "", ""},
		{"no name", func(c *CompleteWork) { c.Audits[1].Audit = "" }, CodeInvalid, "audits[1].audit"},
		{"twice", func(c *CompleteWork) { c.Audits[1].Audit = "not_null" }, CodeInvalid, "audits[1].audit"},
		{"negative count", func(c *CompleteWork) { c.Audits[0].Count = -1 }, CodeInvalid, "audits[0].count"},
		{"too many rows", func(c *CompleteWork) {
			c.Audits[0].Sample = append(c.Audits[0].Sample, []string{"", ""}, []string{"", ""}, []string{"", ""}, []string{"", ""})
		}, CodeLimit, "audits[0].sample"},
		{"row of another width", func(c *CompleteWork) { c.Audits[0].Sample[1] = []string{""} }, CodeInvalid, "audits[0].sample[1]"},
		{"long value", func(c *CompleteWork) { c.Audits[0].Sample[1][0] = long }, CodeLimit, "audits[0].sample[1][0]"},
		{"long column", func(c *CompleteWork) { c.Audits[0].Columns[1] = long }, CodeLimit, "audits[0].columns[1]"},
		{"too many columns", func(c *CompleteWork) {
			c.Audits[0].Columns, c.Audits[0].Sample = make([]string, events.MaxAuditColumns+1), nil
		}, CodeLimit, "audits[0].columns"},
		{"long error", func(c *CompleteWork) { c.Audits[1].Error = strings.Repeat("e", events.MaxAuditError+1) }, CodeLimit, "audits[1].error"},
		{"too many outcomes", func(c *CompleteWork) {
			c.Audits = nil
			for i := 0; i <= events.MaxAudits; i++ {
				c.Audits = append(c.Audits, events.AuditOutcome{Audit: "a" + strings.Repeat("x", i), Passed: true})
			}
		}, CodeLimit, "audits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := base()
			c.edit(cmd)
			for _, asJSON := range []bool{false, true} {
				body, err := Encode(cmd, asJSON)
				if err != nil {
					t.Fatal(err)
				}
				ct := ContentMsgpack
				if asJSON {
					ct = ContentJSON
				}
				back, err := Decode(KindCompleteWork, ct, body)
				if c.field == "" {
					if err != nil {
						t.Fatalf("json %t: %v", asJSON, err)
					}
					if got := back.(*CompleteWork).Audits; len(got) != 2 || got[0].Sample[1][1] != "2027" || !got[1].Passed {
						t.Fatalf("json %t: decoded %+v", asJSON, got)
					}
					continue
				}
				var ce *Error
				if !errors.As(err, &ce) || ce.Code != c.code || ce.Field != c.field {
					t.Fatalf("json %t: want %s on %s, got %v", asJSON, c.code, c.field, err)
				}
			}
		})
	}
	// An unknown key inside an outcome is refused in msgpack, naming it.
	body := []byte("\x86\xa2id\xa3c-1\xa5model\xa1m\xa7version\xa2v1\xa6ranges\x91\x92\xce\x69\x2f\x26\x80\xce\x69\x2f\x34\x90\xa4work\xafwork-3-backfill\xa6audits\x91\x81\xa6colour\xa3red")
	if _, err := Decode(KindCompleteWork, ContentMsgpack, body); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown outcome key: %v", err)
	}
	// And in JSON, naming the field.
	js := `{"id":"c-1","model":"m","version":"v1","ranges":["2026-12-01T00:00:00Z/2026-12-01T01:00:00Z"],"work":"work-3-backfill","audits":[{"audit":"a","passed":true,"colour":"red"}]}`
	var ce *Error
	if _, err := Decode(KindCompleteWork, ContentJSON, []byte(js)); !errors.As(err, &ce) || ce.Field != "audits" || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown outcome key in JSON: %v", err)
	}
	reg := `{"id":"r-1","model":"m","version":"v1","cron":"@hourly","start":"2026-12-01T00:00:00Z","audits":[{"name":"n","kind":"not_null","colums":["id"]}]}`
	if _, err := Decode(KindRegisterSnapshot, ContentJSON, []byte(reg)); !errors.As(err, &ce) || ce.Field != "audits" || !strings.Contains(err.Error(), "colums") {
		t.Fatalf("unknown audit key in JSON: %v", err)
	}
}
