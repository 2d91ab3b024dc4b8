package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

func TestCommandIDs(t *testing.T) {
	long := strings.Repeat("a", MaxIDLen)
	cases := []struct {
		id          string
		valid, wire bool // Validate accepts; Decode (the wire) accepts
	}{
		{"01KBC5Y3ZN0000000000000000", true, true},
		{"work-12-scheduled/0/1/2/failed", true, true},
		{"deploy:2026-12-01T10:00:00Z", true, true},
		{"a.b_c-d:e/f@g+h=i", true, true},
		{long, true, true},
		{long + "a", false, false},
		{"", false, false},
		{" x", false, false},
		{"x ", false, false},
		{"x\t", false, false},
		{"x y", false, false},
		{"x\x00", false, false},
		{"é", false, false},
		{"x#1", false, false},
		{"$tick:prod:2026-12-01T10:00:00Z", true, false},
		{"$catch-up-retry:p1:17", true, false},
		{"$work:work-12-backfill/0", true, false},
		{"$tick:" + strings.Repeat("a", MaxInternalIDLen), false, false},
		{"$Tick:x", false, false},
		{"$tick:", false, false},
		{"$tick", false, false},
		{"$tick:a b", false, false},
	}
	for _, c := range cases {
		cmd := &Promote{Meta: Meta{ID: c.id}, Plan: "p1"}
		err := cmd.Validate()
		if (err == nil) != c.valid {
			t.Errorf("Validate(%q) = %v, want valid %v", c.id, err, c.valid)
		}
		var ce *Error
		if err != nil && (!errors.As(err, &ce) || ce.Code != CodeInvalid || ce.Field != "id") {
			t.Errorf("Validate(%q): %v is not invalid on id", c.id, err)
		}
		body, _ := Encode(cmd, false)
		_, err = Decode(KindPromote, ContentMsgpack, body)
		if (err == nil) != c.wire {
			t.Errorf("Decode(id %q) = %v, want accepted %v", c.id, err, c.wire)
		}
		if err != nil && (!errors.As(err, &ce) || ce.Code != CodeInvalid || ce.Field != "id") {
			t.Errorf("Decode(id %q): %v is not invalid on id", c.id, err)
		}
	}
}

// The digest is what a command asks: not its id, actor, clock or
// correlation, nor its encoding; any other field, or the kind, changes it.
func TestDigest(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := func() *RegisterSnapshot {
		return &RegisterSnapshot{Meta: Meta{ID: "a", Actor: "x", At: t0}, Model: "events", Version: "v1", Cron: "@hourly", Start: t0}
	}
	d := Digest(base())
	same := base()
	same.Meta = Meta{ID: "b", Correlation: "c"}
	same.DependsOn = []string{}
	same.Start = t0.In(time.FixedZone("x", 3600))
	if Digest(same) != d {
		t.Error("the digest depends on Meta, an empty list or the time zone")
	}
	daily := base()
	daily.Cron = "@daily"
	if Digest(daily) == d {
		t.Error("another cron, the same digest")
	}
	withDep := base()
	withDep.DependsOn = []string{"raw"}
	if Digest(withDep) == d {
		t.Error("another dependency, the same digest")
	}
	if Digest(&Promote{Plan: "p"}) == Digest(&Finalize{Plan: "p"}) {
		t.Error("two kinds, one digest")
	}
	// Maps are hashed in key order; JSON and msgpack decode to one digest.
	p := &BuildPlan{Meta: Meta{ID: "p"}, Plan: "p1", Env: "prod", Versions: map[string]string{"a": "v1", "b": "v2", "c": "v3", "d": "v4"}}
	for _, asJSON := range []bool{false, true} {
		b, _ := Encode(p, asJSON)
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		back, err := Decode(KindBuildPlan, ct, b)
		if err != nil || Digest(back) != Digest(p) {
			t.Errorf("json %v: %v, digest differs", asJSON, err)
		}
	}
	c := &CompleteIntervals{Meta: Meta{ID: "c"}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}}
	c2 := *c
	c2.Ranges = []interval.Range{interval.R(t0, t0.Add(2*time.Hour))}
	if Digest(c) == Digest(&c2) || len(Digest(c)) != 64 {
		t.Errorf("completion digests %s %s", Digest(c), Digest(&c2))
	}
}

