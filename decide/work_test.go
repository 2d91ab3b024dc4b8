package decide

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// A worker's report names its work item and is checked against the item
// the stream made due: the advances of one tick are one item with a step
// per snapshot; a plan's backfill another.
func TestReportsCheckedAgainstTheirWorkItem(t *testing.T) {
	w := standard(t, nil, nil, sessions)
	advs := w.advance("prod", h(11))
	if len(advs) != 2 {
		t.Fatalf("advances %+v", advs)
	}
	tick := events.WorkID(w.st.Seq-1, events.RunScheduled) // the first of the two advances
	item := w.st.Work[tick]
	if item == nil || item.RunKind != events.RunScheduled || len(item.Steps) != 2 ||
		!item.Steps["events@v1"].Equal(interval.NewSet(hrs(10, 11))) || !item.Steps["sessions@v1"].Equal(interval.NewSet(hrs(10, 11))) {
		t.Fatalf("tick item %s: %+v (items %v)", tick, item, w.st.Work)
	}
	backfill := events.WorkID(w.st.Plans["p1"].BuiltSeq, events.RunBackfill)
	if b := w.st.Work[backfill]; b == nil || !b.Steps["events@v2"].Equal(interval.NewSet(hrs(0, 10))) {
		t.Fatalf("backfill item %s: %+v", backfill, b)
	}

	report := func(snapshot string, work string, r interval.Range) *commands.CompleteWork {
		m, v, _ := events.ParseSnapshotID(snapshot)
		return &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Model: m, Version: v, Ranges: []interval.Range{r}, Work: work}}
	}
	at := h(11).Add(5 * 60e9)
	cases := []struct {
		name  string
		cmd   commands.Command
		code  commands.Code
		field string
	}{
		{"a snapshot the item does not name", report("events@v2", tick, hrs(10, 11)), commands.CodeInvalid, "work"},
		{"a range outside the step", report("sessions@v1", tick, hrs(9, 10)), commands.CodeInvalid, "ranges[0]"},
		{"a range overlapping the step", report("sessions@v1", tick, hrs(9, 11)), commands.CodeInvalid, "ranges[0]"},
		{"another item's snapshot", report("events@v1", backfill, hrs(0, 1)), commands.CodeInvalid, "work"},
		{"an item never made due", report("events@v1", events.WorkID(2, events.RunScheduled), hrs(10, 11)), commands.CodeNotFound, "work"},
		{"an item beyond this view", report("events@v1", events.WorkID(w.st.Seq+1, events.RunScheduled), hrs(10, 11)), commands.CodeUnavailable, "work"},
		{"a failure outside the step", &commands.FailWork{FailRun: commands.FailRun{Model: "sessions", Version: "v1", Ranges: []interval.Range{hrs(11, 12)},
			RunKind: events.RunScheduled, Error: "x", Attempt: 1, Work: tick}}, commands.CodeInvalid, "ranges[0]"},
	}
	for _, c := range cases {
		if ce := w.refused(c.cmd, at, c.code); ce.Field != c.field {
			t.Errorf("%s: refused on %q (%s), want %q", c.name, ce.Field, ce.Message, c.field)
		}
	}

	// Reports within the item are recorded with the item's run kind.
	dec := w.must(report("sessions@v1", tick, hrs(10, 11)), at)
	if ic, ok := dec.Events[0].(events.IntervalsCompleted); !ok || ic.RunKind != events.RunScheduled {
		t.Fatalf("recorded %+v", dec.Events)
	}
	w.must(report("events@v2", backfill, hrs(3, 4)), at)
	w.must(&commands.FailWork{FailRun: commands.FailRun{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(10, 11)},
		RunKind: events.RunScheduled, Error: "exit status 1", Attempt: 1, Work: tick}}, at)
	// complete_intervals with no item stays a manual completion.
	if dec := w.complete("events@v1", at, "", hrs(10, 11)); dec.Events[0].(events.IntervalsCompleted).RunKind != events.RunManual {
		t.Fatalf("manual: %+v", dec.Events)
	}
}
