package models

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events/interval"
)

// MaxFreshnessIntervals bounds a freshness given in intervals (as
// MaxLookback bounds a lookback: unit arithmetic over more overflows).
const MaxFreshnessIntervals = MaxLookback

// MaxFreshness bounds a freshness given as a duration (ten years).
const MaxFreshness = 10 * 366 * 24 * time.Hour

// Freshness is how far a model's frontier may trail its readiness
// frontier before the model is late: a whole number of intervals of its
// unit, or a duration. The zero Freshness is the default, one interval.
type Freshness struct {
	// Intervals is the bound in intervals of the unit (0: not set).
	Intervals int
	// Duration is the bound as a duration (0: not set).
	Duration time.Duration
}

// ParseFreshness reads a definition's freshness: "" (the default, one
// interval of the unit), a whole number of intervals ("3", at least 1,
// at most MaxFreshnessIntervals) or a Go duration ("90m", "2h", more than
// zero, at most MaxFreshness).
func ParseFreshness(s string) (Freshness, error) {
	if s == "" {
		return Freshness{}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > MaxFreshnessIntervals {
			return Freshness{}, fmt.Errorf("%q: want 1 .. %d intervals, or a duration such as 90m or 2h", s, MaxFreshnessIntervals)
		}
		return Freshness{Intervals: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || strings.TrimSpace(s) != s {
		return Freshness{}, fmt.Errorf("%q: want a whole number of intervals (3) or a duration (90m, 2h)", s)
	}
	if d <= 0 || d > MaxFreshness {
		return Freshness{}, fmt.Errorf("%q: want a duration above 0 and at most %s", s, MaxFreshness)
	}
	return Freshness{Duration: d}, nil
}

// Oldest is the oldest frontier that is not late when the readiness
// frontier is ready, for a model of unit u: ready less the bound (one
// interval when f is the zero Freshness). A frontier before it is late.
func (f Freshness) Oldest(u interval.Unit, ready time.Time) time.Time {
	switch {
	case f.Duration > 0:
		return ready.Add(-f.Duration)
	case f.Intervals > 0:
		return u.Add(u.Floor(ready), -f.Intervals)
	}
	return u.Add(u.Floor(ready), -1)
}

// String is the bound as status shows it: "1 interval", "3 intervals",
// "2h0m0s".
func (f Freshness) String() string {
	switch {
	case f.Duration > 0:
		return f.Duration.String()
	case f.Intervals > 1:
		return fmt.Sprintf("%d intervals", f.Intervals)
	}
	return "1 interval"
}
