package invariants

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/decide"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Invariant R, restatement (docs/restatement.md), checked against an
// oracle written from the rules, interval by interval: a restatement of a
// model's ranges in an env affects every whole interval of the model's
// unit overlapping them, and, transitively, every whole interval of each
// downstream incumbent's own unit overlapping an affected interval of one
// of its parents (all clipped to each start); it is refused (invalid on
// ranges) exactly when the model's table covers none of its affected
// intervals; otherwise, per affected model, exactly the covered part is
// invalidated (and no longer covered), the work computes at least what
// of it has ended and nothing outside the affected intervals, no model outside the
// cascade has work, nothing that has not ended is computed, and a
// model's work comes after its parents'.

// actRestate restates a drawn range of a drawn incumbent.
func (s *sim) actRestate() {
	env := s.drawEnv("restate-env", false)
	inc := s.st.Env(env).Incumbents
	ms := slices.Sorted(maps.Keys(inc))
	if len(ms) == 0 {
		return
	}
	m := ms[pick(s.t, "restate-model", len(ms))]
	sn := s.st.Snapshots[inc[m]]
	u := sn.Schedule.Unit()
	back := 1 + pick(s.t, "restate-back", 48)
	length := 1 + pick(s.t, "restate-length", 4)
	start := u.Add(u.Floor(s.clock), -back)
	r := interval.R(start, u.Add(start, length))
	if chance(s.t, "restate-unaligned", 30) && u.Nominal() > time.Minute {
		r = interval.R(r.Start.Add(time.Minute), r.End.Add(-time.Minute)) // widened back by the engine
	}
	_ = s.restate(env, m, r)
}

// restate sends restate and checks invariant R.
func (s *sim) restate(env, model string, r interval.Range) error {
	s.tb.Helper()
	inc := maps.Clone(s.st.Env(env).Incumbents)
	cov := map[string]interval.Set{}
	for _, id := range inc {
		if sn := s.st.Snapshots[id]; sn != nil {
			cov[sn.Table] = s.st.Table(sn.Table)
		}
	}
	clock := s.clock
	_, group, err := s.exec(&commands.Restate{Env: env, Model: model, Ranges: []interval.Range{r}})
	s.logf("restate %s %s %v -> %s", env, model, r, errOr(err, "ok"))
	affected := restateOracle(s.st, inc, model, r)
	root := s.st.Snapshots[inc[model]]
	rootCovered := intersect(affected[model], cov[root.Table])
	var ce *commands.Error
	switch {
	case errors.As(err, &ce) && ce.Code == commands.CodeInvalid && ce.Field == "ranges":
		if !rootCovered.Empty() {
			s.fail("R", "restate %s %v refused (%s) although its table covered %v of it", model, r, ce.Message, rootCovered)
		}
		return err
	case err != nil:
		s.fail("R", "restate %s %v refused: %v", model, r, err)
	}
	if rootCovered.Empty() {
		s.fail("R", "restate %s %v carried out although its table covered none of %v", model, r, affected[model])
	}
	stats["restate: carried out"]++
	if len(affected) > 1 {
		stats["restate: cascaded"]++
	}
	// What was recorded (the reply is the decision's; the record is what
	// the log holds).
	var req *events.RestatementRequested
	for _, g := range group {
		if p, ok := g.Event.Payload.(events.RestatementRequested); ok {
			req = &p
		}
	}
	if req == nil {
		s.fail("R", "restate %s: no RestatementRequested recorded", model)
		return nil
	}
	seen := map[string]bool{}
	for _, w := range req.Work {
		sn := s.st.Snapshots[w.Snapshot]
		a, ok := affected[w.Model]
		if !ok || sn == nil || inc[w.Model] != w.Snapshot {
			s.fail("R", "restate %s: work for %s, which is not in its cascade %v", model, w.Snapshot, slices.Sorted(maps.Keys(affected)))
			return nil
		}
		for _, d := range sn.DependsOn {
			if _, in := affected[d]; in && !seen[d] && hasWork(req.Work, d) {
				s.fail("R", "restate %s: %s's work comes before its parent %s's", model, w.Model, d)
			}
		}
		seen[w.Model] = true
		covered := intersect(a, cov[sn.Table])
		if !interval.NewSet(w.Invalidated...).Equal(covered) {
			s.fail("R", "restate %s: %s invalidated %v, its table covered %v of the affected %v", model, w.Model, interval.Set(w.Invalidated), covered, a)
		}
		rs := interval.NewSet(w.Ranges...)
		// What has ended of the covered part (an interval of a unit
		// coarser than the table's coverage may still run: the
		// scheduler's, once ready).
		ended := covered
		if u := sn.Schedule.Unit(); !sn.AllowPartials && !ended.Empty() {
			ended = ended.Clip(interval.R(ended.Start(), u.Floor(clock)))
		}
		allowed := a
		if sn.Kind.Whole() && !rs.Empty() {
			// Computed whole (docs/kinds.md): one range from its start to
			// the later of its affected work's end and its frontier.
			start := sn.Schedule.Unit().Floor(sn.Start)
			if len(rs) != 1 || !rs[0].Start.Equal(start) {
				s.fail("R", "restate %s: whole-kind %s computes %v, not one range from its start %s", model, w.Model, rs, start.Format(time.RFC3339))
			}
			end := a.Frontier()
			if f := cov[sn.Table].Frontier(); f.After(end) {
				end = f
			}
			allowed = interval.NewSet(interval.R(start, end))
		}
		if !rs.SubtractSet(allowed).Empty() || !ended.SubtractSet(rs).Empty() {
			s.fail("R", "restate %s: %s computes %v; want all of the covered %v that has ended and nothing outside the affected %v", model, w.Model, rs, covered, a)
		}
		if u := sn.Schedule.Unit(); !sn.AllowPartials {
			for _, x := range rs {
				if x.End.After(u.Floor(clock)) {
					s.fail("R", "restate %s: %s computes %v, which has not ended at %s", model, w.Model, x, clock.Format(time.RFC3339))
				}
			}
		}
		if still := intersect(s.st.Table(sn.Table), covered); !still.Empty() {
			s.fail("R", "restate %s: %s's table still covers %v after its invalidation", model, w.Model, still)
		}
	}
	for m, a := range affected {
		if c := intersect(a, cov[s.st.Snapshots[inc[m]].Table]); !c.Empty() && !seen[m] {
			s.fail("R", "restate %s at %s: %s (affected %v) covered %v but has no work", model, clock.Format(time.RFC3339), m, a, c)
		}
	}
	return nil
}

