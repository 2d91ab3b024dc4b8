package commands

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events/interval"
)

func TestDecodeBothEncodings(t *testing.T) {
	r := interval.R(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	in := &CompleteIntervals{Meta: Meta{ID: "c1"}, Model: "events", Version: "v1", Ranges: []interval.Range{r}, RunKind: "scheduled"}
	for _, asJSON := range []bool{false, true} {
		got := roundTrip(t, in, asJSON)
		c := got.(*CompleteIntervals)
		if c.ID != "c1" || c.Model != "events" || len(c.Ranges) != 1 || !c.Ranges[0].Start.Equal(r.Start) || !c.Ranges[0].End.Equal(r.End) {
			t.Fatalf("json=%v: decoded %+v", asJSON, c)
		}
	}
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, kind, ct, body string
		code                 Code
		field                string
	}{
		{"unknown json field", KindPromote, ContentJSON, `{"id":"a","plan":"p1","extra":1}`, CodeMalformed, "extra"},
		{"wrong type", KindPromote, ContentJSON, `{"id":"a","plan":7}`, CodeMalformed, "plan"},
		{"bad plan name", KindPromote, ContentJSON, `{"id":"a","plan":"p 1"}`, CodeInvalid, "plan"},
		{"no ranges", KindCompleteIntervals, ContentJSON, `{"id":"a","model":"m","version":"v1","ranges":[]}`, CodeInvalid, "ranges"},
		{"bad run kind", KindCompleteIntervals, ContentJSON, `{"id":"a","model":"m","version":"v1","run_kind":"x","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}`, CodeInvalid, "run_kind"},
		{"bad unit", KindRegisterSnapshot, ContentJSON, `{"id":"a","model":"m","version":"v1","cron":"@hourly","interval_unit":"week","start":"2026-12-01T00:00:00Z"}`, CodeInvalid, "interval_unit"},
		{"coarse unit", KindRegisterSnapshot, ContentJSON, `{"id":"a","model":"m","version":"v1","cron":"@hourly","interval_unit":"day","start":"2026-12-01T00:00:00Z"}`, CodeInvalid, "cron"},
		{"unaligned start", KindRegisterSnapshot, ContentJSON, `{"id":"a","model":"m","version":"v1","cron":"@daily","start":"2026-12-01T05:00:00Z"}`, CodeInvalid, "start"},
		{"no versions", KindBuildPlan, ContentJSON, `{"id":"a","plan":"p","env":"prod"}`, CodeInvalid, "versions"},
		{"negative bound", KindBuildPlan, ContentJSON, `{"id":"a","plan":"p","env":"prod","versions":{"m":"v"},"max_trailing_gap_advances":-1}`, CodeInvalid, "max_trailing_gap_advances"},
		{"unknown content type", KindPromote, "text/plain", `x`, CodeMalformed, "Content-Type"},
		{"empty", KindPromote, ContentJSON, ``, CodeMalformed, ""},
		{"too large", KindPromote, ContentJSON, strings.Repeat(" ", MaxBodyBytes+1), CodeTooLarge, ""},
		{"unknown kind", "explode", ContentJSON, `{}`, CodeInvalid, "kind"},
		{"json key twice", KindPromote, ContentJSON, `{"id":"a","plan":"p1","plan":"p2"}`, CodeMalformed, "plan"},
		{"json key twice, escaped", KindPromote, ContentJSON, `{"id":"a","plan":"p1","\u0070lan":"p2"}`, CodeMalformed, "plan"},
		{"json key twice, invalid utf-8", KindPromote, ContentJSON, "{\"id\":\"a\",\"\xff\":1,\"\xfe\":2}", CodeMalformed, "\ufffd"},
		{"json nested key twice", KindBuildPlan, ContentJSON, `{"id":"a","plan":"p","env":"prod","versions":{"m":"v1","n":"v1","m":"v2"}}`, CodeMalformed, "versions.m"},
		{"restate unknown field", KindRestate, ContentJSON, `{"id":"a","env":"prod","model":"m","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"force":true}`, CodeMalformed, "force"},
		{"restate bad range", KindRestate, ContentJSON, `{"id":"a","env":"prod","model":"m","ranges":["2026-12-01T02:00:00Z/2026-12-01T01:00:00Z"]}`, CodeMalformed, "ranges"},
		{"restate no model", KindRestate, ContentJSON, `{"id":"a","env":"prod","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}`, CodeInvalid, "model"},
		{"json trailing bracket", KindPromote, ContentJSON, `{"id":"a","plan":"p1"}]`, CodeMalformed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.kind, c.ct, []byte(c.body))
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrRejected) {
				t.Fatalf("want *Error, got %v", err)
			}
			if ce.Code != c.code || ce.Field != c.field {
				t.Fatalf("got %s on %q (%s), want %s on %q", ce.Code, ce.Field, ce.Message, c.code, c.field)
			}
		})
	}
	// The same key in two objects, and brackets and quotes inside strings,
	// are no duplicates.
	if _, err := Decode(KindBuildPlan, ContentJSON, []byte(`{"id":"a1","actor":"a{\"plan\":[","plan":"p","env":"prod","versions":{"plan":"v1","id":"v2"}}`)); err != nil {
		t.Fatalf("same key in two objects: %v", err)
	}
	// msgpack key twice, at the top level and in a nested map
	twice := []byte{0x83, 0xa2, 'i', 'd', 0xa1, 'a', 0xa4, 'p', 'l', 'a', 'n', 0xa2, 'p', '1', 0xa4, 'p', 'l', 'a', 'n', 0xa2, 'p', '2'}
	if _, err := Decode(KindPromote, ContentMsgpack, twice); !isRejection(err, CodeMalformed, "plan") {
		t.Fatalf("msgpack key twice: %v", err)
	}
	nested := []byte{0x84, 0xa2, 'i', 'd', 0xa1, 'a', 0xa4, 'p', 'l', 'a', 'n', 0xa1, 'p', 0xa3, 'e', 'n', 'v', 0xa1, 'e',
		0xa8, 'v', 'e', 'r', 's', 'i', 'o', 'n', 's', 0x82, 0xa1, 'm', 0xa2, 'v', '1', 0xa1, 'm', 0xa2, 'v', '2'}
	if _, err := Decode(KindBuildPlan, ContentMsgpack, nested); !isRejection(err, CodeMalformed, "versions.m") {
		t.Fatalf("msgpack nested key twice: %v", err)
	}
	// msgpack unknown field
	b, _ := Encode(&Promote{Meta: Meta{ID: "a"}, Plan: "p1"}, false)
	b = append([]byte{b[0] + 1}, b[1:]...) // one more map entry
	b = append(b, 0xa5, 'e', 'x', 't', 'r', 'a', 0x01)
	_, err := Decode(KindPromote, ContentMsgpack, b)
	var ce *Error
	if !errors.As(err, &ce) || ce.Field != "extra" {
		t.Fatalf("msgpack unknown field: %v", err)
	}
}

