package policy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// The rollback rule. A rollback of env to generation G (0: the one before
// the current generation C) puts back the incumbents env had at G, as
// the env's history records them (projections.Env.IncumbentsAt). It is
// refused when:
//
//   - env has no promoted models (field env, not found);
//   - G is not an earlier generation of env: G >= C, or G unknown;
//     generation 0, before the first promotion, served nothing
//     (field to_generation);
//   - a model env serves now had no incumbent at G: a rollback does not
//     remove a model (its view would outlive its incumbent; a model added
//     after G stays until a plan changes it);
//   - G serves what env serves now: nothing to roll back;
//   - a restored incumbent's table, or a table it reads, was retired: its
//     rows are dropped (the janitor keeps every table an incumbent used
//     for the retention, `serve --retain`, so a rollback within it always
//     finds its tables).
//
// An accepted rollback moves the generation to C + 1: the demoted
// snapshots' scheduler is fenced (its advance is stale_generation) and
// every plan built at C is closed (its promotion is conflicting_plan). It
// recomputes nothing; the open repair debt of the demoted snapshots in
// env closes with it (the env no longer serves those tables; the
// scheduler fills every missing ready interval of the restored ones).

// Refusal says why a rollback is refused: Field is the command's field
// it concerns, NotFound whether it names nothing known.
type Refusal struct {
	Field    string
	NotFound bool
	Message  string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Message }

func refuse(field, format string, args ...any) *Refusal {
	return &Refusal{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Rollback decides a rollback of env to generation to (0: the generation
// before the current one) at the view st, at clock at: the event to
// record, or why it is refused. Pure: replay re-evaluates recorded
// rollbacks with it.
func Rollback(st *projections.State, env string, to uint64, at time.Time) (events.EnvironmentRolledBack, *Refusal) {
	e, ok := st.Envs[env]
	if !ok || e.Generation == 0 {
		r := refuse("env", "environment %q has no promoted models: nothing to roll back", env)
		r.NotFound = true
		return events.EnvironmentRolledBack{}, r
	}
	cur := e.Generation
	if to == 0 {
		to = cur - 1
	}
	if to >= cur {
		return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s is at generation %d: a rollback restores an earlier generation, not %d", env, cur, to)
	}
	if to == 0 {
		return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s: generation 0, before its first promotion, served nothing: nothing to roll back to", env)
	}
	target, ok := e.IncumbentsAt(to)
	if !ok {
		return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s has no record of generation %d (its history holds %s)", env, to, historyRange(e))
	}
	for _, model := range slices.Sorted(maps.Keys(e.Incumbents)) {
		if _, ok := target[model]; !ok {
			return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s: model %s (incumbent %s) had no incumbent at generation %d: a rollback does not remove a model", env, model, e.Incumbents[model], to)
		}
	}
	ev := events.EnvironmentRolledBack{Env: env, FromGeneration: cur, ToGeneration: to, Generation: cur + 1, Models: []events.RolledBackModel{},
		EvaluatedAtSeq: st.Seq, EvaluatedAt: at.UTC()}
	demoted := map[string]bool{}
	for _, model := range slices.Sorted(maps.Keys(target)) {
		id, now := target[model], e.Incumbents[model]
		if id == now {
			continue
		}
		sn, ok := st.Snapshots[id]
		if !ok {
			return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s: generation %d's incumbent %s of %s is not registered", env, to, id, model)
		}
		if err := notRetired(st, env, to, sn); err != nil {
			return events.EnvironmentRolledBack{}, err
		}
		ev.Models = append(ev.Models, events.RolledBackModel{Model: model, Restored: id, Table: sn.Table, Demoted: now})
		demoted[now] = true
	}
	if len(ev.Models) == 0 {
		return events.EnvironmentRolledBack{}, refuse("to_generation", "environment %s serves at generation %d the incumbents it had at generation %d: nothing to roll back", env, cur, to)
	}
	for _, r := range st.OpenRepairs() {
		if r.Env == env && demoted[r.Snapshot] {
			ev.Repairs = append(ev.Repairs, events.RolledBackRepair{Plan: r.Plan, Model: r.Model, Snapshot: r.Snapshot, OpenSeq: r.OpenSeq})
		}
	}
	return ev, nil
}

// notRetired refuses restoring sn when its table, or a table it reads,
// was retired.
func notRetired(st *projections.State, env string, to uint64, sn *projections.Snapshot) *Refusal {
	tables := []string{sn.Table}
	if len(sn.DependsOn) > 0 {
		up, _ := st.UpstreamOf(sn.Snapshot)
		for _, m := range slices.Sorted(maps.Keys(up)) {
			if u, ok := st.Snapshots[up[m]]; ok {
				tables = append(tables, u.Table)
			}
		}
	}
	for _, t := range tables {
		if r, ok := st.Retired[t]; ok {
			return refuse("to_generation", "environment %s: generation %d's incumbent %s needs table %s, retired at seq %d (TableRetired, judged at %s): its rows are dropped, so generation %d cannot be restored (the janitor keeps a demoted incumbent's tables for serve --retain)",
				env, to, sn.Snapshot, t, r.Seq, r.Event.JudgedAt.UTC().Format(time.RFC3339), to)
		}
	}
	return nil
}

func historyRange(e *projections.Env) string {
	if len(e.History) == 0 {
		return "no generation"
	}
	return fmt.Sprintf("generations %d to %d", e.History[0].Generation, e.History[len(e.History)-1].Generation)
}
