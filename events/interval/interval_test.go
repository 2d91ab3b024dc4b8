package interval

import (
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func rg(s string) Range {
	r, err := ParseRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestUnitFloorAdd(t *testing.T) {
	cases := []struct {
		unit      Unit
		in, floor string
		next      string
	}{
		{FiveMinute, "2026-12-01T10:07:30Z", "2026-12-01T10:05:00Z", "2026-12-01T10:10:00Z"},
		{QuarterHour, "2026-12-01T10:29:59Z", "2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z"},
		{HalfHour, "2026-12-01T10:31:00Z", "2026-12-01T10:30:00Z", "2026-12-01T11:00:00Z"},
		{Hour, "2026-12-01T10:59:59Z", "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z"},
		{Day, "2026-12-31T23:00:00Z", "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{Month, "2024-02-29T12:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{Year, "2026-07-04T00:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(string(c.unit), func(t *testing.T) {
			f := c.unit.Floor(ts(c.in))
			if !f.Equal(ts(c.floor)) {
				t.Fatalf("Floor(%s) = %s, want %s", c.in, f, c.floor)
			}
			if n := c.unit.Add(f, 1); !n.Equal(ts(c.next)) {
				t.Fatalf("Add(%s, 1) = %s, want %s", f, n, c.next)
			}
			if !c.unit.Aligned(f) || c.unit.Aligned(ts(c.in)) {
				t.Fatalf("Aligned wrong for %s / %s", f, c.in)
			}
		})
	}
	if _, err := ParseUnit("week"); err == nil {
		t.Fatal("ParseUnit(week) accepted")
	}
}

func TestScheduleUnitDerivation(t *testing.T) {
	cases := []struct {
		cron     string
		unit     Unit
		partials bool
		want     Unit
		wantErr  bool
	}{
		{"@hourly", "", false, Hour, false},
		{"@daily", "", false, Day, false},
		{"@weekly", "", false, Day, false},
		{"@monthly", "", false, Month, false},
		{"@yearly", "", false, Year, false},
		{"0 */6 * * *", "", false, Hour, false},
		{"*/5 * * * *", "", false, FiveMinute, false},
		{"*/15 * * * *", "", false, QuarterHour, false},
		{"0,30 * * * *", "", false, HalfHour, false},
		{"30 7 * * *", "", false, Day, false},
		{"@daily", Hour, false, Hour, false},        // finer unit is fine
		{"@hourly", Day, false, "", true},           // coarser is not
		{"@hourly", Day, true, Day, false},          // unless allow_partials
		{"* * * * *", "", false, "", true},          // every minute
		{"*/7 * * * *", "", false, "", true},        // 56 -> 0 is 4 minutes
		{"not a cron", "", false, "", true},         // garbage
		{"@every 1h", "", false, "", true},          // not anchored
		{"0 * * * *", "fortnight", false, "", true}, // bad unit
	}
	for _, c := range cases {
		t.Run(c.cron+"/"+string(c.unit), func(t *testing.T) {
			s, err := NewSchedule(c.cron, c.unit, c.partials)
			if c.wantErr {
				if err == nil {
					t.Fatalf("NewSchedule(%q, %q) accepted, unit %s", c.cron, c.unit, s.Unit())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Unit() != c.want {
				t.Fatalf("unit = %s, want %s", s.Unit(), c.want)
			}
		})
	}
	a, b := MustSchedule("@hourly", "", false), MustSchedule("0  *  * * *", "", false)
	if !a.Same(b) {
		t.Fatalf("@hourly and 0 * * * * differ: %q %q", a.Cron(), b.Cron())
	}
}

func TestReadiness(t *testing.T) {
	cases := []struct {
		name string
		s    Schedule
		at   string
		rf   string
	}{
		{"hourly mid-hour", MustSchedule("@hourly", "", false), "2026-12-01T11:07:00Z", "2026-12-01T11:00:00Z"},
		{"hourly on tick", MustSchedule("@hourly", "", false), "2026-12-01T11:00:00Z", "2026-12-01T11:00:00Z"},
		{"daily with hour unit", MustSchedule("@daily", Hour, false), "2026-12-01T23:59:00Z", "2026-12-01T00:00:00Z"},
		{"07:30 daily hour unit", MustSchedule("30 7 * * *", Hour, false), "2026-12-01T08:00:00Z", "2026-12-01T07:00:00Z"},
		{"07:30 daily before tick", MustSchedule("30 7 * * *", Hour, false), "2026-12-01T07:29:00Z", "2026-11-30T07:00:00Z"},
		{"07:30 daily day unit", MustSchedule("30 7 * * *", "", false), "2026-12-01T08:00:00Z", "2026-12-01T00:00:00Z"},
		{"partials keep tick", MustSchedule("30 7 * * *", Day, true), "2026-12-01T08:00:00Z", "2026-12-01T07:30:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.s.ReadyFrontier(ts(c.at)); !got.Equal(ts(c.rf)) {
				t.Fatalf("RF(%s) = %s, want %s", c.at, got, c.rf)
			}
			if !c.s.IsBoundary(ts(c.rf)) {
				t.Fatalf("%s should be a cron-tick boundary", c.rf)
			}
		})
	}
	// One @daily advance with hour unit makes 24 intervals ready.
	s := MustSchedule("@daily", Hour, false)
	before := s.Ready(ts("2026-12-01T00:00:00Z"), ts("2026-12-01T23:00:00Z"))
	after := s.Ready(ts("2026-12-01T00:00:00Z"), ts("2026-12-02T00:00:00Z"))
	got := NewSet(after).SubtractSet(NewSet(before)).Split(Hour)
	if len(got) != 24 {
		t.Fatalf("one @daily advance made %d hour intervals ready, want 24", len(got))
	}
	if s.IsBoundary(ts("2026-12-01T05:00:00Z")) {
		t.Fatal("05:00 is not a boundary of @daily/hour")
	}
	if MustSchedule("30 7 * * *", Hour, false).IsBoundary(ts("2026-12-01T07:30:00Z")) {
		t.Fatal("07:30 is not aligned to hour, so it is no boundary")
	}
}

func TestAdvances(t *testing.T) {
	cases := []struct {
		name       string
		s          Schedule
		start, end string
		want       int
	}{
		{"hourly one", MustSchedule("@hourly", "", false), "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z", 1},
		{"hourly three", MustSchedule("@hourly", "", false), "2026-12-01T10:00:00Z", "2026-12-01T13:00:00Z", 3},
		{"daily hour unit: 24 intervals one advance", MustSchedule("@daily", Hour, false), "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", 1},
		{"daily hour unit: two days", MustSchedule("@daily", Hour, false), "2026-12-01T00:00:00Z", "2026-12-03T00:00:00Z", 2},
		{"partial counts one", MustSchedule("30 7 * * *", Day, true), "2026-12-01T00:00:00Z", "2026-12-01T07:30:00Z", 1},
		{"empty", MustSchedule("@hourly", "", false), "2026-12-01T10:00:00Z", "2026-12-01T10:00:00Z", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.s.Advances(ts(c.start), ts(c.end)); got != c.want {
				t.Fatalf("Advances = %d, want %d", got, c.want)
			}
		})
	}
}

func TestSet(t *testing.T) {
	s := NewSet(rg("2026-12-01T02:00:00Z/2026-12-01T03:00:00Z"), rg("2026-12-01T00:00:00Z/2026-12-01T01:00:00Z"))
	if len(s) != 2 {
		t.Fatalf("want 2 ranges, got %v", s)
	}
	s = s.Add(rg("2026-12-01T01:00:00Z/2026-12-01T02:00:00Z")) // touching both: merges to one
	if len(s) != 1 || s.String() != "[2026-12-01T00:00:00Z/2026-12-01T03:00:00Z]" {
		t.Fatalf("merge: got %v", s)
	}
	s = s.Subtract(rg("2026-12-01T01:00:00Z/2026-12-01T01:30:00Z"))
	if s.String() != "[2026-12-01T00:00:00Z/2026-12-01T01:00:00Z, 2026-12-01T01:30:00Z/2026-12-01T03:00:00Z]" {
		t.Fatalf("subtract: got %v", s)
	}
	w := rg("2026-11-30T23:00:00Z/2026-12-01T05:00:00Z")
	m := s.Missing(w)
	if m.String() != "[2026-11-30T23:00:00Z/2026-12-01T00:00:00Z, 2026-12-01T01:00:00Z/2026-12-01T01:30:00Z, 2026-12-01T03:00:00Z/2026-12-01T05:00:00Z]" {
		t.Fatalf("missing: got %v", m)
	}
	if m.IsSuffix(w.End) {
		t.Fatal("three holes are not a suffix")
	}
	if !s.Missing(rg("2026-12-01T01:30:00Z/2026-12-01T05:00:00Z")).IsSuffix(w.End) {
		t.Fatal("a single trailing hole is a suffix")
	}
	if !s.Covers(rg("2026-12-01T02:00:00Z/2026-12-01T03:00:00Z")) || s.Covers(rg("2026-12-01T00:30:00Z/2026-12-01T01:45:00Z")) {
		t.Fatal("Covers wrong")
	}
	if !s.Overlaps(rg("2026-12-01T00:30:00Z/2026-12-01T01:15:00Z")) || s.Overlaps(rg("2026-12-01T01:00:00Z/2026-12-01T01:30:00Z")) {
		t.Fatal("Overlaps wrong")
	}
	if !s.Frontier().Equal(ts("2026-12-01T03:00:00Z")) {
		t.Fatalf("frontier %s", s.Frontier())
	}
	if got := NewSet().Subtract(w); !got.Empty() {
		t.Fatal("empty minus anything is empty")
	}
	if n := len(NewSet(rg("2026-12-01T00:00:00Z/2026-12-01T03:00:00Z")).Split(Hour)); n != 3 {
		t.Fatalf("split: %d", n)
	}
	for _, bad := range []string{"2026-12-01T01:00:00Z", "2026-12-01T02:00:00Z/2026-12-01T01:00:00Z", "x/y"} {
		if _, err := ParseRange(bad); err == nil {
			t.Fatalf("ParseRange(%q) accepted", bad)
		}
	}
}

// TestBatches: a range is cut after every size intervals from its start,
// its last batch shorter; size 0 leaves each range whole.
func TestBatches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	got := Batches(Hour, 168, []Range{R(h(0), h(400)), R(h(500), h(510))})
	want := []Range{R(h(0), h(168)), R(h(168), h(336)), R(h(336), h(400)), R(h(500), h(510))}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if got := Batches(Hour, 0, want); len(got) != 4 {
		t.Fatalf("no batch_size: %v, want each range one batch", got)
	}
}
