// Package interval is the time domain every other tidemark package speaks:
// interval units, aligned half-open intervals, range sets, cron readiness and
// scheduler-advance counting. It is pure: nothing here reads the wall clock.
//
// All times are UTC. An interval is half-open, [Start, End), and aligned to a
// Unit. Coverage is a Set of disjoint, non-touching ranges, never a list of
// single intervals, so its cost follows the number of ranges.
//
// Importers: every package that handles time ranges; it imports no other
// package of the module (and no msgpack: its codec is in internal/msgp).
package interval

import (
	"fmt"
	"time"
)

// Unit is the granularity of a snapshot's intervals.
type Unit string

// The interval units, finest first.
const (
	FiveMinute  Unit = "five_minute"
	QuarterHour Unit = "quarter_hour"
	HalfHour    Unit = "half_hour"
	Hour        Unit = "hour"
	Day         Unit = "day"
	Month       Unit = "month"
	Year        Unit = "year"
)

// Units lists every unit, coarsest first (the order unit derivation tries them).
var Units = []Unit{Year, Month, Day, Hour, HalfHour, QuarterHour, FiveMinute}

// ParseUnit returns the unit named s, or an error naming the valid units.
func ParseUnit(s string) (Unit, error) {
	u := Unit(s)
	if u.Valid() {
		return u, nil
	}
	return "", fmt.Errorf("unknown interval unit %q (want one of five_minute, quarter_hour, half_hour, hour, day, month, year)", s)
}

// Valid reports whether u is one of the defined units.
func (u Unit) Valid() bool {
	switch u {
	case FiveMinute, QuarterHour, HalfHour, Hour, Day, Month, Year:
		return true
	}
	return false
}

// Nominal is the unit's length used to compare units with each other and
// with cron frequencies: a month counts as 28 days and a year as 365, the
// shortest each can be, as SQLMesh does.
func (u Unit) Nominal() time.Duration {
	switch u {
	case FiveMinute:
		return 5 * time.Minute
	case QuarterHour:
		return 15 * time.Minute
	case HalfHour:
		return 30 * time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	case Month:
		return 28 * 24 * time.Hour
	case Year:
		return 365 * 24 * time.Hour
	}
	return 0
}

// Floor returns the start of the unit interval that contains t.
func (u Unit) Floor(t time.Time) time.Time {
	t = t.UTC()
	switch u {
	case Day:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case Year:
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	}
	d := u.Nominal()
	if d == 0 {
		return t
	}
	return time.Unix(t.Unix()-mod(t.Unix(), int64(d/time.Second)), 0).UTC()
}

// Add returns t moved by n units (n may be negative). t should be aligned.
func (u Unit) Add(t time.Time, n int) time.Time {
	t = t.UTC()
	switch u {
	case Month:
		return t.AddDate(0, n, 0)
	case Year:
		return t.AddDate(n, 0, 0)
	case Day:
		return t.AddDate(0, 0, n)
	}
	return t.Add(time.Duration(n) * u.Nominal())
}

// Aligned reports whether t is on a unit boundary.
func (u Unit) Aligned(t time.Time) bool {
	return u.Floor(t).Equal(t)
}

// Ceil returns the smallest unit boundary >= t.
func (u Unit) Ceil(t time.Time) time.Time {
	f := u.Floor(t)
	if f.Equal(t) {
		return f
	}
	return u.Add(f, 1)
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Count is how many intervals of the unit r touches: from the floor of its
// start to the ceiling of its end, in closed form.
func (u Unit) Count(r Range) int {
	if r.Empty() || !u.Valid() {
		return 0
	}
	a, b := u.Floor(r.Start), u.Ceil(r.End)
	switch u {
	case Month:
		return 12*(b.Year()-a.Year()) + int(b.Month()) - int(a.Month())
	case Year:
		return b.Year() - a.Year()
	}
	return int((b.Unix() - a.Unix()) / int64(u.Nominal()/time.Second))
}
