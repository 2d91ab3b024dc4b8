package projections

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
)

// Snapshot is a registered model version with its parsed schedule.
type Snapshot struct {
	events.SnapshotRegistered
	// Schedule is parsed from the registration (not stored).
	Schedule interval.Schedule `json:"-"`
	// Seq is the stream sequence of the registration.
	Seq uint64 `json:"seq"`
	// TablePlan is the plan that bound a forward-only version to the table
	// it writes (its incumbent's in that plan's env, or its own); empty
	// until a plan names it.
	TablePlan string `json:"table_plan,omitempty"`
}

// Env is an environment: which snapshot serves each model.
type Env struct {
	Name string `json:"name"`
	// Generation increases with every accepted promotion.
	Generation uint64 `json:"generation"`
	// Incumbents maps model to the serving snapshot id.
	Incumbents map[string]string `json:"incumbents"`
	// Finalized is the plan most recently finalized in the env.
	Finalized string `json:"finalized,omitempty"`
	// FinalizedGeneration is the generation that plan finalized.
	FinalizedGeneration uint64 `json:"finalized_generation,omitempty"`
	// LastTick is the newest scheduler tick recorded per model.
	LastTick map[string]time.Time `json:"last_tick,omitempty"`
	// History lists the generations, oldest first: what each changed of
	// the incumbents (IncumbentsAt rebuilds a generation's), for rollbacks.
	History []Generation `json:"history,omitempty"`
}

// Generation is how one environment generation began: the accepted
// promotion of Plan, or the rollback Rollback, stored at Seq.
type Generation struct {
	Generation uint64    `json:"generation"`
	Seq        uint64    `json:"seq"`
	At         time.Time `json:"at"`
	// Set maps each model whose incumbent the generation changed to its
	// new incumbent.
	Set  map[string]string `json:"set"`
	Plan string            `json:"plan,omitempty"`
	// Rollback is the rollback that began the generation, nil for a
	// promotion.
	Rollback *events.EnvironmentRolledBack `json:"rollback,omitempty"`
}

// IncumbentsAt returns the incumbents env had at generation gen (a new
// map), and whether the env's history holds that generation (generation 0,
// before any promotion, has none).
func (e *Env) IncumbentsAt(gen uint64) (map[string]string, bool) {
	out := map[string]string{}
	if gen == 0 {
		return out, true
	}
	found := false
	for _, g := range e.History {
		if g.Generation > gen {
			break
		}
		maps.Copy(out, g.Set)
		found = found || g.Generation == gen
	}
	return out, found
}

// generation records that env moved to a new generation at seq.
func (e *Env) generation(g Generation) { e.History = append(e.History, g) }

// Plan is a built plan and its latest decision.
type Plan struct {
	Built    events.PlanBuilt `json:"built"`
	BuiltSeq uint64           `json:"built_seq"`
	// Decision is the most recent decision, nil before the first promote.
	Decision    *events.PromotionDecided `json:"decision,omitempty"`
	DecisionSeq uint64                   `json:"decision_seq,omitempty"`
	// Earlier holds the decisions before the most recent one, oldest
	// first (a plan promoted again with a new command id).
	Earlier []Decided `json:"earlier,omitempty"`
	// AcceptedSeq is the sequence of the decision that accepted the plan
	// (0: not promoted); AcceptedGeneration the env generation it set.
	AcceptedSeq        uint64 `json:"accepted_seq,omitempty"`
	AcceptedGeneration uint64 `json:"accepted_generation,omitempty"`
	Finalized          bool   `json:"finalized"`
	// CatchUp is the most recent catch-up request, nil if none.
	CatchUp    *events.CatchUpRequested `json:"catch_up,omitempty"`
	CatchUpSeq uint64                   `json:"catch_up_seq,omitempty"`
	// Cancelled is the plan's cancellation (cancel_plan), nil if none:
	// its backfill and catch-up work is no longer computed.
	Cancelled    *events.PlanCancelled `json:"cancelled,omitempty"`
	CancelledSeq uint64                `json:"cancelled_seq,omitempty"`
}

// CatchUpOpen reports whether a catch-up request waits for its strict retry.
func (p *Plan) CatchUpOpen() bool { return p.CatchUp != nil && p.CatchUpSeq > p.DecisionSeq }

// Accepted reports whether the plan has been promoted.
func (p *Plan) Accepted() bool { return p.AcceptedSeq > 0 }

