package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// Fingerprint identifies a snapshot definition: two registrations with the
// same fingerprint are the same version.
func Fingerprint(r events.SnapshotRegistered) string {
	deps := append([]string(nil), r.DependsOn...)
	sort.Strings(deps)
	ups := append([]string(nil), r.Upstream...)
	sort.Strings(ups)
	h := sha256.New()
	fmt.Fprintf(h, "model=%s\ncron=%s\nunit=%s\nstart=%d\nlookback=%d\nkind=%s\npartials=%t\ndeps=%s\nupstream=%s\n",
		r.Model, interval.NormalizeCron(r.Cron), r.Unit, r.Start.Unix(), r.Lookback, r.Kind, r.AllowPartials,
		strings.Join(deps, ","), strings.Join(ups, ","))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func decideRegister(st *projections.State, c *commands.RegisterSnapshot) (decision, error) {
	sched, err := interval.NewSchedule(c.Cron, c.IntervalUnit, c.AllowPartials)
	if err != nil {
		return decision{}, commands.Errorf(commands.CodeInvalid, "cron", "%v", err)
	}
	kind := c.SnapshotKind
	if kind == "" {
		kind = events.Incremental
	}
	id := events.SnapshotID(c.Model, c.Version)
	reg := events.SnapshotRegistered{
		Snapshot: id, Model: c.Model, Version: c.Version, Cron: sched.Cron(), Unit: sched.Unit(),
		Start: c.Start.UTC(), Lookback: c.Lookback, Kind: kind, AllowPartials: c.AllowPartials,
		DependsOn: append([]string{}, c.DependsOn...), Table: id,
	}
	reg.Fingerprint = Fingerprint(reg)
	if prev, ok := st.Snapshots[id]; ok {
		if prev.Fingerprint == reg.Fingerprint {
			return decision{reply: commands.Reply{Seq: prev.Seq, Message: "snapshot already registered with this definition"}}, nil
		}
		return decision{}, commands.Errorf(commands.CodeConflict, "version", "%s is already registered with a different definition (fingerprint %s); register the change as a new version", id, prev.Fingerprint)
	}
	if cycle := dependencyCycle(st, c.Model, c.DependsOn); cycle != nil {
		return decision{}, commands.Errorf(commands.CodeInvalid, "depends_on", "dependency cycle: %s", strings.Join(cycle, " -> "))
	}
	if kind == events.ForwardOnly {
		if latest := st.LatestVersion(c.Model); latest != nil {
			reg.Table = latest.Table
		}
	}
	subj := reg.Subject()
	return decision{payloads: []events.Payload{reg}, expect: expectSubjects(st.SubjectSeq, subj)}, nil
}

// DerivedVersion is the version a plan gives a downstream model it does not
// set: "<incumbent version>+<plan id>".
func DerivedVersion(incumbentVersion, plan string) string { return incumbentVersion + "+" + plan }

func decideBuildPlan(st *projections.State, c *commands.BuildPlan) (decision, error) {
	if _, ok := st.Plans[c.Plan]; ok {
		return decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q already exists", c.Plan)
	}
	env := st.Env(c.Env)
	chosen := map[string]*projections.Snapshot{}
	var set []string
	for model, version := range c.Versions {
		sn, ok := st.Snapshots[events.SnapshotID(model, version)]
		if !ok {
			return decision{}, commands.Errorf(commands.CodeNotFound, "versions."+model, "snapshot %s is not registered", events.SnapshotID(model, version))
		}
		chosen[model] = sn
		set = append(set, model)
	}
	sort.Strings(set)
	var payloads []events.Payload
	var subjects []string
	derived := map[string]bool{}
	for _, model := range st.Downstream(c.Env, set) {
		inc, ok := st.Snapshots[env.Incumbents[model]]
		if !ok {
			continue
		}
		version := DerivedVersion(inc.Version, c.Plan)
		id := events.SnapshotID(model, version)
		if !events.ValidVersion(version) {
			return decision{}, commands.Errorf(commands.CodeInvalid, "plan", "derived version %q for %s is not a valid version", version, model)
		}
		if sn, ok := st.Snapshots[id]; ok {
			chosen[model] = sn
			derived[model] = true
			continue
		}
		reg := inc.SnapshotRegistered
		reg.Snapshot, reg.Version = id, version
		reg.DependsOn = append([]string{}, inc.DependsOn...)
		reg.Table = id
		if reg.Kind == events.ForwardOnly {
			reg.Table = inc.Table
		}
		reg.Upstream = nil
		reg.Fingerprint = Fingerprint(reg)
		sn := &projections.Snapshot{SnapshotRegistered: reg, Schedule: inc.Schedule}
		chosen[model] = sn
		derived[model] = true
		payloads = append(payloads, reg)
		subjects = append(subjects, reg.Subject())
	}
	deps := map[string][]string{}
	for m, sn := range chosen {
		deps[m] = sn.DependsOn
	}
	at := c.At.UTC()
	plan := events.PlanBuilt{
		Plan: c.Plan, Env: c.Env, BuiltAt: at, Generation: env.Generation,
		Policy: events.Policy{Version: policy.Version, MaxTrailingGapAdvances: c.MaxTrailingGapAdvances, MaxCatchUpAdvances: c.MaxCatchUpAdvances},
	}
	for _, model := range projections.TopoSort(deps) {
		sn := chosen[model]
		cand := events.Candidate{Model: model, Snapshot: sn.Snapshot, Table: sn.Table, Derived: derived[model], Upstream: []string{}, Backfill: []interval.Range{}}
		for _, d := range sn.DependsOn {
			if up, ok := chosen[d]; ok {
				cand.Upstream = append(cand.Upstream, up.Snapshot)
			} else if inc := env.Incumbents[d]; inc != "" {
				cand.Upstream = append(cand.Upstream, inc)
			}
		}
		end := sn.Schedule.ReadyFrontier(at)
		if incID := env.Incumbents[model]; incID != "" {
			inc := st.Snapshots[incID]
			cand.Incumbent = incID
			cand.IncumbentFrontier = st.Frontier(incID)
			cand.IncumbentCron, cand.IncumbentUnit, cand.IncumbentAllowPartials = inc.Cron, inc.Unit, inc.AllowPartials
			end = cand.IncumbentFrontier
		}
		start := sn.Schedule.Unit().Floor(sn.Start)
		if !end.IsZero() && start.Before(end) {
			cand.Backfill = st.Table(sn.Table).Missing(interval.R(start, end))
			if cand.Backfill == nil {
				cand.Backfill = []interval.Range{}
			}
		}
		if plan.Start.IsZero() || start.Before(plan.Start) {
			plan.Start = start
		}
		if end.After(plan.End) {
			plan.End = end
		}
		plan.Candidates = append(plan.Candidates, cand)
	}
	payloads = append(payloads, plan)
	subjects = append(subjects, plan.Subject())
	p := plan
	return decision{payloads: payloads, expect: expectSubjects(st.SubjectSeq, subjects...), reply: commands.Reply{Plan: &p}}, nil
}

// checkRanges validates ranges against a snapshot's unit and start, and,
// for completions, that they have ended at the command's clock.
func checkRanges(sn *projections.Snapshot, rs []interval.Range, ended bool, at time.Time) (interval.Set, error) {
	u := sn.Schedule.Unit()
	start := u.Floor(sn.Start)
	field := func(i int) string { return fmt.Sprintf("ranges[%d]", i) }
	for i, r := range rs {
		if !u.Aligned(r.Start) || (!u.Aligned(r.End) && !sn.AllowPartials) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s is not aligned to the %s unit of %s", r, u, sn.Snapshot)
		}
		if r.Start.Before(start) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s starts before %s's start %s", r, sn.Snapshot, start.Format(time.RFC3339))
		}
		if ended && r.End.After(at) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s has not ended at %s", r, at.Format(time.RFC3339))
		}
	}
	return interval.NewSet(rs...), nil
}

