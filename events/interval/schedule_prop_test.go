package interval

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The closed forms of Advances and Prev against the walks they replace,
// kept here as oracles.

// walkAdvances is the tick-by-tick Advances this package had before.
func walkAdvances(s Schedule, start, end time.Time) int {
	const maxAdvanceTicks = 10_000_000
	start, end = start.UTC(), end.UTC()
	if !start.Before(end) {
		return 0
	}
	count := 0
	var last time.Time
	t := s.Next(start)
	for i := 0; i < maxAdvanceTicks && !t.IsZero(); i++ {
		rf := s.floorTick(t)
		if rf.After(end) {
			break
		}
		if rf.After(start) && !rf.Equal(last) {
			count++
			last = rf
		}
		t = s.Next(t)
	}
	return count
}

// walkPrev is the Prev this package had before: it walks the ticks of
// windows growing fourfold back from t.
func walkPrev(s Schedule, t time.Time) time.Time {
	t = t.UTC()
	for back := time.Hour; back <= 16*366*24*time.Hour; back *= 4 {
		from := t.Add(-back)
		var last time.Time
		for n := s.spec.Next(from.Add(-time.Second)); !n.IsZero() && !n.After(t); n = s.spec.Next(n) {
			last = n
		}
		if !last.IsZero() {
			return last.UTC()
		}
	}
	return time.Time{}
}

// genCron draws a five-field cron or a descriptor: steps, ranges, lists and
// names in every field, day-of-month and day-of-week restricted alone or
// together (robfig/cron's either-or rule), rare days (the 31st, February
// 29th).
func genCron(t *rapid.T) string {
	if rapid.IntRange(0, 5).Draw(t, "descriptor?") == 0 {
		return rapid.SampledFrom([]string{"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"}).Draw(t, "descriptor")
	}
	minute := rapid.OneOf(
		rapid.SampledFrom([]string{"*/5", "*/10", "*/15", "*/20", "*/30", "0", "0,30", "5,35", "10,40", "3-59/20", "0-50/10", "7,22,37,52", "45"}),
		rapid.Custom(func(t *rapid.T) string { return fmt.Sprint(rapid.IntRange(0, 59).Draw(t, "m")) }),
	).Draw(t, "minute")
	hour := rapid.OneOf(
		rapid.SampledFrom([]string{"*", "*", "*/2", "*/6", "*/5", "0", "9-17", "1,13", "22-23", "0-23/7", "12"}),
		rapid.Custom(func(t *rapid.T) string { return fmt.Sprint(rapid.IntRange(0, 23).Draw(t, "h")) }),
	).Draw(t, "hour")
	dom := rapid.SampledFrom([]string{"*", "*", "*", "?", "1", "15", "28", "29", "30", "31", "1,15", "*/10", "10-20", "2-30/7", "*/1"}).Draw(t, "dom")
	month := rapid.SampledFrom([]string{"*", "*", "*", "1", "2", "*/3", "6-8", "jan,jul", "12", "feb", "2-11/4"}).Draw(t, "month")
	dow := rapid.SampledFrom([]string{"*", "*", "*", "?", "0", "1-5", "sat,sun", "*/2", "3", "mon", "6", "*/1"}).Draw(t, "dow")
	return minute + " " + hour + " " + dom + " " + month + " " + dow
}

// genSchedule draws a valid schedule: a cron, a unit (derived, finer, or
// coarser with allow_partials) and allow_partials.
func genSchedule(t *rapid.T) Schedule {
	expr := genCron(t)
	derived, err := NewSchedule(expr, "", false)
	if err != nil {
		t.Skip(err) // never fires, or fires too often
	}
	partials := rapid.Bool().Draw(t, "partials")
	var units []Unit
	for _, u := range Units {
		if partials || u.Nominal() <= derived.Unit().Nominal() {
			units = append(units, u)
		}
	}
	unit := rapid.SampledFrom(append(units, "")).Draw(t, "unit")
	s, err := NewSchedule(expr, unit, partials)
	if err != nil {
		t.Fatalf("NewSchedule(%q, %q, %v): %v", expr, unit, partials, err)
	}
	return s
}