// Decided is a recorded decision and its stream sequence.
type Decided struct {
	Seq      uint64                  `json:"seq"`
	Decision events.PromotionDecided `json:"decision"`
}

// DecidedAt returns the plan's decision stored at seq, or nil.
func (p *Plan) DecidedAt(seq uint64) *events.PromotionDecided {
	if p.Decision != nil && p.DecisionSeq == seq {
		return p.Decision
	}
	for i := range p.Earlier {
		if p.Earlier[i].Seq == seq {
			return &p.Earlier[i].Decision
		}
	}
	return nil
}

// DecisionRef locates a recorded decision in the stream.
type DecisionRef struct {
	Plan string `json:"plan"`
	Seq  uint64 `json:"seq"`
}

// State is every projection folded together. The zero value is not usable;
// call New.
type State struct {
	// Seq is the stream sequence of the last event applied.
	Seq uint64 `json:"seq"`
	// Index is the place of the last event applied in its group message
	// (events.Record.Index; 0 for a message of its own): with Seq, the
	// last event's address.
	Index int `json:"index,omitempty"`
	// Groups counts the group messages folded (several commands' events
	// stored as one message). Once there is one, stored subjects no longer
	// name every event's aggregate, and writers append under the stream's
	// last sequence rather than per-subject conditions.
	Groups int `json:"groups,omitempty"`
	// SubjectSeq is the stream sequence of the last event on each subject:
	// the expected-sequence value for the next append to that aggregate.
	SubjectSeq map[string]uint64    `json:"subject_seq"`
	Snapshots  map[string]*Snapshot `json:"snapshots"`
	// Coverage maps a table to the ranges computed into it.
	Coverage map[string]interval.Set `json:"coverage"`
	Envs     map[string]*Env         `json:"envs"`
	Plans    map[string]*Plan        `json:"plans"`
	// Commands maps an applied command id to the sequence of its last
	// event and its digest.
	Commands map[string]Applied `json:"commands"`
	// Decisions lists every PromotionDecided in stream order.
	Decisions []DecisionRef `json:"decisions"`
	// DecisionCodes counts recorded decisions by code (once per code a
	// decision carries), DecisionOutcomes by outcome.
	DecisionCodes    map[string]int         `json:"decision_codes"`
	DecisionOutcomes map[events.Outcome]int `json:"decision_outcomes"`
	// Repairs lists repair debt: one per candidate accepted with a gap.
	Repairs []*Repair `json:"repairs"`
	// Runs counts completions by run kind; Failures counts failed runs
	// (RunFailed), per snapshot.
	Runs     map[events.RunKind]int `json:"runs"`
	Failures map[string]*Failures   `json:"failures"`
	// Audits is, per snapshot and audit name, what its AuditRecorded
	// events say (audits.go).
	Audits map[string]map[string]*AuditState `json:"audits"`
	// Work holds every work item the stream made due, by id
	// (work-<seq>-<run kind>): what it asks to compute. A worker's report
	// names its item and is checked against it. Items are kept: a report
	// may come late (a redelivered item), and the map grows like Commands,
	// by one entry per item.
	Work map[string]*Work `json:"work"`
	// LastAdvance is the scheduled work item the last event applied added
	// to, when that event was a SchedulerAdvanced: the advances of one
	// command are one item, named after the first.
	LastAdvance *AdvanceRef `json:"last_advance,omitempty"`
	// Released maps a table to the accepted promotion that last ended a
	// use of it (tables.go); Retired maps a retired table to its
	// retirement, until a plan uses the table again.
	Released map[string]Release    `json:"released"`
	Retired  map[string]Retirement `json:"retired"`
	// Demoted maps a table an environment's incumbent wrote or read to
	// the accepted promotion or rollback that last ended such a use: the
	// retention (decide.Retirable) keeps it from there, for rollbacks.
	Demoted map[string]Release `json:"demoted"`
	// OpenPlans indexes the open plans by "<env> <generation>" (tables.go).
	OpenPlans map[string][]string `json:"open_plans"`
	// NewestPlan maps a snapshot to the newest plan that has it as a
	// candidate (UpstreamOf reads it).
	NewestPlan map[string]string `json:"newest_plan"`
	// Restatements maps the work item of each restatement (work-<seq>-
	// restate) to its request: what it restates, in which env, at which
	// generation.
	Restatements map[string]*events.RestatementRequested `json:"restatements,omitempty"`
	// Skipped counts events that could not be decoded or applied.
	Skipped int `json:"skipped"`
	// Events counts events applied.
	Events int `json:"events"`
}