// Times outside the supported range are refused, naming the field.
func TestTimeBounds(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)
	r := []interval.Range{interval.R(t0, t0.Add(time.Hour))}
	cases := []struct {
		cmd   Command
		field string
	}{
		{&Promote{Meta: Meta{ID: "a", At: far}, Plan: "p"}, "at"},
		{&Status{Meta: Meta{At: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)}}, "at"},
		{&RegisterSnapshot{Meta: Meta{ID: "a"}, Model: "m", Version: "v1", Cron: "@hourly", Start: far}, "start"},
		{&CompleteIntervals{Meta: Meta{ID: "a"}, Model: "m", Version: "v1", Ranges: append(r, interval.R(t0, far))}, "ranges[1]"},
		{&InvalidateIntervals{Meta: Meta{ID: "a"}, Model: "m", Version: "v1", Ranges: []interval.Range{interval.R(time.Unix(-3600, 0), t0)}}, "ranges[0]"},
		{&FailRun{Meta: Meta{ID: "a"}, Model: "m", Version: "v1", Ranges: []interval.Range{interval.R(t0, time.Date(2200, 1, 1, 0, 0, 1, 0, time.UTC))}, RunKind: "scheduled", Error: "x", Attempt: 1}, "ranges[0]"},
	}
	for _, c := range cases {
		// Over the wire too: msgpack carries year 10001.
		body, err := Encode(c.cmd, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{c.cmd.Validate(), func() error { _, err := Decode(c.cmd.Kind(), ContentMsgpack, body); return err }()} {
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != CodeInvalid || ce.Field != c.field {
				t.Errorf("%s: want invalid on %s, got %v", c.cmd.Kind(), c.field, err)
			}
		}
	}
}

// The digests of the hot path's commands, taken without reflection, are
// the reflective digests, byte for byte.
func TestDigestFastPath(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := interval.R(t0, t0.Add(time.Hour))
	meta := Meta{ID: "c-1", Actor: "w", At: t0, Correlation: "p", AfterSeq: 9}
	for i, c := range []CompleteIntervals{
		{Meta: meta, Model: "m", Version: "v1", Ranges: []interval.Range{r}},
		{Model: "m", Version: "v1", Ranges: []interval.Range{}, RunKind: events.RunBackfill, RunID: "backfill:p1", Work: "work-3-backfill"},
		{Meta: meta, Model: "m", Version: "v2"},
	} {
		c := c
		if got, want := Digest(&c), digestReflect(&c); got != want {
			t.Errorf("complete_intervals %d: %s, reflective %s", i, got, want)
		}
		w := &CompleteWork{CompleteIntervals: c}
		if got, want := Digest(w), digestReflect(w); got != want {
			t.Errorf("complete_work %d: %s, reflective %s", i, got, want)
		}
		if i != 1 && c.Meta != meta {
			t.Errorf("complete_intervals %d: Digest changed the command's meta: %+v", i, c.Meta)
		}
	}
}

// TestDigestIgnoresRows: a completion's rows are not part of what it asks:
// the same batch reported with other rows (computed again) has the same
// digest, so its fixed id is a retry, not an idempotency conflict; other
// ranges are another command.
func TestDigestIgnoresRows(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := CompleteIntervals{Model: "m", Version: "v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, Work: "work-3-backfill", Rows: 101}
	d := c
	d.Rows = 102
	if Digest(&c) != Digest(&d) {
		t.Error("complete_intervals: the digest depends on rows")
	}
	if Digest(&CompleteWork{CompleteIntervals: c}) != Digest(&CompleteWork{CompleteIntervals: d}) {
		t.Error("complete_work: the digest depends on rows")
	}
	d.Ranges = []interval.Range{interval.R(t0, t0.Add(2*time.Hour))}
	if Digest(&CompleteWork{CompleteIntervals: c}) == Digest(&CompleteWork{CompleteIntervals: d}) {
		t.Error("complete_work: other ranges, same digest")
	}
}