// genTime draws a time between 1971 and 2090 near s's structure: on a
// tick, a boundary of a unit, or any second (or nanosecond).
func genTime(t *rapid.T, s Schedule, label string) time.Time {
	y := rapid.IntRange(1971, 2090).Draw(t, label+"-year")
	x := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 366*24*3600-1).Draw(t, label+"-sec")) * time.Second)
	switch rapid.IntRange(0, 4).Draw(t, label+"-shape") {
	case 0:
		x = s.Next(x)
	case 1:
		x = rapid.SampledFrom(Units).Draw(t, label+"-unit").Floor(x)
	case 2:
		x = x.Add(time.Duration(rapid.IntRange(1, 999_999_999).Draw(t, label+"-ns")))
	}
	return x
}

// genSpan draws a span length: short, medium, or (for crons that fire
// hourly or less) up to six years, so the oracle stays quick.
func genSpan(t *rapid.T, s Schedule) time.Duration {
	maxDays := []int{2, 120, 120}
	if s.minGapForTest() >= time.Hour {
		maxDays[2] = 6 * 366
	}
	d := maxDays[rapid.IntRange(0, 2).Draw(t, "span-kind")]
	return time.Duration(rapid.Int64Range(0, int64(d)*24*3600).Draw(t, "span")) * time.Second
}

func (s Schedule) minGapForTest() time.Duration {
	g, _ := cachedMinGap(s)
	return g
}

// Advances counts what the tick-by-tick walk counted.
func TestAdvancesMatchesWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSchedule(t)
		start := genTime(t, s, "start")
		end := start.Add(genSpan(t, s))
		if rapid.IntRange(0, 9).Draw(t, "swap") == 0 {
			start, end = end, start // an empty or inverted span counts nothing
		}
		if got, want := s.Advances(start, end), walkAdvances(s, start, end); got != want {
			t.Fatalf("%s unit %s partials %v: Advances(%s, %s) = %d, the walk counts %d",
				s.Cron(), s.Unit(), s.AllowPartials(), start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), got, want)
		}
	})
}

// Prev finds the tick the walk found; IsBoundary (still a robfig/cron
// Next) agrees with the closed form: x is a boundary exactly when the
// span of one second ending at it counts one advance.
func TestPrevMatchesWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSchedule(t)
		at := genTime(t, s, "at")
		if got, want := s.Prev(at), walkPrev(s, at); !got.Equal(want) {
			t.Fatalf("%s: Prev(%s) = %s, the walk finds %s", s.Cron(), at.Format(time.RFC3339Nano), got, want)
		}
		x := s.ReadyFrontier(at)
		if rapid.Bool().Draw(t, "any") {
			x = s.Unit().Floor(at)
		}
		if x.IsZero() {
			return
		}
		if got, want := s.IsBoundary(x), s.Advances(x.Add(-time.Second), x) == 1; got != want {
			t.Fatalf("%s unit %s partials %v: IsBoundary(%s) = %v, Advances over the second before it %v", s.Cron(), s.Unit(), s.AllowPartials(), x, got, want)
		}
	})
}

// Beyond what the oracle can walk: counting is additive over any split,
// so the 400-year cycles counted at once agree with the months walked.
func TestAdvancesAdditiveOverCenturies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSchedule(t)
		a := genTime(t, s, "a").AddDate(-rapid.IntRange(0, 1500).Draw(t, "back"), 0, 0)
		total := a
		var parts []time.Time
		for i, n := 0, rapid.IntRange(1, 5).Draw(t, "parts"); i < n; i++ {
			sec := rapid.Int64Range(0, 399*365*daySeconds).Draw(t, "part") // beyond a Duration
			total = time.Unix(total.Unix()+sec, int64(total.Nanosecond())).UTC()
			parts = append(parts, total)
		}
		whole, sum, from := s.Advances(a, total), 0, a
		for _, p := range parts {
			sum += s.Advances(from, p)
			from = p
		}
		if whole != sum {
			t.Fatalf("%s unit %s partials %v: Advances(%s, %s) = %d, over %v: %d", s.Cron(), s.Unit(), s.AllowPartials(), a, total, whole, parts, sum)
		}
	})
}

// Work is the fold of Add it replaced.
func TestWorkMatchesFold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSchedule(t)
		var rs Set
		for i, n := 0, rapid.IntRange(0, 8).Draw(t, "n"); i < n; i++ {
			a := genTime(t, s, "a")
			rs = rs.Add(R(a, a.Add(time.Duration(rapid.Int64Range(1, 3*24*3600).Draw(t, "len"))*time.Second)))
		}
		var want Set
		for _, r := range rs {
			end := r.End
			if !s.allowPartials {
				end = s.unit.Ceil(end)
			}
			want = want.Add(R(s.unit.Floor(r.Start), end))
		}
		if got := s.Work(rs); !got.Equal(want) || (got == nil) != (want == nil) {
			t.Fatalf("Work(%v) = %#v, the fold gives %#v", rs, got, want)
		}
	})
}

