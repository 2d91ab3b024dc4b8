package models

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

func TestValidateFreshness(t *testing.T) {
	d := Definition{Model: "m", Cron: "@hourly", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	for _, c := range []struct {
		fresh string
		ok    bool
	}{
		{"", true}, {"1", true}, {"3", true}, {"10000", true}, {"90m", true}, {"2h", true}, {"87840h", true},
		{"0", false}, {"-1", false}, {"10001", false}, {"0s", false}, {"-2h", false}, {"87841h", false},
		{"2 h", false}, {" 2h", false}, {"soon", false}, {"1.5", false},
	} {
		d.Freshness = c.fresh
		err := d.Validate()
		fe, isField := err.(*FieldError)
		if c.ok != (err == nil) || (err != nil && (!isField || fe.Field != "freshness")) {
			t.Errorf("freshness %q: %v, want ok %t (else an error on freshness)", c.fresh, err, c.ok)
		}
	}
}

// Oldest is the readiness frontier less the bound: one interval by
// default, n intervals, or a duration; intervals count from the
// interval the readiness frontier falls in (a partial one's start).
func TestFreshnessOldest(t *testing.T) {
	ready := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		fresh string
		unit  interval.Unit
		want  time.Time
	}{
		{"", interval.Hour, ready.Add(-time.Hour)}, {"3", interval.Hour, ready.Add(-3 * time.Hour)},
		{"", interval.Day, ready.AddDate(0, 0, -1).Add(-12 * time.Hour)}, {"90m", interval.Day, ready.Add(-90 * time.Minute)},
	} {
		f, err := ParseFreshness(c.fresh)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Oldest(c.unit, ready); !got.Equal(c.want) {
			t.Errorf("%q of %s: %s, want %s", c.fresh, c.unit, got, c.want)
		}
	}
}

// Freshness enters the fingerprint only when set (every golden above is
// unchanged); pinned here.
func TestFingerprintGoldenFreshness(t *testing.T) {
	r := events.SnapshotRegistered{Model: "sessions", Cron: "@hourly", Unit: "hour",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Kind: events.Incremental}
	none := Fingerprint(r)
	r.Freshness = "3"
	a := Fingerprint(r)
	r.Freshness = "2h"
	if b := Fingerprint(r); a == none || b == a || b == none {
		t.Fatalf("fingerprints: none %s, 3 %s, 2h %s", none, a, b)
	}
	if want := "d67ea09476f1ff1d"; a != want {
		t.Errorf("Fingerprint = %s, want %s", a, want)
	}
}