func hasWork(ws []events.RestateWork, model string) bool {
	return slices.ContainsFunc(ws, func(w events.RestateWork) bool { return w.Model == model })
}

// restateOracle is, per model of the cascade (model and every incumbent
// reading it, transitively), the intervals a restatement of r affects:
// enumerated one interval of each model's unit at a time, to a fixpoint.
func restateOracle(st *projections.State, inc map[string]string, model string, r interval.Range) map[string]interval.Set {
	aff := map[string]interval.Set{model: unitsOver(st.Snapshots[inc[model]], interval.NewSet(r))}
	for changed := true; changed; {
		changed = false
		for _, m := range slices.Sorted(maps.Keys(inc)) {
			sn := st.Snapshots[inc[m]]
			if m == model || sn == nil {
				continue
			}
			var from interval.Set
			in := false
			for _, d := range sn.DependsOn {
				if a, ok := aff[d]; ok {
					from, in = from.AddSet(a), true
				}
			}
			if !in {
				continue
			}
			got := unitsOver(sn, from)
			if old, ok := aff[m]; !ok || !old.Equal(got) {
				aff[m], changed = got, true
			}
		}
	}
	return aff
}

// unitsOver is every interval of sn's unit overlapping a range of set
// (cut at that range's end when sn allows partials), at or after sn's
// start.
func unitsOver(sn *projections.Snapshot, set interval.Set) interval.Set {
	u := sn.Schedule.Unit()
	first := u.Floor(sn.Start)
	var out interval.Set
	for _, r := range set {
		for t, n := u.Floor(r.Start), 0; t.Before(r.End) && n < 100_000; t, n = u.Add(t, 1), n+1 {
			x := interval.R(t, u.Add(t, 1))
			if sn.AllowPartials && r.End.Before(x.End) {
				x.End = r.End
			}
			if !x.Start.Before(first) {
				out = out.Add(x)
			}
		}
	}
	return out
}

// intersect is a ∩ b.
func intersect(a, b interval.Set) interval.Set {
	return a.SubtractSet(a.SubtractSet(b))
}

// TestRestateInvariantCanFail: R breaks when a restatement leaves a
// downstream model out, or invalidates less than its table covered.
func TestRestateInvariantCanFail(t *testing.T) {
	daily := schedDef{"@daily", "", false}
	chain := []modelDef{model("events", hourly, ""), model("rollup", daily, "", "events")}
	tamper := func(fn func(r *events.RestatementRequested)) func(s *sim) {
		return func(s *sim) {
			s.clock = s.clock.Add(48 * time.Hour)
			s.tickNext("prod")
			s.mutate = func(cmd commands.Command, d *decide.Decision) {
				for i, p := range d.Events {
					if r, ok := p.(events.RestatementRequested); ok {
						fn(&r)
						d.Events[i] = r
					}
				}
			}
			_ = s.restate("prod", "events", interval.R(t0.Add(30*time.Hour), t0.Add(31*time.Hour)))
		}
	}
	t.Run("R a child left out", func(t *testing.T) {
		expectBroken(t, "R", chain, tamper(func(r *events.RestatementRequested) { r.Work = r.Work[:1] }))
	})
	t.Run("R less invalidated than covered", func(t *testing.T) {
		expectBroken(t, "R", chain, tamper(func(r *events.RestatementRequested) { r.Work[1].Invalidated = r.Work[1].Invalidated[:0] }))
	})
	t.Run("R holds untampered", func(t *testing.T) {
		if broken := scripted(t, chain, tamper(func(*events.RestatementRequested) {})); broken != "" {
			t.Fatal(broken)
		}
	})
}
