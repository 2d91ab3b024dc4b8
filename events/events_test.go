package events

import (
	"strings"
	"testing"
)

// A stored or referenced version is a plain name or exactly one derived
// form <base>+<plan>; a user's version is a plain name only.
func TestValidVersion(t *testing.T) {
	long := strings.Repeat("a", 128)
	cases := []struct {
		v         string
		ref, user bool
	}{
		{"v1", true, true},
		{"v_1-rc", true, true},
		{long, true, true},
		{long + "a", false, false},
		{"v1+p1", true, false},
		{long + "+" + long, true, false}, // 257 characters: two full names
		{long + "a+p1", false, false},
		{"v1+" + long + "a", false, false},
		{"v1+p1+p2", false, false},
		{"v1+", false, false},
		{"+p1", false, false},
		{"+", false, false},
		{"v1++p1", false, false},
		{"v1+-p1", false, false},
		{"v1+p.1", false, false},
		{"", false, false},
		{"-v1", false, false},
	}
	for _, c := range cases {
		if got := ValidVersion(c.v); got != c.ref {
			t.Errorf("ValidVersion(%q) = %v, want %v", c.v, got, c.ref)
		}
		if got := ValidUserVersion(c.v); got != c.user {
			t.Errorf("ValidUserVersion(%q) = %v, want %v", c.v, got, c.user)
		}
	}
}

func TestWorkID(t *testing.T) {
	for _, k := range []RunKind{RunBackfill, RunScheduled, RunCatchUp, RunRepair, RunRestate} {
		id := WorkID(42, k)
		if seq, got, ok := ParseWorkID(id); !ok || seq != 42 || got != k {
			t.Fatalf("%s: %d %s %v", id, seq, got, ok)
		}
	}
	for _, bad := range []string{"", "work-", "work-1", "work-1-", "work-0-backfill", "work-01-backfill", "work--1-backfill", "work-1-manual",
		"work-1-backfill ", " work-1-backfill", "work-1x-backfill", "work-18446744073709551616-backfill", "job-1-backfill", "work-1-catch_up-x"} {
		if _, _, ok := ParseWorkID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
