package decide

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// The retirement rule (issue 17's janitor). A snapshot table is retirable
// at a state and a time when all hold:
//
//   - no environment's incumbent writes it or reads it (an upstream table
//     of an incumbent, projections.State.UpstreamOf);
//   - no open plan uses it: a candidate's table, a candidate's incumbent,
//     or a snapshot a candidate reads. A plan is open while its
//     environment's generation is the one it was built at
//     (projections.State.PlanOpen): a rejected plan stays open, since it
//     can be promoted again; any accepted promotion in its environment
//     (its own included) closes it for good, since every later promote of
//     it is rejected conflicting_plan;
//   - it was used once, and its last use ended (projections.State.Released:
//     the accepted promotion that demoted its last incumbent or closed its
//     last open plan) more than the grace period before the time;
//   - when an environment's incumbent wrote or read it, it stopped doing
//     so (projections.State.Demoted: the accepted promotion or rollback
//     that demoted it) more than the retention before the time, so that a
//     rollback within the retention always finds its tables (policy.Rollback
//     refuses one whose tables were retired);
//   - it is not retired already.
//
// Time is an argument: the rule reads no clock.

// Retirable returns the retirements of every table retirable at st and
// now with grace and retention retain, sorted by table: the events
// retire_tables appends.
func Retirable(st *projections.State, now time.Time, grace, retain time.Duration) []events.TableRetired {
	users := TableUsers(st)
	writers := tableWriters(st)
	var out []events.TableRetired
	for _, t := range slices.Sorted(maps.Keys(st.Released)) {
		if ev, err := judge(st, t, "", users, writers, now, grace, retain); err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// TableUsers returns, per table in use at st, who uses it ("env prod:
// incumbent of events", "plan p2 (open): candidate events@v2"), sorted.
func TableUsers(st *projections.State) map[string][]string {
	users := map[string][]string{}
	add := func(id, who string) {
		sn, ok := st.Snapshots[id]
		if !ok {
			return
		}
		if !slices.Contains(users[sn.Table], who) {
			users[sn.Table] = append(users[sn.Table], who)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.Envs)) {
		env := st.Envs[name]
		for _, model := range slices.Sorted(maps.Keys(env.Incumbents)) {
			id := env.Incumbents[model]
			add(id, fmt.Sprintf("env %s: incumbent %s", name, id))
			if sn, ok := st.Snapshots[id]; ok && len(sn.DependsOn) > 0 {
				up, _ := st.UpstreamOf(id)
				for _, m := range slices.Sorted(maps.Keys(up)) {
					add(up[m], fmt.Sprintf("env %s: read by incumbent %s", name, id))
				}
			}
		}
		for _, pl := range st.PlansOpen(name) {
			for _, c := range pl.Built.Candidates {
				who := fmt.Sprintf("plan %s (open): candidate %s", pl.Built.Plan, c.Snapshot)
				if !slices.Contains(users[c.Table], who) {
					users[c.Table] = append(users[c.Table], who)
				}
				if c.Incumbent != "" {
					add(c.Incumbent, fmt.Sprintf("plan %s (open): incumbent %s", pl.Built.Plan, c.Incumbent))
				}
				for _, up := range c.Upstream {
					add(up, fmt.Sprintf("plan %s (open): read by candidate %s", pl.Built.Plan, c.Snapshot))
				}
			}
		}
	}
	for t := range users {
		sort.Strings(users[t])
	}
	return users
}

// tableWriters maps each table to the snapshots that write it, sorted.
func tableWriters(st *projections.State) map[string][]string {
	out := map[string][]string{}
	for id, sn := range st.Snapshots {
		out[sn.Table] = append(out[sn.Table], id)
	}
	for t := range out {
		sort.Strings(out[t])
	}
	return out
}

// judge returns table's retirement at st and now, or why it is not
// retirable: a *commands.Error naming field.
func judge(st *projections.State, table, field string, users, writers map[string][]string, now time.Time, grace, retain time.Duration) (events.TableRetired, error) {
	if len(writers[table]) == 0 {
		return events.TableRetired{}, commands.Errorf(commands.CodeNotFound, field, "table %s: no registered snapshot writes it", table)
	}
	if r, ok := st.Retired[table]; ok {
		return events.TableRetired{}, commands.Errorf(commands.CodeConflict, field, "table %s was retired already (seq %d)", table, r.Seq)
	}
	if u := users[table]; len(u) > 0 {
		return events.TableRetired{}, commands.Errorf(commands.CodeConflict, field, "table %s is in use: %s", table, strings.Join(u, "; "))
	}
	rel, ok := st.Released[table]
	if !ok {
		return events.TableRetired{}, commands.Errorf(commands.CodeConflict, field, "table %s was never used by an environment or a plan: there is nothing to retire", table)
	}
	until := rel.At.Add(grace)
	if !now.After(until) {
		return events.TableRetired{}, commands.Errorf(commands.CodeConflict, field, "table %s was last used until seq %d at %s: within the grace period %s, until %s",
			table, rel.Seq, rel.At.UTC().Format(time.RFC3339), grace, until.UTC().Format(time.RFC3339))
	}
	if dem, ok := st.Demoted[table]; ok {
		if until := dem.At.Add(retain); !now.After(until) {
			return events.TableRetired{}, commands.Errorf(commands.CodeConflict, field, "table %s was an environment's incumbent's until seq %d at %s: within the retention %s (a rollback may restore it), until %s",
				table, dem.Seq, dem.At.UTC().Format(time.RFC3339), retain, until.UTC().Format(time.RFC3339))
		}
	}
	return events.TableRetired{
		Table: table, Snapshots: append([]string(nil), writers[table]...),
		Reason: fmt.Sprintf("no environment's incumbent and no open plan uses it since the accepted promotion at seq %d (%s), more than the grace period %s before",
			rel.Seq, rel.At.UTC().Format(time.RFC3339), grace),
		JudgedAtSeq: st.Seq, JudgedAt: now.UTC(), ReleasedSeq: rel.Seq, ReleasedAt: rel.At,
		GraceMS: grace.Milliseconds(), RetainMS: retain.Milliseconds(), Coverage: slices.Clone([]interval.Range(st.Coverage[table])),
	}, nil
}

// notRetired refuses a completion into a retired table: its rows are
// gone and nothing uses it; recording coverage would claim rows the
// warehouse dropped. The refusal is invalid, not a conflict, so a worker
// gives the work up rather than retrying it (work.Transient).
func notRetired(st *projections.State, sn *projections.Snapshot) error {
	if r, ok := st.Retired[sn.Table]; ok {
		return commands.Errorf(commands.CodeInvalid, "version", "the table %s of %s was retired at seq %d (TableRetired): nothing uses it, its rows are dropped; a plan that uses it again computes it",
			sn.Table, sn.Snapshot, r.Seq)
	}
	return nil
}

// retire decides retire_tables: every named table must be retirable
// (judge), or nothing is appended.
func retire(st *projections.State, c *commands.RetireTables) (Decision, error) {
	users := TableUsers(st)
	writers := tableWriters(st)
	d := Decision{Expect: events.Expect{Subjects: map[string]uint64{}}}
	for i, t := range c.Tables {
		ev, err := judge(st, t, fmt.Sprintf("tables[%d]", i), users, writers, c.At, c.Grace(), c.Retain())
		if err != nil {
			return Decision{}, err
		}
		d.Events = append(d.Events, ev)
		d.Expect.Subjects[ev.Subject()] = st.SubjectSeq[ev.Subject()]
	}
	d.Reply = commands.Reply{Message: fmt.Sprintf("retired %d table(s): %s", len(c.Tables), strings.Join(c.Tables, ", "))}
	return d, nil
}
