package decide

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/replay"
)

// rolledBack rolls env back (to: 0 for the default) at clock at and
// returns the recorded event.
func (w *world) rolledBack(env string, to uint64, at time.Time) events.EnvironmentRolledBack {
	w.tb.Helper()
	dec := w.must(&commands.Rollback{Env: env, ToGeneration: to}, at)
	if len(dec.Events) != 1 || dec.Reply.Rollback == nil {
		w.tb.Fatalf("rollback: %d events, reply %+v", len(dec.Events), dec.Reply)
	}
	return dec.Events[0].(events.EnvironmentRolledBack)
}

// records is the world's log as stored records.
func (w *world) records() []events.Record {
	out := make([]events.Record, len(w.log))
	for i, ev := range w.log {
		out[i] = events.Record{Seq: uint64(i + 1), Subject: ev.Payload.Subject(), Event: ev}
	}
	return out
}

// TestRollbackDefault: prod served events v1 (generation 1), then v2
// (plan p2, generation 2); a rollback puts v1 back as generation 3, in
// one event, recomputing nothing; the demoted v2's scheduler is fenced,
// and the restored v1's missing ready intervals are the scheduler's work.
func TestRollbackDefault(t *testing.T) {
	w := replaced(t, model{})
	covV1 := w.st.Table("events@v1").String()
	ev := w.rolledBack("prod", 0, h(12))
	want := []events.RolledBackModel{{Model: "events", Restored: "events@v1", Table: "events@v1", Demoted: "events@v2"}}
	if ev.Env != "prod" || ev.FromGeneration != 2 || ev.ToGeneration != 1 || ev.Generation != 3 || !slices.Equal(ev.Models, want) || len(ev.Repairs) != 0 {
		t.Fatalf("rollback %+v", ev)
	}
	env := w.st.Env("prod")
	if env.Generation != 3 || w.incumbent("prod", "events") != "events@v1" {
		t.Fatalf("after the rollback: generation %d, incumbent %s", env.Generation, w.incumbent("prod", "events"))
	}
	if got := w.st.Table("events@v1").String(); got != covV1 {
		t.Fatalf("the rollback changed v1's coverage: %s, was %s", got, covV1)
	}
	// Fencing: the scheduler that read generation 2 (serving v2) is stale.
	ce := w.refused(&commands.AdvanceScheduler{Env: "prod", Generation: 2}, h(12), commands.CodeStaleGeneration)
	if ce.Field != "generation" {
		t.Fatalf("stale advance: %v", ce)
	}
	// At generation 3 the scheduler fills v1's missing ready intervals
	// (v1 last ran until 10:00), never v2's.
	advs := w.advance("prod", h(12))
	if len(advs) != 1 || advs[0].Snapshot != "events@v1" || advs[0].Generation != 3 || !interval.Set(advs[0].Ranges).Equal(rs(hrs(10, 12))) {
		t.Fatalf("advances after the rollback: %+v", advs)
	}
	// A retry with the same id is a duplicate and returns the decision.
	cmd := &commands.Rollback{Env: "prod"}
	w.must(cmd, h(13))
	seq := w.st.Seq
	dec, err := w.again(cmd)
	if err != nil || !dec.Reply.Duplicate || dec.Reply.Rollback == nil || dec.Reply.Rollback.Generation != 4 || w.st.Seq != seq {
		t.Fatalf("retry: %+v %v", dec.Reply, err)
	}
}

// TestRollbackTo: --to restores the incumbents of that generation; the
// default restores those of the generation before the current one, so a
// second default rollback undoes the first.
func TestRollbackTo(t *testing.T) {
	w := replaced(t, model{})
	w.hourly("events", "v3")
	w.plan("p3", "prod", map[string]string{"events": "v3"}, h(12))
	w.backfill("p3", h(12))
	if pd := w.decided("p3", h(12)); pd.Outcome != events.Accepted {
		t.Fatalf("p3: %s %v", pd.Outcome, pd.Codes)
	}
	ev := w.rolledBack("prod", 1, h(13))
	if ev.FromGeneration != 3 || ev.ToGeneration != 1 || ev.Generation != 4 || ev.Models[0].Restored != "events@v1" || ev.Models[0].Demoted != "events@v3" {
		t.Fatalf("rollback --to 1: %+v", ev)
	}
	ev = w.rolledBack("prod", 0, h(14))
	if ev.ToGeneration != 3 || ev.Models[0].Restored != "events@v3" || ev.Models[0].Demoted != "events@v1" || w.st.Env("prod").Generation != 5 {
		t.Fatalf("default rollback from generation 4: %+v", ev)
	}
	// Generation 2 is still known: v2.
	ev = w.rolledBack("prod", 2, h(15))
	if ev.Models[0].Restored != "events@v2" || w.incumbent("prod", "events") != "events@v2" {
		t.Fatalf("rollback --to 2: %+v", ev)
	}
}