// Work is what one work item asks for, as work.Of derives it from
// the same events: its run kind and, per snapshot, the ranges of its
// steps.
type Work struct {
	RunKind events.RunKind `json:"run_kind"`
	// At is when the work became due: the time of its first event.
	At    time.Time               `json:"at"`
	Steps map[string]interval.Set `json:"steps"`
	// Done is, per snapshot, what the completions that name the item have
	// recorded of its step: the item's progress (batches are done when
	// Done covers them), which the publisher gates a child's batches on
	// and plan --wait and the dashboard show.
	Done map[string]*StepDone `json:"done,omitempty"`
}

// StepDone is what completions naming a work item recorded of one of its
// steps.
type StepDone struct {
	// Ranges is the part of the step recorded complete.
	Ranges interval.Set `json:"ranges"`
	// Rows sums the rows the completions reported.
	Rows int64 `json:"rows"`
	// Reports counts the completions; Last is the time of the latest.
	Reports int       `json:"reports"`
	Last    time.Time `json:"last"`
}

// done records a completion naming the item: ranges of snapshot (clipped
// to its step), rows written, at the event's time.
func (w *Work) done(snapshot string, ranges []interval.Range, rows int64, at time.Time) {
	step, ok := w.Steps[snapshot]
	if !ok {
		return
	}
	if w.Done == nil {
		w.Done = map[string]*StepDone{}
	}
	d := w.Done[snapshot]
	if d == nil {
		d = &StepDone{}
		w.Done[snapshot] = d
	}
	d.Ranges = d.Ranges.AddSet(step.SubtractSet(step.SubtractSet(interval.NewSet(ranges...)))) // step ∩ ranges
	d.Rows = min(d.Rows, math.MaxInt64-rows) + rows                                            // saturating: a worker reports rows
	d.Reports++
	if at.After(d.Last) {
		d.Last = at // the latest, whatever order the reports arrive in
	}
}

// AdvanceRef ties a SchedulerAdvanced to the scheduled work item it is
// part of.
type AdvanceRef struct {
	Causation string `json:"causation"`
	Item      string `json:"item"`
}

// addWork adds ranges of snapshot to the work item id of run kind k.
func (s *State) addWork(id string, k events.RunKind, at time.Time, snapshot string, ranges ...[]interval.Range) {
	var set interval.Set
	for _, rs := range ranges {
		set = set.AddSet(interval.NewSet(rs...))
	}
	if set.Empty() {
		return
	}
	w := s.Work[id]
	if w == nil {
		w = &Work{RunKind: k, At: at, Steps: map[string]interval.Set{}}
		s.Work[id] = w
	}
	w.Steps[snapshot] = w.Steps[snapshot].AddSet(set)
}

// New returns an empty State.
func New() *State {
	return &State{
		SubjectSeq: map[string]uint64{},
		Snapshots:  map[string]*Snapshot{},
		Coverage:   map[string]interval.Set{},
		Envs:       map[string]*Env{},
		Plans:      map[string]*Plan{},
		Commands:   map[string]Applied{},
		Runs:       map[events.RunKind]int{},
		Failures:   map[string]*Failures{},
		Audits:     map[string]map[string]*AuditState{},
		Work:       map[string]*Work{},
		Released:   map[string]Release{},
		Demoted:    map[string]Release{},
		Retired:    map[string]Retirement{},
		OpenPlans:  map[string][]string{},
		NewestPlan: map[string]string{},

		Restatements: map[string]*events.RestatementRequested{},

		DecisionCodes:    map[string]int{},
		DecisionOutcomes: map[events.Outcome]int{},
	}
}

// Applied is what the stream recorded of a command id: the sequence of
// its last event, and the digest of the command (commands.Digest; empty
// for events written before digests), which tells a retry (same digest)
// from another command reusing the id.
type Applied struct {
	Seq    uint64 `json:"seq"`
	Digest string `json:"digest,omitempty"`
}

