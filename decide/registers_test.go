package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
)

func hourlyReg(model, version string, deps ...string) commands.RegisterSnapshot {
	return commands.RegisterSnapshot{Model: model, Version: version, Cron: "@hourly", Start: t0, DependsOn: deps}
}

// TestRegisterSetOracle: a set without a cycle records what registering
// its versions one by one, in its order, records (the oracle: register),
// the versions registered already left out; on random sets of models,
// some registered before.
func TestRegisterSetOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 1))
	for round := range 200 {
		n := 1 + rng.IntN(8)
		var set []commands.RegisterSnapshot
		for i := range n {
			var deps []string
			for j := range i {
				if rng.IntN(3) == 0 {
					deps = append(deps, fmt.Sprintf("m%d", j))
				}
			}
			set = append(set, hourlyReg(fmt.Sprintf("m%d", i), fmt.Sprintf("v%d", rng.IntN(2)), deps...))
		}
		// Some registered before, identically, in both worlds.
		one, all := newWorld(t), newWorld(t)
		for _, r := range set {
			if rng.IntN(4) == 0 {
				one.register(r)
				all.register(r)
			}
		}
		var want []events.Payload
		for _, r := range set {
			d := one.must(&r, t0)
			want = append(want, d.Events...)
		}
		d := all.must(&commands.RegisterSnapshots{Snapshots: set}, t0)
		if !reflect.DeepEqual(d.Events, want) {
			t.Fatalf("round %d: the set recorded %v, one by one %v", round, d.Events, want)
		}
		if len(d.Reply.Registered) != len(want) {
			t.Fatalf("round %d: reply registered %v, %d events", round, d.Reply.Registered, len(want))
		}
		for i, id := range d.Reply.Registered {
			if want[i].(events.SnapshotRegistered).Snapshot != id {
				t.Fatalf("round %d: reply registered %v", round, d.Reply.Registered)
			}
		}
		if len(one.st.Snapshots) != len(all.st.Snapshots) {
			t.Fatalf("round %d: %d snapshots one by one, %d by the set", round, len(one.st.Snapshots), len(all.st.Snapshots))
		}
		for id, sn := range one.st.Snapshots {
			if all.st.Snapshots[id] == nil || all.st.Snapshots[id].Fingerprint != sn.Fingerprint {
				t.Fatalf("round %d: %s differs", round, id)
			}
		}
	}
}

// TestRegisterSetAllOrNothing: a set is refused whole, naming the
// registration: a cycle within it, or through a registered model; a
// version registered with another definition; two of its tables
// sharing a warehouse table. A set that registers nothing new appends
// nothing; a retry is a duplicate.
func TestRegisterSetAllOrNothing(t *testing.T) {
	w := newWorld(t)
	cycle := []commands.RegisterSnapshot{hourlyReg("raw", "v1", "rollup"), hourlyReg("events", "v1", "raw"), hourlyReg("rollup", "v1", "events")}
	ce := w.refused(&commands.RegisterSnapshots{Snapshots: cycle}, t0, commands.CodeInvalid)
	if ce.Field != "snapshots[0].depends_on" || !strings.Contains(ce.Message, "dependency cycle: raw -> rollup -> events -> raw") {
		t.Fatalf("cycle within the set: %v", ce)
	}
	// register alone would take raw@v1 (its upstream unknown yet).
	if len(w.st.Snapshots) != 0 {
		t.Fatalf("registered %v", w.st.Snapshots)
	}
	// Through a registered model: late depends on the set's base.
	w.hourly("late", "v1", "base")
	ce = w.refused(&commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("other", "v1"), hourlyReg("base", "v1", "late")}}, t0, commands.CodeInvalid)
	if ce.Field != "snapshots[1].depends_on" || !strings.Contains(ce.Message, "base -> late -> base") {
		t.Fatalf("cycle through a registered model: %v", ce)
	}
	// The set's version of late replaces the registered one's edges.
	d := w.must(&commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("late", "v2"), hourlyReg("base", "v1", "late")}}, t0)
	if len(d.Events) != 2 || !reflect.DeepEqual(d.Reply.Registered, []string{"late@v2", "base@v1"}) {
		t.Fatalf("the set that breaks the cycle: %d events, registered %v", len(d.Events), d.Reply.Registered)
	}
	// A version registered with another definition refuses the set.
	changed := hourlyReg("base", "v1", "late")
	changed.Cron = "@daily"
	ce = w.refused(&commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("fresh", "v1"), changed}}, t0, commands.CodeConflict)
	if ce.Field != "snapshots[1].version" || !strings.Contains(ce.Message, "base@v1 is already registered with a different definition") {
		t.Fatalf("a changed version: %v", ce)
	}
	if w.st.Snapshots["fresh@v1"] != nil {
		t.Fatal("fresh@v1 registered by a refused set")
	}
	// Nothing new: nothing appended.
	d = w.must(&commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("late", "v2"), hourlyReg("base", "v1", "late")}}, t0)
	if len(d.Events) != 0 || d.Reply.Registered != nil || !strings.Contains(d.Reply.Message, "already registered") {
		t.Fatalf("a set registered already: %+v", d)
	}
	// A retry of a set is a duplicate.
	set := &commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("a", "v1"), hourlyReg("b", "v1", "a")}}
	w.must(set, t0)
	d, err := w.again(set)
	if err != nil || len(d.Events) != 0 || !d.Reply.Duplicate {
		t.Fatalf("retry: %+v %v", d, err)
	}
	// Two of the set's tables sharing a warehouse table (a forced digest
	// collision).
	tableName = func(id string) string {
		if strings.HasPrefix(id, "x@") || strings.HasPrefix(id, "y@") {
			return "xy__000000000000"
		}
		return models.TableName(id)
	}
	t.Cleanup(func() { tableName = models.TableName })
	ce = w.refused(&commands.RegisterSnapshots{Snapshots: []commands.RegisterSnapshot{hourlyReg("x", "v1"), hourlyReg("y", "v1")}}, t0, commands.CodeInvalid)
	if ce.Field != "snapshots[1].version" || !strings.Contains(ce.Message, "x@v1") {
		t.Fatalf("a collision within the set: %v", ce)
	}
}