func snapshotOf(st *projections.State, model, version string) (*projections.Snapshot, error) {
	sn, ok := st.Snapshots[events.SnapshotID(model, version)]
	if !ok {
		for _, s := range st.Snapshots {
			if s.Model == model {
				return nil, commands.Errorf(commands.CodeNotFound, "version", "model %s has no version %q", model, version)
			}
		}
		return nil, commands.Errorf(commands.CodeNotFound, "model", "unknown model %q", model)
	}
	return sn, nil
}

// rangesOf resolves the snapshot a completion or invalidation names and
// validates its ranges.
func rangesOf(st *projections.State, model, version string, rs []interval.Range, ended bool, at time.Time) (*projections.Snapshot, interval.Set, error) {
	sn, err := snapshotOf(st, model, version)
	if err != nil {
		return nil, nil, err
	}
	set, err := checkRanges(sn, rs, ended, at)
	return sn, set, err
}

func decideComplete(st *projections.State, c *commands.CompleteIntervals) (decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, true, c.At)
	if err != nil {
		return decision{}, err
	}
	kind := c.RunKind
	if kind == "" {
		kind = events.RunManual
	}
	p := events.IntervalsCompleted{Snapshot: sn.Snapshot, Table: sn.Table, Ranges: set, RunKind: kind, RunID: c.RunID}
	payloads := []events.Payload{p}
	subjects := []string{p.Subject()}
	// A completion that closes repair debt carries its RepairCompleted in
	// the same atomic batch, under the env's expected sequence too.
	for _, r := range st.RepairsClosedBy(sn.Table, st.Table(sn.Table).AddSet(set)) {
		rc := r.Completed(c.At)
		payloads = append(payloads, rc)
		if !slices.Contains(subjects, rc.Subject()) {
			subjects = append(subjects, rc.Subject())
		}
	}
	return decision{payloads: payloads, expect: expectSubjects(st.SubjectSeq, subjects...)}, nil
}