// Failures is what the stream says of a snapshot's failed runs.
type Failures struct {
	Count int `json:"count"`
	// Final counts runs a worker gave up on.
	Final int `json:"final"`
	// Last is the most recent failure and its sequence.
	Last    events.RunFailed `json:"last"`
	LastSeq uint64           `json:"last_seq"`
	// LastFinal is the most recent final failure (the worker gave the
	// work up) and its sequence (0: none).
	LastFinal    events.RunFailed `json:"last_final"`
	LastFinalSeq uint64           `json:"last_final_seq,omitempty"`
}

// Repair is the debt a promotion accepted with a gap leaves: the candidate's
// table must still compute Ranges. It closes with the RepairCompleted event
// the engine appends when the table covers them, by any route.
type Repair struct {
	Env      string           `json:"env"`
	Plan     string           `json:"plan"`
	Model    string           `json:"model"`
	Snapshot string           `json:"snapshot"`
	Table    string           `json:"table"`
	Ranges   []interval.Range `json:"ranges"`
	OpenedAt time.Time        `json:"opened_at"`
	OpenSeq  uint64           `json:"open_seq"`
	// ClosedAt is zero while the debt is open.
	ClosedAt  time.Time `json:"closed_at,omitempty"`
	ClosedSeq uint64    `json:"closed_seq,omitempty"`
	// LatencyMS is how long the debt was open, from its RepairCompleted.
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// RolledBackSeq is set when a rollback (its EnvironmentRolledBack at
	// that seq) closed the debt: the env no longer serves the table.
	RolledBackSeq uint64 `json:"rolled_back_seq,omitempty"`
}

// Open reports whether the debt is still owed.
func (r *Repair) Open() bool { return r.ClosedSeq == 0 }

// OpenRepairs returns the debts still owed, oldest first.
func (s *State) OpenRepairs() []*Repair {
	var out []*Repair
	for _, r := range s.Repairs {
		if r.Open() {
			out = append(out, r)
		}
	}
	return out
}

// RepairsClosedBy returns the open debts on table that completing added
// into it would close. The table's coverage with added is computed only
// when the table has open debt: most completions close none, and the
// union copies the table's whole coverage.
func (s *State) RepairsClosedBy(table string, added interval.Set) []*Repair {
	var out []*Repair
	var cov interval.Set
	for _, r := range s.Repairs {
		if !r.Open() || r.Table != table {
			continue
		}
		if cov == nil {
			cov = s.Table(table).AddSet(added)
		}
		covered := true
		for _, g := range r.Ranges {
			covered = covered && cov.Covers(g)
		}
		if covered {
			out = append(out, r)
		}
	}
	return out
}

// Completed is the RepairCompleted event that closes r at clock at.
func (r *Repair) Completed(at time.Time) events.RepairCompleted {
	return events.RepairCompleted{
		Env: r.Env, Plan: r.Plan, Model: r.Model, Snapshot: r.Snapshot, Table: r.Table, Ranges: r.Ranges,
		OpenedAt: r.OpenedAt, OpenSeq: r.OpenSeq, ClosedAt: at.UTC(), LatencyMS: at.Sub(r.OpenedAt).Milliseconds(),
	}
}

