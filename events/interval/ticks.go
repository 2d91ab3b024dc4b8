package interval

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// A cron's ticks in closed form, so that counting them over any span costs
// O(months) at most, never O(ticks).
//
// robfig/cron fires at a time when its month, its day and its hour, minute
// and second all match; a day matches on day-of-month and day-of-week, both
// of them when either field is '*', else either one. In UTC every day has
// 86,400 seconds, so a cron's ticks are {the days that match} × {the
// seconds of the day that match}: the same seconds on every matching day.
// Whether a day matches depends only on its month, its day of the month
// and its weekday, which repeat every 400 Gregorian years (146,097 days, a
// whole number of weeks); so does which months and years hold a matching
// day.

const (
	daySeconds   = 24 * 60 * 60
	cycleDays    = 146_097 // 400 Gregorian years
	cycleMonths  = 400 * 12
	cycleYears   = 400
	unixToCivil  = 719_468 // days from 0000-03-01 to 1970-01-01
	starBit      = 1 << 63 // robfig/cron's mark of a '*' field
	prevMaxYears = 16
)

type cronTicks struct {
	spec *cron.SpecSchedule
	// times are the seconds of the day the cron fires at, ascending.
	times []int64
	// days[m-1][n-28][w] is how many days match in month m when it has n
	// days and its 1st is weekday w.
	days [12][4][7]int16
	// Per 400-year cycle: matching days, months and years holding one.
	cycleDays, cycleMonths, cycleYears int64
}

var tickCache sync.Map // normalised cron -> *cronTicks

// ticksOf returns the closed form of a parsed cron (cached per cron).
func ticksOf(norm string, spec cron.Schedule) (*cronTicks, error) {
	if t, ok := tickCache.Load(norm); ok {
		return t.(*cronTicks), nil
	}
	ss, ok := spec.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("not a five-field cron")
	}
	t := &cronTicks{spec: ss}
	for h := int64(0); h < 24; h++ {
		for m := int64(0); m < 60; m++ {
			for s := int64(0); s < 60; s++ {
				if ss.Hour&(1<<h) != 0 && ss.Minute&(1<<m) != 0 && ss.Second&(1<<s) != 0 {
					t.times = append(t.times, h*3600+m*60+s)
				}
			}
		}
	}
	for m := 1; m <= 12; m++ {
		for n := 28; n <= 31; n++ {
			for w := 0; w < 7; w++ {
				c := int16(0)
				for d := 1; d <= n; d++ {
					if t.dayMatches(m, d, (w+d-1)%7) {
						c++
					}
				}
				t.days[m-1][n-28][w] = c
			}
		}
	}
	if len(t.times) > 0 {
		for y := int64(2000); y < 2000+cycleYears; y++ {
			held := false
			for m := 1; m <= 12; m++ {
				if c := t.monthDays(y, m); c > 0 {
					t.cycleDays += c
					t.cycleMonths++
					held = true
				}
			}
			if held {
				t.cycleYears++
			}
		}
	}
	actual, _ := tickCache.LoadOrStore(norm, t)
	return actual.(*cronTicks), nil
}

