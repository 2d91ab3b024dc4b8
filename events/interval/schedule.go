package interval

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalidSchedule is wrapped by every error NewSchedule returns.
var ErrInvalidSchedule = errors.New("interval: invalid schedule")

// descriptors maps the cron descriptors robfig/cron accepts to their
// five-field form, so that schedules compare equal however they are written.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// MinCronGap is the shortest distance allowed between two cron ticks.
const MinCronGap = 5 * time.Minute

// NormalizeCron expands descriptors and collapses whitespace. It does not
// validate the expression.
func NormalizeCron(expr string) string {
	e := strings.Join(strings.Fields(expr), " ")
	if full, ok := descriptors[strings.ToLower(e)]; ok {
		return full
	}
	return e
}

// Schedule is a model's cron together with its interval unit: what decides
// when intervals become ready (the cron) and how many (the unit).
type Schedule struct {
	cron          string
	unit          Unit
	allowPartials bool
	spec          cron.Schedule
}

// NewSchedule parses a 5-field cron (or an @hourly/@daily/… descriptor) in
// UTC. With unit empty the unit is derived from the cron: the largest unit not
// longer than the shortest distance between two consecutive ticks. An
// explicit unit may be finer than the cron but not coarser unless
// allowPartials is set. Crons that fire more often than every 5 minutes are
// invalid.
func NewSchedule(expr string, unit Unit, allowPartials bool) (Schedule, error) {
	norm := NormalizeCron(expr)
	if norm == "" {
		return Schedule{}, fmt.Errorf("%w: cron is empty", ErrInvalidSchedule)
	}
	if strings.HasPrefix(norm, "@") {
		return Schedule{}, fmt.Errorf("%w: cron %q: only @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly descriptors are supported", ErrInvalidSchedule, expr)
	}
	if strings.HasPrefix(strings.ToUpper(norm), "CRON_TZ=") || strings.HasPrefix(strings.ToUpper(norm), "TZ=") {
		return Schedule{}, fmt.Errorf("%w: cron %q: time zones are not supported, crons run in UTC", ErrInvalidSchedule, expr)
	}
	spec, err := cron.ParseStandard(norm)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: cron %q: %v", ErrInvalidSchedule, expr, err)
	}
	if ss, ok := spec.(*cron.SpecSchedule); ok {
		ss.Location = time.UTC
	}
	s := Schedule{cron: norm, allowPartials: allowPartials, spec: spec}
	gap, err := cachedMinGap(s)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: cron %q: %v", ErrInvalidSchedule, expr, err)
	}
	if gap < MinCronGap {
		return Schedule{}, fmt.Errorf("%w: cron %q fires every %s at its fastest: must run at a frequency of 5 minutes or slower", ErrInvalidSchedule, expr, gap)
	}
	derived := FiveMinute
	for _, u := range Units {
		if u.Nominal() <= gap {
			derived = u
			break
		}
	}
	switch {
	case unit == "":
		s.unit = derived
	case !unit.Valid():
		_, err := ParseUnit(string(unit))
		return Schedule{}, fmt.Errorf("%w: %v", ErrInvalidSchedule, err)
	case unit.Nominal() > derived.Nominal() && !allowPartials:
		return Schedule{}, fmt.Errorf("%w: cron %q cannot be more frequent than interval unit %q; set allow_partials to allow it", ErrInvalidSchedule, expr, unit)
	default:
		s.unit = unit
	}
	return s, nil
}

// MustSchedule is NewSchedule that panics; for tests and built-in scenarios.
func MustSchedule(expr string, unit Unit, allowPartials bool) Schedule {
	s, err := NewSchedule(expr, unit, allowPartials)
	if err != nil {
		panic(err)
	}
	return s
}

// Cron is the normalised five-field cron expression.
func (s Schedule) Cron() string { return s.cron }

// Unit is the schedule's interval unit.
func (s Schedule) Unit() Unit { return s.unit }

// AllowPartials reports whether a partial last interval may become ready.
func (s Schedule) AllowPartials() bool { return s.allowPartials }

// Same reports whether two schedules have the same cron (descriptors
// expanded), unit and partials setting.
func (s Schedule) Same(o Schedule) bool {
	return s.cron == o.cron && s.unit == o.unit && s.allowPartials == o.allowPartials
}

// IsZero reports whether s is the zero Schedule.
func (s Schedule) IsZero() bool { return s.spec == nil }