func apply(s *State, seq uint64, ev events.Event) error {
	switch p := ev.Payload.(type) {
	case events.SnapshotRegistered:
		sched, err := interval.NewSchedule(p.Cron, p.Unit, p.AllowPartials)
		if err != nil {
			return err
		}
		s.Snapshots[p.Snapshot] = &Snapshot{SnapshotRegistered: p, Schedule: sched, Seq: seq}
	case events.PlanBuilt:
		pl := &Plan{Built: p, BuiltSeq: seq}
		s.Plans[p.Plan] = pl
		s.planBuilt(pl)
		for _, c := range p.Candidates {
			s.addWork(events.WorkID(seq, events.RunBackfill), events.RunBackfill, ev.OccurredAt, c.Snapshot, c.Backfill)
		}
		for _, c := range p.Candidates {
			// The first plan to name a forward-only version binds the table
			// it writes (decide refuses a plan that would move it).
			if sn, ok := s.Snapshots[c.Snapshot]; ok && sn.Kind == events.ForwardOnly && sn.TablePlan == "" {
				sn.Table, sn.TablePlan = c.Table, p.Plan
			}
		}
	case events.IntervalsCompleted:
		s.Coverage[p.Table] = s.Coverage[p.Table].AddSet(p.Ranges) // one merge, not a copy per range
		s.Runs[p.RunKind]++
		if w := s.Work[p.Work]; w != nil {
			w.done(p.Snapshot, p.Ranges, p.Rows, ev.OccurredAt)
		}
	case events.RunFailed:
		f := s.Failures[p.Snapshot]
		if f == nil {
			f = &Failures{}
			s.Failures[p.Snapshot] = f
		}
		f.Count++
		if p.Final {
			f.Final++
			f.LastFinal, f.LastFinalSeq = p, seq
		}
		f.Last, f.LastSeq = p, seq
	case events.AuditRecorded:
		s.auditRecorded(seq, p)
	case events.IntervalsInvalidated:
		s.Coverage[p.Table] = s.Coverage[p.Table].SubtractSet(p.Ranges)
	case events.SchedulerAdvanced:
		env := s.ensureEnv(p.Env)
		env.LastTick[p.Model] = p.Tick
		item := events.WorkID(seq, events.RunScheduled)
		if last := s.LastAdvance; last != nil && ev.Causation != "" && last.Causation == ev.Causation {
			item = last.Item
		}
		s.addWork(item, events.RunScheduled, ev.OccurredAt, p.Snapshot, p.Ranges)
		s.LastAdvance = &AdvanceRef{Causation: ev.Causation, Item: item}
	case events.PromotionDecided:
		pl, ok := s.Plans[p.Plan]
		if !ok {
			return fmt.Errorf("decision for unknown plan %q", p.Plan)
		}
		if pl.Decision != nil {
			pl.Earlier = append(pl.Earlier, Decided{Seq: pl.DecisionSeq, Decision: *pl.Decision})
		}
		d := p
		pl.Decision, pl.DecisionSeq = &d, seq
		s.Decisions = append(s.Decisions, DecisionRef{Plan: p.Plan, Seq: seq})
		s.DecisionOutcomes[p.Outcome]++
		for _, c := range p.Codes {
			s.DecisionCodes[c]++
		}
		for _, r := range p.Repairs {
			s.addWork(events.WorkID(seq, events.RunRepair), events.RunRepair, ev.OccurredAt, r.Snapshot, r.Ranges)
		}
		if p.Outcome == events.Accepted {
			set := make(map[string]string, len(pl.Built.Candidates))
			for _, c := range pl.Built.Candidates {
				set[c.Model] = c.Snapshot
			}
			s.release(p.Env, set, seq, ev.OccurredAt)
			pl.AcceptedSeq, pl.AcceptedGeneration = seq, p.Generation
			env := s.ensureEnv(p.Env)
			env.Generation = p.Generation
			env.generation(Generation{Generation: p.Generation, Seq: seq, At: ev.OccurredAt, Set: set, Plan: p.Plan})
			for _, c := range pl.Built.Candidates {
				env.Incumbents[c.Model] = c.Snapshot
				if f := p.Models[c.Model]; len(f.Missing) > 0 {
					s.Repairs = append(s.Repairs, &Repair{Env: p.Env, Plan: p.Plan, Model: c.Model, Snapshot: c.Snapshot,
						Table: c.Table, Ranges: f.Missing, OpenedAt: ev.OccurredAt, OpenSeq: seq})
				}
			}
		}
	case events.CatchUpRequested:
		pl, ok := s.Plans[p.Plan]
		if !ok {
			return fmt.Errorf("catch-up for unknown plan %q", p.Plan)
		}
		c := p
		pl.CatchUp, pl.CatchUpSeq = &c, seq
		for _, w := range p.Work {
			s.addWork(events.WorkID(seq, events.RunCatchUp), events.RunCatchUp, ev.OccurredAt, w.Snapshot, w.Ranges, w.Recompute)
		}
	case events.RestatementRequested:
		id := events.WorkID(seq, events.RunRestate)
		r := p
		s.Restatements[id] = &r
		for _, w := range p.Work {
			s.addWork(id, events.RunRestate, ev.OccurredAt, w.Snapshot, w.Ranges)
		}
	case events.RepairCompleted:
		for _, r := range s.Repairs {
			if r.Open() && r.Plan == p.Plan && r.Model == p.Model && r.OpenSeq == p.OpenSeq {
				r.ClosedAt, r.ClosedSeq, r.LatencyMS = p.ClosedAt, seq, p.LatencyMS
			}
		}
	case events.TableRetired:
		s.retire(seq, p)
	case events.PlanCancelled:
		pl, ok := s.Plans[p.Plan]
		if !ok {
			return fmt.Errorf("cancellation of unknown plan %q", p.Plan)
		}
		c := p
		pl.Cancelled, pl.CancelledSeq = &c, seq
	case events.EnvironmentRolledBack:
		s.rollback(seq, ev.OccurredAt, p)
	case events.EnvironmentFinalized:
		env := s.ensureEnv(p.Env)
		env.Finalized, env.FinalizedGeneration = p.Plan, p.Generation
		if pl, ok := s.Plans[p.Plan]; ok {
			pl.Finalized = true
		}
	default:
		return fmt.Errorf("no fold for %T", p)
	}
	return nil
}