func decideInvalidate(st *projections.State, c *commands.InvalidateIntervals) (decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, false, c.At)
	if err != nil {
		return decision{}, err
	}
	p := events.IntervalsInvalidated{Snapshot: sn.Snapshot, Table: sn.Table, Ranges: set, Reason: c.Reason}
	return decision{payloads: []events.Payload{p}, expect: expectSubjects(st.SubjectSeq, p.Subject())}, nil
}

// Due computes what a scheduler tick at t makes due for an env: per
// incumbent, in dependency order, every missing ready interval (plus the
// lookback intervals before the frontier when anything is missing).
func Due(st *projections.State, env string, t time.Time) []events.SchedulerAdvanced {
	e := st.Env(env)
	var out []events.SchedulerAdvanced
	for _, model := range st.DependencyOrder(env) {
		sn, ok := st.Snapshots[e.Incumbents[model]]
		if !ok {
			continue
		}
		tick := sn.Schedule.Prev(t)
		if last, ok := e.LastTick[model]; ok && !last.Before(tick) {
			continue // this tick (or a later one) already advanced the model
		}
		window := sn.Schedule.Ready(sn.Start, t)
		if window.Empty() {
			continue
		}
		missing := st.Table(sn.Table).Missing(window)
		if missing.Empty() {
			continue
		}
		if sn.Lookback > 0 {
			lb := interval.R(sn.Schedule.Unit().Add(sn.Schedule.Unit().Floor(window.End), -sn.Lookback), window.End)
			missing = missing.Add(lb.Intersect(window))
		}
		missing = sn.Schedule.Work(missing)
		var repairs interval.Set
		for _, r := range st.OpenRepairs() {
			if r.Env == env && r.Table == sn.Table {
				for _, g := range r.Ranges {
					repairs = repairs.AddSet(missing.Clip(g))
				}
			}
		}
		repairs = sn.Schedule.Work(repairs)
		if sn.Schedule.Work(missing.SubtractSet(repairs)).OverlapsSet(repairs) {
			// The debt and the new work share an interval (a partial one):
			// it is all one run.
			repairs = missing
		}
		out = append(out, events.SchedulerAdvanced{
			Env: env, Model: model, Snapshot: sn.Snapshot, Tick: tick, Frontier: window.End,
			Ranges: missing, Repairs: repairs, Generation: e.Generation,
		})
	}
	return out
}

func decideAdvance(st *projections.State, c *commands.AdvanceScheduler) (decision, error) {
	env, ok := st.Envs[c.Env]
	if !ok {
		return decision{}, commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", c.Env)
	}
	if c.Generation != env.Generation {
		// Fencing: a scheduler that read an older generation would advance
		// snapshots a promotion demoted. It must re-read and schedule again.
		return decision{}, commands.Errorf(commands.CodeStaleGeneration, "generation",
			"environment %s is at generation %d, the scheduler read generation %d: re-read the incumbents and schedule again", c.Env, env.Generation, c.Generation)
	}
	due := Due(st, c.Env, c.At)
	payloads := make([]events.Payload, len(due))
	for i, a := range due {
		payloads[i] = a
	}
	return decision{payloads: payloads, expect: expectSubjects(st.SubjectSeq, events.EnvSubject(c.Env)), reply: commands.Reply{Advances: due}}, nil
}

