package decide

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
)

// buildPlan captures, per candidate (the versions set and every downstream
// incumbent, which gets a derived version), the incumbent, its frontier and
// schedule, the table the candidate writes and its backfill set.
func buildPlan(st *projections.State, c *commands.BuildPlan) (Decision, error) {
	if _, ok := st.Plans[c.Plan]; ok {
		return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "plan %q already exists", c.Plan)
	}
	env := st.Env(c.Env)
	versions := c.Versions
	if c.Changed {
		if versions = Changed(st, c.Env); len(versions) == 0 {
			return Decision{Reply: commands.Reply{Accepted: true, Message: "nothing changed: " + c.Env + " serves the latest registered version of every model"}}, nil
		}
	}
	if err := viewSchemaClash(st, c.Env, versions); err != nil {
		return Decision{}, err
	}
	chosen := map[string]*projections.Snapshot{}
	var set []string
	for model, version := range versions {
		sn, ok := st.Snapshots[events.SnapshotID(model, version)]
		if !ok {
			return Decision{}, commands.Errorf(commands.CodeNotFound, "versions."+model, "snapshot %s is not registered", events.SnapshotID(model, version))
		}
		chosen[model] = sn
		if env.Incumbents[model] != sn.Snapshot {
			// A model set to its incumbent changes nothing downstream.
			set = append(set, model)
		}
	}
	sort.Strings(set)
	var payloads []events.Payload
	var subjects []string
	derived := map[string]bool{}
	for _, model := range st.Downstream(c.Env, set) {
		inc, ok := st.Snapshots[env.Incumbents[model]]
		if _, isSet := chosen[model]; isSet || !ok {
			continue // the plan sets it: that version, not a derived one
		}
		version := models.DerivedVersion(inc.Version, c.Plan)
		id := events.SnapshotID(model, version)
		if !events.ValidVersion(version) {
			return Decision{}, commands.Errorf(commands.CodeInvalid, "plan", "derived version %q for %s is not a valid version", version, model)
		}
		if _, ok := st.Snapshots[id]; ok {
			// Only this plan derives this name, and it does not exist yet:
			// the snapshot was registered by hand (before '+' was reserved).
			return Decision{}, commands.Errorf(commands.CodeConflict, "plan", "%s, the version plan %s derives for %s, is already registered by someone else; use another plan id", id, c.Plan, model)
		}
		reg := inc.SnapshotRegistered
		reg.Snapshot, reg.Version = id, version
		reg.DependsOn = append([]string{}, inc.DependsOn...)
		reg.Audits = slices.Clone(inc.Audits) // a derived version keeps its base's audits
		reg.Table = id
		if reg.Kind == events.ForwardOnly {
			reg.Table = inc.Table
		}
		reg.Upstream = nil
		if other := tableClash(st, reg.Table); other != "" {
			return Decision{}, commands.Errorf(commands.CodeInvalid, "plan", "%s's warehouse table %s is already the table of %s (the names' digests collide); use another plan id", id, tableName(reg.Table), other)
		}
		reg.Fingerprint = models.Fingerprint(reg)
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
		Policy: c.Bounds.Policy(policy.Version),
	}
	binds := false
	for _, model := range models.TopoSort(deps) {
		sn := chosen[model]
		table, err := tableOf(st, env, sn, c.Plan)
		if err != nil {
			return Decision{}, err
		}
		binds = binds || (sn.Kind == events.ForwardOnly && sn.TablePlan == "" && !derived[model])
		cand := events.Candidate{Model: model, Snapshot: sn.Snapshot, Table: table, Derived: derived[model], Upstream: []string{}, Backfill: []interval.Range{}}
		for _, d := range sn.DependsOn {
			if up, ok := chosen[d]; ok {
				cand.Upstream = append(cand.Upstream, up.Snapshot)
			} else if inc := env.Incumbents[d]; inc != "" {
				cand.Upstream = append(cand.Upstream, inc)
			}
		}
		onIncumbent := false
		if incID := env.Incumbents[model]; incID != "" {
			inc := st.Snapshots[incID]
			cand.Incumbent = incID
			cand.IncumbentFrontier = st.Frontier(incID)
			cand.IncumbentCron, cand.IncumbentUnit, cand.IncumbentAllowPartials = inc.Cron, inc.Unit, inc.AllowPartials
			onIncumbent = inc.Table == table
		}
		start := sn.Schedule.Unit().Floor(sn.Start)
		end := BackfillEnd(sn.Schedule, cand.IncumbentFrontier, at)
		if !onIncumbent && start.Before(end) {
			// Whole intervals: the rest of a partial interval is computed
			// from the interval's start; a whole kind's, the whole object
			// from its start (projections.State.WorkOf).
			cand.Backfill = st.WorkOf(sn, st.Table(table).Missing(interval.R(start, end)))
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
	expect := events.ExpectSubjects(st.SubjectSeq, subjects...)
	if binds {
		// Binding a registered forward-only version to a table reads state
		// no subject of this append covers (another plan may bind it at
		// the same time): nothing at all may have changed since the view.
		expect = events.ExpectStream(st.Seq)
	}
	return Decision{Events: payloads, Expect: expect, Reply: commands.Reply{Plan: &p}}, nil
}

// BackfillEnd is where a candidate's backfill set ends: the captured
// incumbent frontier floored to the candidate's unit (not floored with
// allow_partials), or, with no incumbent or an incumbent without coverage
// (captured zero), the candidate's readiness frontier at build.
func BackfillEnd(sched interval.Schedule, captured, at time.Time) time.Time {
	if captured.IsZero() {
		return sched.ReadyFrontier(at)
	}
	if sched.AllowPartials() {
		return captured
	}
	return sched.Unit().Floor(captured)
}

// tableOf is the table a candidate writes: an incremental version its own;
// a forward-only version its incumbent's in the plan's env (never another
// registered version's), or its own with no incumbent; never a whole
// kind's (full, view, seed), which is refused. A forward-only
// version is bound to one table by the first plan that names it; another
// plan that would move it elsewhere is refused.
func tableOf(st *projections.State, env *projections.Env, sn *projections.Snapshot, plan string) (string, error) {
	if sn.Kind != events.ForwardOnly {
		return sn.Table, nil
	}
	want, wantWhy := sn.Snapshot, "no incumbent there: a new table of its own"
	if inc, ok := st.Snapshots[env.Incumbents[sn.Model]]; ok {
		if inc.Kind.Whole() {
			// Its object is replaced whole (or is a view): rows computed
			// interval by interval have no place in it (docs/kinds.md).
			return "", commands.Errorf(commands.CodeInvalid, "versions."+sn.Model,
				"forward-only %s would write the object of its incumbent %s in env %s, a %s version computed whole: register an incremental (or %s) version instead",
				sn.Snapshot, inc.Snapshot, env.Name, inc.Kind, inc.Kind)
		}
		want, wantWhy = inc.Table, "its incumbent "+inc.Snapshot+"'s"
	}
	if want == sn.Table {
		return want, nil
	}
	if sn.TablePlan != "" || !st.Table(sn.Table).Empty() {
		bound := "its own coverage"
		if sn.TablePlan != "" {
			bound = "plan " + sn.TablePlan
		}
		return "", commands.Errorf(commands.CodeConflict, "versions."+sn.Model,
			"forward-only %s writes table %s (bound by %s); in env %s it would write %s (%s): register a new version for this env",
			sn.Snapshot, sn.Table, bound, env.Name, want, wantWhy)
	}
	return want, nil
}

// Changed is what build_plan's changed sets in env: per model, its latest
// version a user registered (no '+'; latest by stream sequence) when env
// serves neither it nor a version derived from it, models env does not
// serve included. Derived versions are the engine's, never chosen.
// Latest is by registration: a definition reverted to an earlier one
// registers nothing (its version exists), so that earlier version is not
// chosen; a plan sets it explicitly (versions).
func Changed(st *projections.State, env string) map[string]string {
	latest := map[string]*projections.Snapshot{}
	for _, sn := range st.Snapshots {
		if strings.Contains(sn.Version, "+") {
			continue
		}
		if l, ok := latest[sn.Model]; !ok || sn.Seq > l.Seq {
			latest[sn.Model] = sn
		}
	}
	serves := st.Env(env).Incumbents
	out := map[string]string{}
	for model, sn := range latest {
		if inc, ok := st.Snapshots[serves[model]]; ok {
			if base, _, _ := strings.Cut(inc.Version, "+"); base == sn.Version {
				continue
			}
		}
		out[model] = sn.Version
	}
	return out
}

// viewSchemaClash refuses a plan whose views could be another
// environment's. A schema-qualified model's view lives in schema
// <schema>__<env> (models.ViewOf), an unqualified one's in <env>: that
// is one-to-one while no environment's name has "__" or starts with '_'
// (sushi.orders in prod and orders in an environment sushi__prod would
// be one view). So a new environment's name may have neither (one named
// so before schema-qualified models existed keeps working, but takes no
// schema-qualified model), and a schema-qualified model is not planned
// into an environment when its view schema is an existing environment's
// name.
func viewSchemaClash(st *projections.State, env string, versions map[string]string) error {
	composite := strings.Contains(env, "__") || strings.HasPrefix(env, "_")
	if _, exists := st.Envs[env]; !exists && composite {
		return commands.Errorf(commands.CodeInvalid, "env", "env %q: a new environment's name may not contain \"__\" nor start with '_' (schema-qualified models' views live in schemas <schema>__<env>, which such a name could be)", env)
	}
	names := make([]string, 0, len(versions))
	for m := range versions {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		schema, view := models.ViewOf(env, m)
		if !strings.Contains(m, ".") {
			continue
		}
		if composite {
			return commands.Errorf(commands.CodeInvalid, "versions."+m, "%s: environment %q takes no schema-qualified model: its name has \"__\" or starts with '_', so its view %s.%s could be another environment's", m, env, schema, view)
		}
		if _, clash := st.Envs[schema]; clash {
			return commands.Errorf(commands.CodeConflict, "versions."+m, "%s: its view in %s would be %s.%s, in the schema of environment %q", m, env, schema, view, schema)
		}
	}
	return nil
}
