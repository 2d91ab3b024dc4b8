package decide

import (
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
	sched, err := interval.NewSchedule(c.Cron, c.IntervalUnit, c.AllowPartials)
	if err != nil {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "cron", "%v", err)
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
	if prev, ok := st.Snapshots[id]; ok {
		if prev.Fingerprint == reg.Fingerprint {
			return Decision{Reply: commands.Reply{Seq: prev.Seq, Message: "snapshot already registered with this definition"}}, nil
		}
		return Decision{}, commands.Errorf(commands.CodeConflict, "version", "%s is already registered with a different definition (fingerprint %s); register the change as a new version", id, prev.Fingerprint)
	}
	if other := tableClash(st, id); other != "" {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "version", "%s's warehouse table %s is already the table of %s (the names' digests collide): register it under another version", id, tableName(id), other)
	}
	if cycle := dependencyCycle(st, c.Model, c.DependsOn); cycle != nil {
		return Decision{}, commands.Errorf(commands.CodeInvalid, "depends_on", "dependency cycle: %s", strings.Join(cycle, " -> "))
	}
	return single(st, reg), nil
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
