package projections

import (
	"github.com/tidemark/tidemark/events/interval"
)

// WorkOf is the work that computes set for snapshot sn, the one rule every
// work range is made by (scheduler ticks, plan backfill, repair, catch-up,
// restatement; docs/kinds.md): whole intervals of sn's unit
// (interval.Schedule.Work). For a whole kind (events.Kind.Whole: full,
// view, seed), which is computed whole, never interval by interval, it is
// one range from sn's start (floored to its unit) to the end of that work,
// or to the frontier of sn's table when later: the object is recomputed as
// of the newest tick its work reaches, never as of an earlier tick than it
// already is. An empty set needs no work (nil). Pure.
func (s *State) WorkOf(sn *Snapshot, set interval.Set) interval.Set {
	w := sn.Schedule.Work(set)
	if w.Empty() || !sn.Kind.Whole() {
		return w
	}
	end := w.Frontier()
	if f := s.Table(sn.Table).Frontier(); f.After(end) {
		end = f
	}
	return interval.NewSet(interval.R(sn.Schedule.Unit().Floor(sn.Start), end))
}