// sampleStart is a fixed reference (a leap year) for measuring cron gaps, so
// unit derivation never depends on the wall clock.
var sampleStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// gaps caches minGap per normalised cron: measuring walks up to 2000
// ticks, and schedules are parsed on every fold and policy check.
var gaps sync.Map // string -> gapResult

type gapResult struct {
	gap time.Duration
	err error
}

func cachedMinGap(s Schedule) (time.Duration, error) {
	if g, ok := gaps.Load(s.cron); ok {
		r := g.(gapResult)
		return r.gap, r.err
	}
	gap, err := s.minGap()
	gaps.Store(s.cron, gapResult{gap, err})
	return gap, err
}

func (s Schedule) minGap() (time.Duration, error) {
	const maxTicks = 2000
	limit := sampleStart.AddDate(9, 0, 0)
	prev := s.spec.Next(sampleStart.Add(-time.Second))
	if prev.IsZero() {
		return 0, errors.New("it never fires")
	}
	gap := time.Duration(0)
	for i := 0; i < maxTicks; i++ {
		n := s.spec.Next(prev)
		if n.IsZero() || n.After(limit) {
			break
		}
		if d := n.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = n
	}
	if gap == 0 {
		return 0, errors.New("it fires less than twice in 9 years")
	}
	return gap, nil
}

// Next returns the first cron tick strictly after t.
func (s Schedule) Next(t time.Time) time.Time {
	return s.spec.Next(t.UTC()).UTC()
}

// Prev returns the newest cron tick <= t (the zero time if there is none in
// the preceding 16 years).
func (s Schedule) Prev(t time.Time) time.Time {
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

// floorTick maps a cron tick to the readiness frontier it produces.
func (s Schedule) floorTick(tick time.Time) time.Time {
	if s.allowPartials {
		return tick
	}
	return s.unit.Floor(tick)
}

// ReadyFrontier is RF(t): the newest cron tick <= t, floored to the unit (not
// floored with allow_partials). Every interval that ends at or before it is
// ready at t.
func (s Schedule) ReadyFrontier(t time.Time) time.Time {
	p := s.Prev(t)
	if p.IsZero() {
		return p
	}
	return s.floorTick(p)
}

// IsBoundary reports whether x is a cron-tick boundary: a value
// ReadyFrontier can take.
func (s Schedule) IsBoundary(x time.Time) bool {
	x = x.UTC()
	if s.allowPartials {
		return s.Next(x.Add(-time.Second)).Equal(x)
	}
	if !s.unit.Aligned(x) {
		return false
	}
	// A tick T has floor(T) == x exactly when x <= T < x + unit.
	first := s.Next(x.Add(-time.Second))
	return !first.IsZero() && first.Before(s.unit.Add(x, 1))
}

// MaxAdvanceTicks bounds the ticks Advances walks.
const MaxAdvanceTicks = 10_000_000

// Advances counts the scheduler advances that produced the suffix [start,
// end): the number of distinct ReadyFrontier values RF(T) over ticks T with
// start < RF(T) <= end. Lookback never counts; a partial interval is one
// advance like any other.
func (s Schedule) Advances(start, end time.Time) int {
	start, end = start.UTC(), end.UTC()
	if !start.Before(end) {
		return 0
	}
	count := 0
	var last time.Time
	t := s.Next(start)
	for i := 0; i < MaxAdvanceTicks && !t.IsZero(); i++ {
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

// Ready returns the window [start, ReadyFrontier(t)), empty when nothing is
// ready yet. start is floored to the unit.
func (s Schedule) Ready(start, t time.Time) Range {
	rf := s.ReadyFrontier(t)
	st := s.unit.Floor(start)
	if rf.IsZero() || !st.Before(rf) {
		return Range{Start: st, End: st}
	}
	return Range{Start: st, End: rf}
}

// Work widens ranges to what a run computes: whole intervals of the unit.
// A range starting inside an interval (the rest of a partial interval)
// starts at that interval's start; ends are rounded up unless partial
// intervals are allowed.
// O(m log m) for m ranges (widening keeps a Set sorted: then O(m)).
func (s Schedule) Work(rs Set) Set {
	wide := make([]Range, len(rs))
	for i, r := range rs {
		end := r.End
		if !s.allowPartials {
			end = s.unit.Ceil(end)
		}
		wide[i] = R(s.unit.Floor(r.Start), end)
	}
	return normalize(wide)
}
