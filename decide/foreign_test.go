package decide

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
)

// A plan that waits while the environment moves on must not write
// production's table: p-old sets v2 and is never promoted; p-new promotes
// the same v2, then a forward-only v3 takes v2's table over. p-old's
// backfill of v2 would now rewrite rows incumbent v3 serves (found by the
// invariant suite, seed 14639493964735219674).
func TestStalePlanWorkNeverWritesProduction(t *testing.T) {
	w := deployed(t, h(2), model{name: "events"})
	w.hourly("events", "v2")
	w.plan("p-old", "prod", map[string]string{"events": "v2"}, h(3))
	if inc := ForeignTable(w.st, "p-old", "events@v2"); inc != "" {
		t.Fatalf("at build: ForeignTable %q, want none", inc)
	}
	// What a worker asks before it computes the backfill (check_work):
	// the complete_work it would send, judged now, recording nothing.
	check := &commands.CheckWork{CompleteWork: commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{
		Model: "events", Version: "v2", Ranges: w.st.Plans["p-old"].Built.Candidates[0].Backfill,
		RunKind: events.RunBackfill, RunID: "backfill:p-old", Work: events.WorkID(w.st.Plans["p-old"].BuiltSeq, events.RunBackfill)}}}
	if dec := w.decideOnly(check, h(3)); len(dec.Events) != 0 || dec.Reply.Message == "" {
		t.Fatalf("check_work at build: %+v, want an answer and no events", dec)
	}
	w.deploy("prod", "p-new", map[string]string{"events": "v2"}, h(3))
	// v2 is the incumbent: p-old's work writes the incumbent's own table
	// with its own logic, as the scheduler does.
	if inc := ForeignTable(w.st, "p-old", "events@v2"); inc != "" {
		t.Fatalf("v2 promoted: ForeignTable %q, want none", inc)
	}
	w.register(commands.RegisterSnapshot{Model: "events", Version: "v3", Cron: "@hourly", SnapshotKind: events.ForwardOnly})
	w.deploy("prod", "p-fo", map[string]string{"events": "v3"}, h(3))
	if sn := w.st.Snapshots["events@v3"]; sn.Table != "events@v2" {
		t.Fatalf("forward-only v3 writes %s, want v2's table", sn.Table)
	}
	if inc := ForeignTable(w.st, "p-old", "events@v2"); inc != "events@v3" {
		t.Fatalf("v3 serves v2's table: ForeignTable %q, want events@v3", inc)
	}
	check.ID = ""
	if ce := w.refused(check, h(4), commands.CodeInvalid); ce.Field != "run_id" {
		t.Fatalf("check_work of the stale backfill refused on %q: %s", ce.Field, ce.Message)
	}
	// Its id is never a duplicate, not even a recorded command's.
	for id := range w.st.Commands {
		check.ID = id
		break
	}
	if _, err := Decide(w.st, check); err == nil || !strings.Contains(err.Error(), "run_id") {
		t.Fatalf("check_work under a recorded command's id: %v, want the stale refusal", err)
	}
	// The accepted plans' work, and work of no plan, is not judged.
	if inc := ForeignTable(w.st, "p-new", "events@v2"); inc != "" {
		t.Fatalf("accepted plan: ForeignTable %q", inc)
	}
	ce := w.refused(&commands.CompleteIntervals{Model: "events", Version: "v2", Ranges: w.st.Plans["p-old"].Built.Candidates[0].Backfill,
		RunKind: events.RunBackfill, RunID: "backfill:p-old"}, h(4), commands.CodeInvalid)
	if ce.Field != "run_id" {
		t.Fatalf("refused on %q: %s", ce.Field, ce.Message)
	}
	// Scheduled work of v3 on that table is production's own.
	w.complete("events@v3", h(4), events.RunScheduled, hrs(3, 4))
}