// The calendar arithmetic agrees with package time, far from 1970 too.
func TestCivilMatchesTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		z := rapid.Int64Range(-1_000_000, 3_000_000).Draw(t, "day")
		tm := time.Unix(z*daySeconds, 0).UTC()
		y, m, d := civil(z)
		if y != int64(tm.Year()) || m != int(tm.Month()) || d != tm.Day() || weekday(z) != int(tm.Weekday()) {
			t.Fatalf("day %d: civil %d-%d-%d weekday %d, time says %s", z, y, m, d, weekday(z), tm.Format("2006-01-02 Mon"))
		}
		if back := days(y, m, d); back != z {
			t.Fatalf("days(civil(%d)) = %d", z, back)
		}
		if monthLen(y, m) != time.Date(int(y), time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
			t.Fatalf("length of %d-%d", y, m)
		}
	})
}

// Examples the property may rarely draw.
func TestAdvancesExamples(t *testing.T) {
	d := func(s string) time.Time { return ts(s) }
	cases := []struct {
		cron       string
		unit       Unit
		partials   bool
		start, end string
		want       int
	}{
		{"*/5 * * * *", "", false, "2026-01-01T00:00:00Z", "2076-01-01T00:00:00Z", 18262 * 288},
		{"*/5 * * * *", Hour, true, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", 288},
		{"0 0 29 2 *", Day, false, "2001-01-01T00:00:00Z", "2099-12-31T00:00:00Z", 24}, // 2004 … 2096
		{"0 0 29 2 *", Year, true, "1600-01-01T00:00:00Z", "2400-01-01T00:00:00Z", 194},
		{"0 12 * * 1-5", Month, true, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", 22},
		{"0 12 * * 1-5", Day, false, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", 21}, // not January 1st: it is the start
		{"@monthly", Year, true, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", 12},
		{"@weekly", Month, true, "0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z", sundays(d("0001-01-01T00:00:00Z"), d("9999-01-01T00:00:00Z"))},
	}
	for _, c := range cases {
		s := MustSchedule(c.cron, c.unit, c.partials)
		if got := s.Advances(d(c.start), d(c.end)); got != c.want {
			t.Errorf("%s %s %v: Advances(%s, %s) = %d, want %d", c.cron, c.unit, c.partials, c.start, c.end, got, c.want)
		}
	}
}

// sundays counts the Sundays at midnight in (a, b], a and b midnights.
func sundays(a, b time.Time) int {
	n := int((b.Unix() - a.Unix()) / daySeconds)
	k := (7 - int(a.Weekday())) % 7
	if k == 0 {
		k = 7
	}
	if n < k {
		return 0
	}
	return (n-k)/7 + 1
}

// Count is the number of unit intervals the old loop counted.
func TestUnitCountMatchesLoop(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := rapid.SampledFrom(Units).Draw(t, "unit")
		a := time.Date(rapid.IntRange(1960, 2090).Draw(t, "year"), 1, 1, 0, 0, 0, 0, time.UTC).
			Add(time.Duration(rapid.Int64Range(0, 366*daySeconds).Draw(t, "sec")) * time.Second)
		if rapid.Bool().Draw(t, "aligned") {
			a = u.Floor(a)
		}
		b := a.Add(time.Duration(rapid.Int64Range(-daySeconds, 20*daySeconds).Draw(t, "len"))*time.Second +
			time.Duration(rapid.IntRange(0, 1).Draw(t, "ns")))
		if u == Month || u == Year {
			b = b.AddDate(rapid.IntRange(0, 30).Draw(t, "years"), 0, 0)
		}
		r := Range{Start: a, End: b}
		want := 0
		if !r.Empty() {
			for x := u.Floor(r.Start); x.Before(r.End); x = u.Add(x, 1) {
				want++
			}
		}
		if got := u.Count(r); got != want {
			t.Fatalf("%s.Count(%s) = %d, the loop counts %d", u, r, got, want)
		}
	})
}