func isRejection(err error, code Code, field string) bool {
	var ce *Error
	return errors.As(err, &ce) && ce.Code == code && ce.Field == field
}

// TestWorkReports: complete_work and fail_work carry the work item; they
// decode in both encodings, and are refused without one, with an id that
// is not a work item's, or with another run kind than the item's.
func TestWorkReports(t *testing.T) {
	r := interval.R(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	cw := &CompleteWork{CompleteIntervals{Meta: Meta{ID: "c1"}, Model: "events", Version: "v1", Ranges: []interval.Range{r}, RunKind: "scheduled", Work: "work-9-scheduled"}}
	fw := &FailWork{FailRun{Meta: Meta{ID: "f1"}, Model: "events", Version: "v1", Ranges: []interval.Range{r}, RunKind: "backfill", Error: "exit 1", Attempt: 1, Work: "work-3-backfill"}}
	for _, c := range []Command{cw, fw} {
		for _, asJSON := range []bool{false, true} {
			got := roundTrip(t, c, asJSON)
			if !reflect.DeepEqual(normal(got), normal(c)) {
				t.Fatalf("%s json=%v: decoded %+v, sent %+v", c.Kind(), asJSON, got, c)
			}
		}
	}
	cases := []struct {
		name, kind, body string
		field            string
	}{
		{"complete_work without work", KindCompleteWork, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}`, "work"},
		{"fail_work without work", KindFailWork, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"run_kind":"backfill","error":"x","attempt":1}`, "work"},
		{"not a work id", KindCompleteWork, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"work":"work-1-manual"}`, "work"},
		{"not a work id (complete_intervals)", KindCompleteIntervals, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"work":"tick:prod"}`, "work"},
		{"another run kind", KindCompleteWork, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"work":"work-1-backfill","run_kind":"scheduled"}`, "run_kind"},
		{"another run kind (fail_run)", KindFailRun, `{"id":"a","model":"m","version":"v1","ranges":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"],"run_kind":"manual","error":"x","attempt":1,"work":"work-1-backfill"}`, "run_kind"},
	}
	for _, c := range cases {
		if _, err := Decode(c.kind, ContentJSON, []byte(c.body)); !isRejection(err, CodeInvalid, c.field) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// normal makes a decoded command comparable with the one sent (times in UTC).
func normal(c Command) Command {
	var rs []interval.Range
	switch c := c.(type) {
	case *CompleteWork:
		rs = c.Ranges
	case *FailWork:
		rs = c.Ranges
	}
	for i := range rs {
		rs[i] = interval.R(rs[i].Start.UTC(), rs[i].End.UTC())
	}
	return c
}

// roundTrip encodes c (JSON or msgpack) and decodes it as its kind,
// failing the test on either error.
func roundTrip(t *testing.T, c Command, asJSON bool) Command {
	t.Helper()
	b, err := Encode(c, asJSON)
	if err != nil {
		t.Fatal(err)
	}
	ct := ContentMsgpack
	if asJSON {
		ct = ContentJSON
	}
	got, err := Decode(c.Kind(), ct, b)
	if err != nil {
		t.Fatalf("%s json=%v: %v", c.Kind(), asJSON, err)
	}
	return got
}
