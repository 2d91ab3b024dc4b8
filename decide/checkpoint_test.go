package decide

import (
	"reflect"
	"testing"

	"github.com/tidemark/tidemark/checkpoint"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
)

// TestCheckpointRoundTripsIssue30State: a checkpoint (format 12) of a
// state holding every piece issue 30 added (audit results and their
// segments, a version's grain, an env's generation history with a
// promotion and rollbacks, the demoted tables, a restatement and its
// work) decodes to the state a fresh fold of the same stream gives, and
// replay --verify reproduces every decision of that stream.
func TestCheckpointRoundTripsIssue30State(t *testing.T) {
	w := audits(t)
	c := model{name: "rollup", version: "v2", deps: []string{"events"}}.command()
	c.SQL, c.TimeColumn, c.Grain = "SELECT hour, n FROM events", "hour", []string{"hour"}
	w.register(c)
	w.audited("events@v2", h(10), []events.AuditOutcome{failed("ids", 3), passed("rows")}, hrs(0, 5))
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids"), failed("rows", 0)}, hrs(5, 10))
	if pd := w.decided("p1", h(10)); pd.Outcome != events.Rejected {
		t.Fatalf("with a failed blocking audit: %s %v", pd.Outcome, pd.Codes)
	}
	w.audited("events@v2", h(10), []events.AuditOutcome{passed("ids"), passed("rows")}, hrs(0, 5))
	if pd := w.decided("p1", h(10)); pd.Outcome != events.Accepted {
		t.Fatalf("after the recompute: %s %v", pd.Outcome, pd.Codes)
	}
	w.run("prod", h(10), h(14))
	seq := w.st.Seq
	_, req := w.restate("events", h(14), hrs(2, 3))
	w.must(&commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Model: "events", Version: "v2", Ranges: []interval.Range{hrs(2, 3)},
		RunID: req.Run, Work: events.WorkID(seq+1, events.RunRestate), Audits: []events.AuditOutcome{failed("ids", 7)}}}, h(14))
	w.restate("events", h(14), hrs(3, 4)) // in flight at the rollback: fenced
	w.rolledBack("prod", 0, h(14))
	w.rolledBack("prod", 2, h(15))

	if divs := replay.Verify(w.records()); len(divs) != 0 {
		t.Fatalf("divergences: %v", divs)
	}
	b, err := checkpoint.Encode(w.st, w.log[len(w.log)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := checkpoint.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	fresh := projections.New()
	for i, ev := range w.log {
		if err := projections.Apply(fresh, uint64(i+1), ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(fresh.Audits["events@v2"]["ids"].Segments) == 0 || len(fresh.Restatements) != 2 || len(fresh.Env("prod").History) != 4 ||
		len(fresh.Demoted) == 0 || len(fresh.Snapshots["rollup@v2"].Grain) != 1 {
		t.Fatalf("the history does not hold every piece: audits %+v, restatements %d, history %d, demoted %d",
			fresh.Audits["events@v2"]["ids"], len(fresh.Restatements), len(fresh.Env("prod").History), len(fresh.Demoted))
	}
	fv, gv := reflect.ValueOf(fresh).Elem(), reflect.ValueOf(got).Elem()
	for i := range fv.NumField() {
		if !reflect.DeepEqual(fv.Field(i).Interface(), gv.Field(i).Interface()) {
			t.Errorf("%s differs after the checkpoint:\nfold       %+v\ncheckpoint %+v", fv.Type().Field(i).Name, fv.Field(i).Interface(), gv.Field(i).Interface())
		}
	}
}