// dayMatches is robfig/cron's day rule for month m, day d, weekday w.
func (t *cronTicks) dayMatches(m, d, w int) bool {
	s := t.spec
	if s.Month&(1<<uint(m)) == 0 {
		return false
	}
	dom, dow := s.Dom&(1<<uint(d)) != 0, s.Dow&(1<<uint(w)) != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// fires reports whether the cron fires on day z (days since 1970-01-01).
func (t *cronTicks) fires(z int64) bool {
	if len(t.times) == 0 {
		return false
	}
	_, m, d := civil(z)
	return t.dayMatches(m, d, weekday(z))
}

// monthDays is how many days of month m of year y match.
func (t *cronTicks) monthDays(y int64, m int) int64 {
	if len(t.times) == 0 {
		return 0
	}
	return int64(t.days[m-1][monthLen(y, m)-28][weekday(days(y, m, 1))])
}

// matchingDays counts the matching days in [z0, z1): whole 400-year
// cycles at once, then month by month (whole months from the table).
func (t *cronTicks) matchingDays(z0, z1 int64) int64 {
	if z1 <= z0 {
		return 0
	}
	k := (z1 - z0) / cycleDays
	n := k * t.cycleDays
	z0 += k * cycleDays
	y, m, d := civil(z0)
	for z0 < z1 {
		next := z0 - int64(d-1) + int64(monthLen(y, m)) // the 1st of the next month
		if d == 1 && next <= z1 {
			n += t.monthDays(y, m)
		} else {
			for z := z0; z < min(next, z1); z++ {
				if t.fires(z) {
					n++
				}
			}
		}
		z0, d = next, 1
		if m++; m > 12 {
			y, m = y+1, 1
		}
	}
	return n
}

// onDays counts the pairs (matching day z, offset o in offs) with
// a < z*86400 + o <= b: the ticks in (a, b] when offs are the cron's
// times, the unit intervals that hold a tick when they are those times
// floored to a unit that divides a day.
func (t *cronTicks) onDays(offs []int64, a, b int64) int64 {
	if b <= a {
		return 0
	}
	// in is how many offsets o have lo < o <= hi.
	in := func(lo, hi int64) int64 {
		i := sort.Search(len(offs), func(i int) bool { return offs[i] > lo })
		j := sort.Search(len(offs), func(j int) bool { return offs[j] > hi })
		return int64(max(j-i, 0))
	}
	za, zb := floorDiv(a, daySeconds), floorDiv(b, daySeconds)
	if za == zb {
		if t.fires(za) {
			return in(a-za*daySeconds, b-zb*daySeconds)
		}
		return 0
	}
	n := t.matchingDays(za+1, zb) * int64(len(offs))
	if t.fires(za) {
		n += in(a-za*daySeconds, daySeconds)
	}
	if t.fires(zb) {
		n += in(-1, b-zb*daySeconds)
	}
	return n
}

// monthsIn counts the months with index k0 <= k < k1 (k = 12*year +
// month - 1) that hold a matching day.
func (t *cronTicks) monthsIn(k0, k1 int64) int64 {
	if k1 <= k0 {
		return 0
	}
	c := (k1 - k0) / cycleMonths
	n := c * t.cycleMonths
	for k := k0 + c*cycleMonths; k < k1; k++ {
		if t.monthDays(floorDiv(k, 12), int(k-12*floorDiv(k, 12))+1) > 0 {
			n++
		}
	}
	return n
}

// yearsIn counts the years y0 <= y < y1 that hold a matching day.
func (t *cronTicks) yearsIn(y0, y1 int64) int64 {
	if y1 <= y0 {
		return 0
	}
	c := (y1 - y0) / cycleYears
	n := c * t.cycleYears
	for y := y0 + c*cycleYears; y < y1; y++ {
		for m := 1; m <= 12; m++ {
			if t.monthDays(y, m) > 0 {
				n++
				break
			}
		}
	}
	return n
}

// prev is the newest tick <= sec (Unix seconds), looking back no further
// than floor, and whether there is one. Months without a matching day are
// skipped whole, so it costs O(days in the months it looks at).
func (t *cronTicks) prev(sec, floor int64) (int64, bool) {
	if len(t.times) == 0 {
		return 0, false
	}
	z := floorDiv(sec, daySeconds)
	if t.fires(z) {
		tod := sec - z*daySeconds
		if i := sort.Search(len(t.times), func(i int) bool { return t.times[i] > tod }); i > 0 {
			return z*daySeconds + t.times[i-1], z*daySeconds+t.times[i-1] >= floor
		}
	}
	last := t.times[len(t.times)-1]
	for z--; (z+1)*daySeconds > floor; {
		y, m, d := civil(z)
		if t.monthDays(y, m) == 0 {
			z -= int64(d) // the last day of the month before
			continue
		}
		if t.dayMatches(m, d, weekday(z)) {
			return z*daySeconds + last, z*daySeconds+last >= floor
		}
		z--
	}
	return 0, false
}

// Calendar arithmetic on days since 1970-01-01 in the proleptic Gregorian
// calendar (Howard Hinnant's algorithms), as package time counts them.

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// days is the day number of y-m-d.
func days(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*cycleDays + doe - unixToCivil
}

// civil is the date of day z.
func civil(z int64) (y int64, m, d int) {
	z += unixToCivil
	era := floorDiv(z, cycleDays)
	doe := z - era*cycleDays
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekday of day z, Sunday = 0 (1970-01-01 was a Thursday).
func weekday(z int64) int { return int(z - 7*floorDiv(z+4, 7) + 4) }

func monthLen(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// monthIndex is 12*year + month - 1 of the month holding day z.
func monthIndex(z int64) int64 {
	y, m, _ := civil(z)
	return 12*y + int64(m) - 1
}

func unixTime(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
