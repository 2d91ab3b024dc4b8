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
	ticks         *cronTicks // the same ticks in closed form
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
	ticks, err := ticksOf(norm, spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: cron %q: %v", ErrInvalidSchedule, expr, err)
	}
	s := Schedule{cron: norm, allowPartials: allowPartials, spec: spec, ticks: ticks}
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
// the preceding 16 years). It looks at the days before t (skipping whole
// months without a matching day), never at the ticks between.
func (s Schedule) Prev(t time.Time) time.Time {
	t = t.UTC()
	p, ok := s.ticks.prev(t.Unix(), t.AddDate(-prevMaxYears, 0, 0).Unix())
	if !ok {
		return time.Time{}
	}
	return unixTime(p)
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

// Advances counts the scheduler advances that produced the suffix [start,
// end): the number of distinct ReadyFrontier values RF(T) over ticks T with
// start < RF(T) <= end. Lookback never counts; a partial interval is one
// advance like any other.
//
// It counts in closed form, never tick by tick. With allow_partials RF(T)
// is T, and distinct ticks are counted. Otherwise RF(T) is T floored to the
// unit, so it counts the unit intervals [x, x+unit) with start < x <= end
// that hold a tick: for a unit that divides a day (five_minute to day),
// the day's tick times floored to the unit, on every matching day; for
// month and year, the months or years holding a matching day. Whole days,
// months and 400-year cycles are counted at once, so the cost is O(months)
// at worst (O(1) beyond 400 years), whatever the cron's frequency.
func (s Schedule) Advances(start, end time.Time) int {
	start, end = start.UTC(), end.UTC()
	if !start.Before(end) {
		return 0
	}
	a, b := start.Unix(), end.Unix() // ticks and unit boundaries are whole seconds
	t := s.ticks
	switch {
	case s.allowPartials:
		return int(t.onDays(t.times, a, b))
	case s.unit == Month:
		// The months whose start x has a < x <= b.
		return int(t.monthsIn(monthIndex(floorDiv(a, daySeconds))+1, monthIndex(floorDiv(b, daySeconds))+1))
	case s.unit == Year:
		ya, _, _ := civil(floorDiv(a, daySeconds))
		yb, _, _ := civil(floorDiv(b, daySeconds))
		return int(t.yearsIn(ya+1, yb+1))
	}
	u := int64(s.unit.Nominal() / time.Second) // divides a day
	var offs []int64
	for _, tod := range t.times {
		if x := tod - tod%u; len(offs) == 0 || offs[len(offs)-1] != x {
			offs = append(offs, x)
		}
	}
	return int(t.onDays(offs, a, b))
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
