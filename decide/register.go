package decide

import (
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
)

// register records a version's definition. Every version owns the table
// named after it until a plan binds a forward-only one to its incumbent's
// table (see tableOf). Registering the same definition again is a
// duplicate; a different definition under the same version is refused.
func register(st *projections.State, c *commands.RegisterSnapshot) (Decision, error) {
	reg, err := registered(c, "")
	if err != nil {
		return Decision{}, err
	}
	id := reg.Snapshot
	if prev, ok := st.Snapshots[id]; ok {
		if prev.Fingerprint == reg.Fingerprint {
			return Decision{Reply: commands.Reply{Seq: prev.Seq, Message: "snapshot already registered with this definition"}}, nil
		}
		return Decision{}, redefined(id, prev.Fingerprint, "version")
	}
	if other := tableClash(st, id); other != "" {
		return Decision{}, clash(id, other, "version")
	}
	if cycle := dependencyCycle(st, nil, c.Model, c.DependsOn); cycle != nil {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "depends_on", "dependency cycle: %s", strings.Join(cycle, " -> "))
	}
	return single(st, reg), nil
}

// registerSet records a set of versions' definitions at once, all or
// none: each is decided as register decides it, the dependency cycle
// check reading the set's models at the set's versions (the others at
// their latest). The versions registered already with the same
// definition are left out; one registered with another definition
// refuses the set, naming it. Its events go in one atomic group, in the
// set's order, under the condition that none of their subjects moved.
func registerSet(st *projections.State, c *commands.RegisterSnapshots) (Decision, error) {
	set := make(map[string][]string, len(c.Snapshots))
	for i := range c.Snapshots {
		set[c.Snapshots[i].Model] = c.Snapshots[i].DependsOn
	}
	var evs []events.Payload
	var subjects []string
	var ids []string
	tables := map[string]string{} // warehouse table → the set's table id writing it
	for i := range c.Snapshots {
		s := &c.Snapshots[i]
		at := fmt.Sprintf("snapshots[%d].", i)
		reg, err := registered(s, at)
		if err != nil {
			return Decision{}, err
		}
		id := reg.Snapshot
		if prev, ok := st.Snapshots[id]; ok {
			if prev.Fingerprint == reg.Fingerprint {
				continue
			}
			return Decision{}, redefined(id, prev.Fingerprint, at+"version")
		}
		if other := tableClash(st, id); other != "" {
			return Decision{}, clash(id, other, at+"version")
		}
		if other, ok := tables[tableName(id)]; ok {
			return Decision{}, clash(id, other, at+"version")
		}
		tables[tableName(id)] = id
		if cycle := dependencyCycle(st, set, s.Model, s.DependsOn); cycle != nil {
			return Decision{}, commands.Errorf(commands.CodeInvalid, at+"depends_on", "dependency cycle: %s", strings.Join(cycle, " -> "))
		}
		evs = append(evs, reg)
		subjects = append(subjects, reg.Subject())
		ids = append(ids, id)
	}
	if len(evs) == 0 {
		return Decision{Reply: commands.Reply{Message: fmt.Sprintf("all %d snapshot(s) already registered with these definitions", len(c.Snapshots))}}, nil
	}
	msg := fmt.Sprintf("registering %d snapshot(s), %d already registered with these definitions", len(evs), len(c.Snapshots)-len(evs))
	return Decision{Events: evs, Expect: events.ExpectSubjects(st.SubjectSeq, subjects...), Reply: commands.Reply{Registered: ids, Message: msg}}, nil
}

// registered is the event registering c's version; an invalid schedule
// is refused naming prefix+"cron".
func registered(c *commands.RegisterSnapshot, prefix string) (events.SnapshotRegistered, error) {
	sched, err := interval.NewSchedule(c.Cron, c.IntervalUnit, c.AllowPartials)
	if err != nil {
		return events.SnapshotRegistered{}, commands.Errorf(commands.CodeInvalid, prefix+"cron", "%v", err)
	}
	kind := c.SnapshotKind
	if kind == "" {
		kind = events.Incremental
	}
	id := events.SnapshotID(c.Model, c.Version)
	reg := events.SnapshotRegistered{
		Snapshot: id, Model: c.Model, Version: c.Version, Cron: sched.Cron(), Unit: sched.Unit(),
		Start: c.Start.UTC(), Lookback: c.Lookback, Kind: kind, AllowPartials: c.AllowPartials,
		DependsOn: append([]string{}, c.DependsOn...), Table: id, SQL: c.SQL, TimeColumn: c.TimeColumn,
		BatchSize: c.BatchSize, BatchConcurrency: c.BatchConcurrency, Audits: c.Audits,
		Seed: c.Seed, Macros: c.Macros, Freshness: c.Freshness,
	}
	if len(c.Grain) > 0 {
		reg.Grain = append([]string{}, c.Grain...)
	}
	reg.Fingerprint = models.Fingerprint(reg)
	return reg, nil
}

// redefined refuses registering id again with another definition.
func redefined(id, fingerprint, field string) error {
	return commands.Errorf(commands.CodeConflict, field, "%s is already registered with a different definition (fingerprint %s); register the change as a new version", id, fingerprint)
}

// clash refuses id, whose warehouse table is other's.
func clash(id, other, field string) error {
	return commands.Errorf(commands.CodeInvalid, field, "%s's warehouse table %s is already the table of %s (the names' digests collide): register it under another version", id, tableName(id), other)
}

// tableName is models.TableName (a variable so that a test can force a
// collision, which 48 bits of digest make impractical to find).
var tableName = models.TableName

// tableClash names a table id already registered, other than table, whose
// warehouse table (models.TableName) is table's, or "". Two table ids
// sharing one warehouse table would write each other's rows: a client who
// picks version names could search for a collision of the digest.
//
// A warehouse table name is a table id's model name (cut to fit) before
// its last "__", so only the table ids starting with that part can share
// it: the others are passed over without hashing them (each registration
// and each derived version of a plan would otherwise hash every
// registered snapshot's table id, on the one-at-a-time command path).
func tableClash(st *projections.State, table string) string {
	name := tableName(table)
	prefix := name
	if i := strings.LastIndex(name, "__"); i >= 0 {
		prefix = name[:i]
	}
	for _, sn := range st.Snapshots {
		if sn.Table != table && strings.HasPrefix(sn.Table, prefix) && tableName(sn.Table) == name {
			return sn.Table
		}
	}
	return ""
}

// dependencyCycle returns the path back to model when depending on deps
// (with each model of set depending on what set lists for it, every
// other model at its latest registered version) closes a cycle, or nil.
func dependencyCycle(st *projections.State, set map[string][]string, model string, deps []string) []string {
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
		next, ok := set[m]
		if !ok {
			latest := st.LatestVersion(m)
			if latest == nil {
				return nil
			}
			next = latest.DependsOn
		}
		for _, d := range next {
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