func decidePromote(st *projections.State, c *commands.Promote) (decision, error) {
	pl, ok := st.Plans[c.Plan]
	if !ok {
		return decision{}, commands.Errorf(commands.CodeNotFound, "plan", "unknown plan %q", c.Plan)
	}
	if pl.Accepted() {
		return decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q was already promoted at seq %d", c.Plan, pl.DecisionSeq)
	}
	gen := st.Env(pl.Built.Env).Generation
	if pl.CatchUpOpen() {
		d := policy.Retry(st, pl.Built, *pl.CatchUp)
		// The retry waits for the catch-up work, unless the plan conflicts
		// by now (another promotion): that is decided at once.
		if left := CatchUpOutstanding(st, *pl.CatchUp); len(left) > 0 && !slices.Contains(d.Codes, policy.CodeConflictingPlan) {
			return decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q is catching up (requested at seq %d): %s still to compute before the strict retry", c.Plan, pl.CatchUpSeq, describeWork(left))
		}
		ev := d.Event(pl.Built, st.Seq, c.At, gen, pl.CatchUpSeq)
		return decision{payloads: []events.Payload{ev}, expect: expectStream(st.Seq), reply: commands.Reply{Decision: &ev}}, nil
	}
	d := policy.Evaluate(st, pl.Built)
	if d.NeedsCatchUp() {
		req := d.Request(pl.Built, st.Seq, c.At)
		payloads := []events.Payload{req}
		for _, w := range req.Work {
			if len(w.Recompute) > 0 {
				payloads = append(payloads, events.IntervalsInvalidated{Snapshot: w.Snapshot, Table: w.Table, Ranges: w.Recompute, Reason: "catch_up:" + c.Plan})
			}
		}
		return decision{payloads: payloads, expect: expectStream(st.Seq), reply: commands.Reply{CatchUp: &req}}, nil
	}
	ev := d.Event(pl.Built, st.Seq, c.At, gen, 0)
	return decision{payloads: []events.Payload{ev}, expect: expectStream(st.Seq), reply: commands.Reply{Decision: &ev}}, nil
}

// CatchUpOutstanding returns the catch-up work of req that is not computed
// yet: per model, what its table still misses of Ranges and Recompute.
func CatchUpOutstanding(st *projections.State, req events.CatchUpRequested) []events.CatchUpWork {
	var out []events.CatchUpWork
	for _, w := range req.Work {
		todo := interval.NewSet(w.Ranges...).AddSet(w.Recompute)
		var left interval.Set
		for _, r := range todo {
			left = left.AddSet(st.Table(w.Table).Missing(r))
		}
		if !left.Empty() {
			w.Ranges, w.Recompute = left, nil
			out = append(out, w)
		}
	}
	return out
}

func describeWork(ws []events.CatchUpWork) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%s %s", w.Snapshot, strings.Join(interval.Set(w.Ranges).Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}

func decideFinalize(st *projections.State, c *commands.Finalize) (decision, error) {
	pl, ok := st.Plans[c.Plan]
	if !ok {
		return decision{}, commands.Errorf(commands.CodeNotFound, "plan", "unknown plan %q", c.Plan)
	}
	if !pl.Accepted() {
		return decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q has not been promoted", c.Plan)
	}
	if pl.Finalized {
		return decision{reply: commands.Reply{Message: "already finalized"}}, nil
	}
	env := st.Env(pl.Built.Env)
	if env.Generation != pl.Decision.Generation {
		return decision{}, commands.Errorf(commands.CodeConflict, "plan", "environment %s moved to generation %d after plan %q was promoted", env.Name, env.Generation, c.Plan)
	}
	p := events.EnvironmentFinalized{Env: pl.Built.Env, Plan: c.Plan, Generation: env.Generation}
	return decision{payloads: []events.Payload{p}, expect: expectSubjects(st.SubjectSeq, p.Subject())}, nil
}

func decideFailRun(st *projections.State, c *commands.FailRun) (decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, false, c.At)
	if err != nil {
		return decision{}, err
	}
	p := events.RunFailed{Snapshot: sn.Snapshot, Ranges: set, RunKind: c.RunKind, RunID: c.RunID, Worker: c.Worker,
		ExitStatus: c.ExitStatus, Error: c.Error, StderrTail: c.StderrTail, Attempt: c.Attempt, Final: c.Final}
	return decision{payloads: []events.Payload{p}, expect: expectSubjects(st.SubjectSeq, p.Subject())}, nil
}

// dependencyCycle returns the path back to model when depending on deps
// (with every other model at its latest registered version) closes a
// cycle, or nil.
func dependencyCycle(st *projections.State, model string, deps []string) []string {
	seen := map[string]bool{}
	var walk func(m string, path []string) []string
	walk = func(m string, path []string) []string {
		if m == model {
			return append(path, m)
		}
		if seen[m] {
			return nil
		}
		seen[m] = true
		latest := st.LatestVersion(m)
		if latest == nil {
			return nil
		}
		for _, d := range latest.DependsOn {
			if p := walk(d, append(path, m)); p != nil {
				return p
			}
		}
		return nil
	}
	for _, d := range deps {
		if p := walk(d, []string{model}); p != nil {
			return p
		}
	}
	return nil
}