func (s *State) ensureEnv(name string) *Env {
	e, ok := s.Envs[name]
	if !ok {
		e = &Env{Name: name, Incumbents: map[string]string{}, LastTick: map[string]time.Time{}}
		s.Envs[name] = e
	}
	return e
}

// DependencyOrder returns the env's incumbent models so that every model
// comes after the models it depends on (ties by name), for scheduling.
func (s *State) DependencyOrder(env string) []string {
	e := s.Env(env)
	deps := map[string][]string{}
	for m, id := range e.Incumbents {
		if sn, ok := s.Snapshots[id]; ok {
			deps[m] = sn.DependsOn
		}
	}
	return models.TopoSort(deps)
}

// Downstream returns the env's incumbent models that depend, directly or
// transitively, on any of roots (roots excluded), sorted.
func (s *State) Downstream(env string, roots []string) []string {
	e := s.Env(env)
	children := map[string][]string{}
	for m, id := range e.Incumbents {
		if sn, ok := s.Snapshots[id]; ok {
			for _, d := range sn.DependsOn {
				children[d] = append(children[d], m)
			}
		}
	}
	in := map[string]bool{}
	for _, r := range roots {
		in[r] = true
	}
	found := map[string]bool{}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, c := range children[m] {
			if !in[c] && !found[c] {
				found[c] = true
				queue = append(queue, c)
			}
		}
	}
	out := make([]string, 0, len(found))
	for m := range found {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Env returns the named environment, or an empty one that is not stored.
func (s *State) Env(name string) *Env {
	if e, ok := s.Envs[name]; ok {
		return e
	}
	return &Env{Name: name, Incumbents: map[string]string{}}
}

// Table returns a table's coverage.
func (s *State) Table(table string) interval.Set { return s.Coverage[table] }

// SnapshotCoverage returns the coverage of a snapshot's table.
func (s *State) SnapshotCoverage(id string) interval.Set {
	sn, ok := s.Snapshots[id]
	if !ok {
		return nil
	}
	return s.Coverage[sn.Table]
}

// Frontier is a snapshot's frontier: the end of the last range of its
// table's coverage, holes or not (zero when it has none).
func (s *State) Frontier(id string) time.Time { return s.SnapshotCoverage(id).Frontier() }

// LatestVersion returns the most recently registered snapshot of a model.
func (s *State) LatestVersion(model string) *Snapshot {
	var best *Snapshot
	for _, sn := range s.Snapshots {
		if sn.Model == model && (best == nil || sn.Seq > best.Seq) {
			best = sn
		}
	}
	return best
}

// UpstreamOf is what snapshot id reads: for each model it depends on, the
// upstream snapshot it was planned against. Those fixed at its
// registration (a derived version's Upstream) come first; the rest come
// from the newest plan that has it as a candidate. missing names the
// dependencies neither says (a snapshot never planned).
func (s *State) UpstreamOf(id string) (upstream map[string]string, missing []string) {
	sn, ok := s.Snapshots[id]
	if !ok {
		return nil, nil
	}
	upstream = map[string]string{}
	add := func(ids []string) {
		for _, up := range ids {
			if m, _, ok := events.ParseSnapshotID(up); ok {
				if _, seen := upstream[m]; !seen {
					upstream[m] = up
				}
			}
		}
	}
	add(sn.Upstream)
	if newest := s.newestPlanNaming(id); newest != nil {
		for _, c := range newest.Built.Candidates {
			if c.Snapshot == id {
				add(c.Upstream)
			}
		}
	}
	for _, dep := range sn.DependsOn {
		if _, ok := upstream[dep]; !ok {
			missing = append(missing, dep)
		}
	}
	for m := range upstream {
		if !slices.Contains(sn.DependsOn, m) {
			delete(upstream, m)
		}
	}
	return upstream, missing
}

// Apply folds one event, stored at stream sequence seq in a message of
// its own, into s (ApplyRecord for any record). Events at or below s.Seq
// are ignored. An event that contradicts the state (it names an unknown
// plan, say) is counted in Skipped and otherwise ignored, so a fold never
// stops half-way; the engine validates before it appends, so this only
// happens to a stream written by something else.
func Apply(s *State, seq uint64, ev events.Event) error {
	return ApplyRecord(s, events.Record{Seq: seq, Event: ev})
}

// ApplyRecord folds one record into s: its event (Apply), or, for a record
// with Err, only the advance of its address (Skip). A record at or before
// the address of the last one applied (Seq, Index) is ignored, so a group
// message's events fold one by one, each once.
func ApplyRecord(s *State, r events.Record) error {
	if r.Seq < s.Seq || (r.Seq == s.Seq && (r.Count == 0 || r.Index <= s.Index)) {
		return nil
	}
	if r.Count > 0 && r.Index == 0 {
		s.Groups++
	}
	s.Seq, s.Index = r.Seq, r.Index
	if r.Err != nil {
		s.SubjectSeq[r.Subject] = r.Seq
		s.Skipped++
		s.LastAdvance = nil
		return nil
	}
	seq, ev := r.Seq, r.Event
	s.SubjectSeq[ev.Payload.Subject()] = seq
	if ev.Causation != "" {
		s.Commands[ev.Causation] = Applied{Seq: seq, Digest: ev.Digest}
	}
	s.Events++
	if _, adv := ev.Payload.(events.SchedulerAdvanced); !adv {
		s.LastAdvance = nil
	}
	if err := apply(s, seq, ev); err != nil {
		s.Skipped++
		return fmt.Errorf("projections: event %s at seq %d: %w", ev.ID, seq, err)
	}
	return nil
}

// Skip records that the message at seq on subject could not be decoded:
// the sequence still advances so expected-sequence values stay right.
func Skip(s *State, seq uint64, subject string) {
	_ = ApplyRecord(s, events.Record{Seq: seq, Subject: subject, Err: errSkipped})
}

var errSkipped = errors.New("projections: undecodable")

// Restore completes a State decoded from a checkpoint: it parses the
// snapshots' schedules (not serialised) and makes every map writable.
func Restore(s *State) error {
	for id, sn := range s.Snapshots {
		sched, err := interval.NewSchedule(sn.Cron, sn.Unit, sn.AllowPartials)
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
		sn.Schedule = sched
	}
	for name, e := range s.Envs {
		if e.Name == "" {
			e.Name = name
		}
		if e.Incumbents == nil {
			e.Incumbents = map[string]string{}
		}
		if e.LastTick == nil {
			e.LastTick = map[string]time.Time{}
		}
	}
	if s.SubjectSeq == nil {
		s.SubjectSeq = map[string]uint64{}
	}
	if s.Snapshots == nil {
		s.Snapshots = map[string]*Snapshot{}
	}
	if s.Coverage == nil {
		s.Coverage = map[string]interval.Set{}
	}
	if s.Envs == nil {
		s.Envs = map[string]*Env{}
	}
	if s.Audits == nil {
		s.Audits = map[string]map[string]*AuditState{}
	}
	if s.Plans == nil {
		s.Plans = map[string]*Plan{}
	}
	if s.Commands == nil {
		s.Commands = map[string]Applied{}
	}
	if s.Runs == nil {
		s.Runs = map[events.RunKind]int{}
	}
	if s.Failures == nil {
		s.Failures = map[string]*Failures{}
	}
	if s.Work == nil {
		s.Work = map[string]*Work{}
	}
	if s.DecisionCodes == nil {
		s.DecisionCodes = map[string]int{}
	}
	if s.DecisionOutcomes == nil {
		s.DecisionOutcomes = map[events.Outcome]int{}
	}
	if s.Released == nil {
		s.Released = map[string]Release{}
	}
	if s.Demoted == nil {
		s.Demoted = map[string]Release{}
	}
	if s.Retired == nil {
		s.Retired = map[string]Retirement{}
	}
	if s.OpenPlans == nil {
		s.OpenPlans = map[string][]string{}
	}
	if s.NewestPlan == nil {
		s.NewestPlan = map[string]string{}
	}
	if s.Restatements == nil {
		s.Restatements = map[string]*events.RestatementRequested{}
	}
	return nil
}
