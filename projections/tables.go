package projections

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/events"
)

// The life of a snapshot table. A table is used while an environment's
// incumbent writes it, or while an open plan names it (a candidate's table,
// a candidate's incumbent, a snapshot a candidate reads). A plan is open
// while its environment's generation is the one it was built at: until
// then a promote may still accept it (a rejected plan included; it can be
// promoted again). Once any accepted promotion has moved the generation,
// every later promote of the plan is rejected conflicting_plan, so it is
// closed for good. Uses therefore end only at accepted promotions: the one
// that demotes an incumbent, and the one that closes an environment's
// open plans. Released records, per table, the last accepted promotion
// that ended a use of it; the retirement rule (decide.Retirable) measures
// its grace period from there.

// Release is the accepted promotion that last ended a use of a table.
type Release struct {
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
}

// Retirement is a retired table: its TableRetired event and sequence.
type Retirement struct {
	Seq   uint64              `json:"seq"`
	Event events.TableRetired `json:"event"`
}

// PlanOpen reports whether pl can still be accepted: its environment's
// generation is still the one it was built at.
func (s *State) PlanOpen(pl *Plan) bool {
	return s.Env(pl.Built.Env).Generation == pl.Built.Generation
}

// PlansOpen returns env's open plans, in the order they were built.
func (s *State) PlansOpen(env string) []*Plan {
	var out []*Plan
	for _, name := range s.OpenPlans[openKey(env, s.Env(env).Generation)] {
		if pl, ok := s.Plans[name]; ok {
			out = append(out, pl)
		}
	}
	return out
}

func openKey(env string, gen uint64) string { return env + " " + strconv.FormatUint(gen, 10) }

// tableOf is the table snapshot id writes ("" when unknown).
func (s *State) tableOf(id string) string {
	if sn, ok := s.Snapshots[id]; ok {
		return sn.Table
	}
	return ""
}

// planTables adds to out the tables plan pl uses.
func (s *State) planTables(pl *Plan, out map[string]bool) {
	for _, c := range pl.Built.Candidates {
		out[c.Table] = true
		for _, id := range append([]string{c.Incumbent}, c.Upstream...) {
			if t := s.tableOf(id); t != "" {
				out[t] = true
			}
		}
	}
}

// release runs before an accepted promotion or a rollback in env (stored
// at seq, at at) sets the incumbents of set (model → new incumbent) and
// moves the generation: every table the env's incumbents and open plans
// use, and what the incumbents it demotes read, is released there (a
// table still used after it is released again later), and those plans
// close. The incumbents' tables, and what the demoted ones read, are also
// recorded Demoted there: the retention runs from then.
func (s *State) release(env string, set map[string]string, seq uint64, at time.Time) {
	used := map[string]bool{}
	served := map[string]bool{}
	incumbents := s.Env(env).Incumbents
	for _, id := range incumbents {
		if t := s.tableOf(id); t != "" {
			served[t] = true
		}
	}
	// What a demoted incumbent read is released with it.
	for model, next := range set {
		id := incumbents[model]
		if sn, ok := s.Snapshots[id]; ok && id != next && len(sn.DependsOn) > 0 {
			up, _ := s.UpstreamOf(id)
			for _, u := range up {
				if t := s.tableOf(u); t != "" {
					served[t] = true
				}
			}
		}
	}
	k := openKey(env, s.Env(env).Generation)
	for _, name := range s.OpenPlans[k] {
		if pl, ok := s.Plans[name]; ok {
			s.planTables(pl, used)
		}
	}
	delete(s.OpenPlans, k)
	for t := range used {
		s.Released[t] = Release{Seq: seq, At: at}
	}
	for t := range served {
		s.Released[t] = Release{Seq: seq, At: at}
		s.Demoted[t] = Release{Seq: seq, At: at}
	}
}

// rollback applies an EnvironmentRolledBack stored at seq: the env's
// incumbents of the listed models become the restored snapshots, its
// generation moves on (fencing the demoted snapshots' scheduler; the
// plans built before close, as at a promotion), and the open repair debt
// the event lists closes.
func (s *State) rollback(seq uint64, at time.Time, p events.EnvironmentRolledBack) {
	set := make(map[string]string, len(p.Models))
	for _, m := range p.Models {
		set[m.Model] = m.Restored
	}
	s.release(p.Env, set, seq, at)
	env := s.ensureEnv(p.Env)
	env.Generation = p.Generation
	ev := p
	env.generation(Generation{Generation: p.Generation, Seq: seq, At: at, Set: set, Rollback: &ev})
	maps.Copy(env.Incumbents, set)
	for _, rb := range p.Repairs {
		for _, r := range s.Repairs {
			if r.Open() && r.Env == p.Env && r.Plan == rb.Plan && r.Model == rb.Model && r.OpenSeq == rb.OpenSeq {
				r.ClosedAt, r.ClosedSeq, r.RolledBackSeq = at, seq, seq
			}
		}
	}
}

// newestPlanNaming returns the newest plan (by BuiltSeq) that has
// snapshot id as a candidate, or nil.
func (s *State) newestPlanNaming(id string) *Plan {
	if pl, ok := s.Plans[s.NewestPlan[id]]; ok {
		for _, c := range pl.Built.Candidates {
			if c.Snapshot == id {
				return pl
			}
		}
	}
	// Not indexed (a plan id built twice, which decide refuses): scan.
	var newest *Plan
	for _, pl := range s.Plans {
		if newest != nil && pl.BuiltSeq <= newest.BuiltSeq {
			continue
		}
		for _, c := range pl.Built.Candidates {
			if c.Snapshot == id {
				newest = pl
				break
			}
		}
	}
	return newest
}

// planBuilt indexes a new plan as open and as the newest naming each of
// its candidates, and takes back any retired table it uses: the table is
// computed again (its coverage was cleared).
func (s *State) planBuilt(pl *Plan) {
	for _, c := range pl.Built.Candidates {
		s.NewestPlan[c.Snapshot] = pl.Built.Plan
	}
	if s.PlanOpen(pl) {
		k := openKey(pl.Built.Env, pl.Built.Generation)
		if !slices.Contains(s.OpenPlans[k], pl.Built.Plan) {
			s.OpenPlans[k] = append(s.OpenPlans[k], pl.Built.Plan)
		}
	}
	if len(s.Retired) == 0 {
		return
	}
	used := map[string]bool{}
	s.planTables(pl, used)
	for t := range used {
		delete(s.Retired, t)
	}
}

// retire applies a TableRetired: the table's rows are gone.
func (s *State) retire(seq uint64, p events.TableRetired) {
	delete(s.Coverage, p.Table)
	s.Retired[p.Table] = Retirement{Seq: seq, Event: p}
}
