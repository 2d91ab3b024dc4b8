package events

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/events/interval"
)

// The time range. Every time a command or an event carries is either
// unset (the zero time) or within [MinTime, MaxTime]; range ends and an
// event's `at` always are. Times outside it are refused where
// they come in (commands: invalid, naming the field) and where they are
// read (events: a *DecodeError of kind OutOfRange, naming the field), so
// no reader meets a time it cannot print (RFC 3339 and JSON stop at year
// 9999) or count to (cron ticks walked to year 10001).
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InRange reports whether t lies within [MinTime, MaxTime].
func InRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// TimeRangeError names a time outside [MinTime, MaxTime].
type TimeRangeError struct {
	Field string
	Time  time.Time
}

func (e *TimeRangeError) Error() string {
	return fmt.Sprintf("%s: %s is outside the supported range %s .. %s", e.Field, e.Time.UTC().Format(time.RFC3339),
		MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
}

// timeCheck collects the first out-of-range time of a value.
type timeCheck struct{ err *TimeRangeError }

// opt checks a time that may be unset.
func (c *timeCheck) opt(field string, t time.Time) {
	if c.err == nil && !t.IsZero() && !InRange(t) {
		c.err = &TimeRangeError{Field: field, Time: t}
	}
}

// req checks a time that must be set.
func (c *timeCheck) req(field string, t time.Time) {
	if c.err == nil && !InRange(t) {
		c.err = &TimeRangeError{Field: field, Time: t}
	}
}

func (c *timeCheck) ranges(field string, rs []interval.Range) {
	for i := 0; c.err == nil && i < len(rs); i++ {
		c.req(field+"["+strconv.Itoa(i)+"].start", rs[i].Start)
		c.req(field+"["+strconv.Itoa(i)+"].end", rs[i].End)
	}
}

func (c *timeCheck) findings(field string, fs []Finding) {
	for i := 0; c.err == nil && i < len(fs); i++ {
		c.ranges(field+"["+strconv.Itoa(i)+"].ranges", fs[i].Ranges)
	}
}

// CheckTimes returns a *TimeRangeError naming the first time of ev (its
// envelope's `at`, then its payload's, as "data.<key>…") outside
// [MinTime, MaxTime], or nil.
func CheckTimes(ev Event) error {
	var c timeCheck
	c.req("at", ev.OccurredAt)
	switch p := ev.Payload.(type) {
	case SnapshotRegistered:
		c.opt("data.start", p.Start)
	case PlanBuilt:
		c.opt("data.built_at", p.BuiltAt)
		c.opt("data.start", p.Start)
		c.opt("data.end", p.End)
		for i, cd := range p.Candidates {
			f := "data.candidates[" + strconv.Itoa(i) + "]"
			c.opt(f+".incumbent_frontier", cd.IncumbentFrontier)
			c.ranges(f+".backfill", cd.Backfill)
		}
	case IntervalsCompleted:
		c.ranges("data.ranges", p.Ranges)
	case IntervalsInvalidated:
		c.ranges("data.ranges", p.Ranges)
	case SchedulerAdvanced:
		c.opt("data.tick", p.Tick)
		c.opt("data.frontier", p.Frontier)
		c.ranges("data.ranges", p.Ranges)
		c.ranges("data.repairs", p.Repairs)
	case PromotionDecided:
		c.opt("data.evaluated_at", p.EvaluatedAt)
		for _, m := range sortedKeys(p.Models) {
			c.ranges("data.models."+m+".missing", p.Models[m].Missing)
		}
		c.findings("data.findings", p.Findings)
		for i, r := range p.Repairs {
			c.ranges("data.repairs["+strconv.Itoa(i)+"].ranges", r.Ranges)
		}
	case CatchUpRequested:
		c.opt("data.evaluated_at", p.EvaluatedAt)
		for i, w := range p.Work {
			f := "data.work[" + strconv.Itoa(i) + "]"
			c.ranges(f+".ranges", w.Ranges)
			c.ranges(f+".recompute", w.Recompute)
			c.opt(f+".incumbent_frontier", w.IncumbentFrontier)
		}
		c.findings("data.findings", p.Findings)
	case RepairCompleted:
		c.ranges("data.ranges", p.Ranges)
		c.opt("data.opened_at", p.OpenedAt)
		c.opt("data.closed_at", p.ClosedAt)
	case RunFailed:
		c.ranges("data.ranges", p.Ranges)
	case AuditRecorded:
		c.ranges("data.ranges", p.Ranges)
	case TableRetired:
		c.opt("data.judged_at", p.JudgedAt)
		c.opt("data.released_at", p.ReleasedAt)
		c.ranges("data.coverage", p.Coverage)
	case EnvironmentRolledBack:
		c.opt("data.evaluated_at", p.EvaluatedAt)
	case RestatementRequested:
		c.ranges("data.ranges", p.Ranges)
		for i, w := range p.Work {
			f := "data.work[" + strconv.Itoa(i) + "]"
			c.ranges(f+".ranges", w.Ranges)
			c.ranges(f+".invalidated", w.Invalidated)
		}
	case EnvironmentFinalized, PlanCancelled:
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