// TestRollbackRefusals: hostile or impossible rollbacks are refused with
// the field named, and nothing is appended.
func TestRollbackRefusals(t *testing.T) {
	one := deployed(t, h(6), model{name: "events"})
	ce := one.refused(&commands.Rollback{Env: "prod"}, h(7), commands.CodeConflict)
	if ce.Field != "to_generation" || !strings.Contains(ce.Message, "nothing to roll back to") {
		t.Fatalf("rollback of the first generation: %v", ce)
	}
	ce = one.refused(&commands.Rollback{Env: "staging"}, h(7), commands.CodeNotFound)
	if ce.Field != "env" {
		t.Fatalf("unknown env: %v", ce)
	}

	w := replaced(t, model{})
	for _, to := range []uint64{2, 3, 99} {
		ce := w.refused(&commands.Rollback{Env: "prod", ToGeneration: to}, h(12), commands.CodeConflict)
		if ce.Field != "to_generation" || !strings.Contains(ce.Message, "earlier generation") {
			t.Fatalf("rollback --to %d: %v", to, ce)
		}
	}
	// A plan that sets the incumbents again moves the generation without
	// changing them: rolling back to the generation before restores
	// nothing.
	w.plan("same", "prod", map[string]string{"events": "v2"}, h(12))
	if pd := w.decided("same", h(12)); pd.Outcome != events.Accepted {
		t.Fatalf("same: %s %v", pd.Outcome, pd.Codes)
	}
	ce = w.refused(&commands.Rollback{Env: "prod"}, h(12), commands.CodeConflict)
	if ce.Field != "to_generation" || !strings.Contains(ce.Message, "nothing to roll back") {
		t.Fatalf("rollback to the same incumbents: %v", ce)
	}
	// A model added since the target generation is not removed.
	w.hourly("rollup", "v1", "events")
	w.deploy("prod", "add", map[string]string{"rollup": "v1"}, h(13))
	ce = w.refused(&commands.Rollback{Env: "prod", ToGeneration: 1}, h(13), commands.CodeConflict)
	if ce.Field != "to_generation" || !strings.Contains(ce.Message, "rollup") {
		t.Fatalf("rollback to before rollup existed: %v", ce)
	}
	for _, c := range []commands.Rollback{{}, {Env: "bad env"}, {Env: "-prod"}} {
		c.ID = "r1"
		err := c.Validate()
		if ce, ok := err.(*commands.Error); !ok || ce.Field != "env" {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if ce := w.refused(&commands.Rollback{Env: "prod", ToGeneration: 1 << 62}, h(13), commands.CodeConflict); ce.Field != "to_generation" {
		t.Fatalf("rollback --to 2^62: %v", ce)
	}
}

// TestRollbackRetiredTable: a rollback to a generation whose table the
// janitor retired is refused naming to_generation; within the retention
// the janitor keeps the table, so the rollback works.
func TestRollbackRetiredTable(t *testing.T) {
	w := replaced(t, model{}) // v1 demoted at 11:00
	week := 7 * 24 * time.Hour
	// Within the retention: v1's table is kept although its grace is over.
	if got := w.retirableKeeping(h(11+25), week); got != nil {
		t.Fatalf("retirable within the retention: %v", got)
	}
	r := retireCmd("events@v1")
	r.RetainMS = week.Milliseconds()
	ce := w.refused(r, h(11+25), commands.CodeConflict)
	if ce.Field != "tables[0]" || !strings.Contains(ce.Message, "within the retention") {
		t.Fatalf("retire within the retention: %v", ce)
	}
	// A retire_tables without retain_ms keeps the default 7 days.
	r = retireCmd("events@v1")
	r.RetainMS = 0
	w.refused(r, h(11+25), commands.CodeConflict)
	// After it, the table goes, and a rollback to generation 1 is refused.
	after := h(11).Add(week).Add(time.Second)
	if got := w.retirableKeeping(after, week); !slices.Equal(got, []string{"events@v1"}) {
		t.Fatalf("retirable after the retention: %v", got)
	}
	r = retireCmd("events@v1")
	r.RetainMS = week.Milliseconds()
	dec := w.must(r, after)
	if ev := dec.Events[0].(events.TableRetired); ev.RetainMS != week.Milliseconds() {
		t.Fatalf("retirement %+v", ev)
	}
	ce = w.refused(&commands.Rollback{Env: "prod"}, after, commands.CodeConflict)
	if ce.Field != "to_generation" || !strings.Contains(ce.Message, "events@v1") || !strings.Contains(ce.Message, "retired") {
		t.Fatalf("rollback to a retired table: %v", ce)
	}
}

// TestRetentionRunsFromRollback: a rollback demotes too: the table it
// demotes is kept for the retention from the rollback; a candidate that
// was never an incumbent is kept for the grace only.
func TestRetentionRunsFromRollback(t *testing.T) {
	w := replaced(t, model{})
	w.hourly("events", "v9")
	w.plan("p9", "prod", map[string]string{"events": "v9"}, h(11)) // open until the rollback closes it
	w.rolledBack("prod", 0, h(12))                                 // demotes v2
	week := 7 * 24 * time.Hour
	got := w.retirableKeeping(h(12+25), week)
	if !slices.Equal(got, []string{"events@v9"}) {
		t.Fatalf("retirable a day after the rollback: %v, want only the never-promoted candidate", got)
	}
	if got := w.retirableKeeping(h(12).Add(week).Add(time.Second), week); !slices.Equal(got, []string{"events@v2", "events@v9"}) {
		t.Fatalf("retirable after the retention: %v", got)
	}
}

// TestRollbackPlansAndRepairs: a plan built against the generation
// rolled back is conflicting_plan at promote; the demoted snapshot's open
// repair debt closes with the rollback, which lists it.
func TestRollbackPlansAndRepairs(t *testing.T) {
	w := standard(t, nil, []int{1})
	w.tick("prod", h(11))
	if pd := w.decided("p1", at1107); pd.Outcome != events.Accepted || w.openRepairs() != 1 {
		t.Fatalf("p1: %s %v, %d open repairs", pd.Outcome, pd.Codes, w.openRepairs())
	}
	w.hourly("events", "v3")
	w.plan("p3", "prod", map[string]string{"events": "v3"}, h(11).Add(10*time.Minute))
	w.backfill("p3", h(11).Add(10*time.Minute))
	debt := w.st.OpenRepairs()[0]
	ev := w.rolledBack("prod", 0, h(11).Add(20*time.Minute))
	if len(ev.Repairs) != 1 || ev.Repairs[0] != (events.RolledBackRepair{Plan: "p1", Model: "events", Snapshot: "events@v2", OpenSeq: debt.OpenSeq}) {
		t.Fatalf("repairs closed: %+v", ev.Repairs)
	}
	if w.openRepairs() != 0 || debt.RolledBackSeq != w.st.Seq {
		t.Fatalf("after the rollback: %d open repairs, debt %+v", w.openRepairs(), debt)
	}
	if pd := w.decided("p3", h(11).Add(30*time.Minute)); pd.Outcome != events.Rejected || !slices.Equal(pd.Codes, []string{"conflicting_plan"}) {
		t.Fatalf("p3 after the rollback: %s %v", pd.Outcome, pd.Codes)
	}
	// Finalizing p1 is refused: the env moved past its generation.
	ce := w.refused(&commands.Finalize{Plan: "p1"}, h(12), commands.CodeConflict)
	if ce.Field != "plan" {
		t.Fatalf("finalize after rollback: %v", ce)
	}
}

// TestReplayReproducesRollbacks: replay's re-evaluation reproduces every
// recorded rollback (no divergence), and finds a doctored one.
func TestReplayReproducesRollbacks(t *testing.T) {
	w := replaced(t, model{})
	w.rolledBack("prod", 0, h(12))
	w.rolledBack("prod", 0, h(13))
	w.rolledBack("prod", 1, h(14))
	recs := w.records()
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
	n, doctored := 0, uint64(0)
	for i := range recs {
		if rb, ok := recs[i].Event.Payload.(events.EnvironmentRolledBack); ok {
			n++
			if n == 2 {
				doctored = recs[i].Seq
				rb.Models = []events.RolledBackModel{{Model: "events", Restored: "events@v9", Table: "events@v9", Demoted: "events@v1"}}
				recs[i].Event.Payload = rb
			}
		}
	}
	// The doctored rollback diverges (and so does the next one, decided on
	// the state it left).
	divs := replay.Verify(recs)
	if n != 3 || len(divs) == 0 || divs[0].Seq != doctored || divs[0].Field != "models" || divs[0].Plan != "env prod" {
		t.Fatalf("%d rollbacks; divergences of the doctored log: %v", n, divs)
	}
	rows := replay.Audit(recs, replay.Filter{Env: "prod"})
	found := false
	for _, r := range rows {
		found = found || (r.Type == string(events.TypeEnvironmentRolledBack) && strings.Contains(r.Summary, "rolled back from generation 2 to generation 1"))
	}
	if !found {
		t.Fatalf("audit rows: %+v", rows)
	}
}
