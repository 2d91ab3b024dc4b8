package decide

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// grace is the tests' grace period, and their retention unless a test
// names another.
const grace = 24 * time.Hour

// retirable lists the tables Retirable returns at now (retention: grace).
func (w *world) retirable(now time.Time) []string { return w.retirableKeeping(now, grace) }

// retirableKeeping lists the tables Retirable returns at now with the
// retention retain.
func (w *world) retirableKeeping(now time.Time, retain time.Duration) []string {
	var out []string
	for _, ev := range Retirable(w.st, now, grace, retain) {
		out = append(out, ev.Table)
	}
	return out
}

// retire sends retire_tables for tables at now with the tests' grace and
// retention.
func retireCmd(tables ...string) *commands.RetireTables {
	return &commands.RetireTables{Tables: tables, GraceMS: grace.Milliseconds(), RetainMS: grace.Milliseconds()}
}

// replaced is prod with events v1 deployed at 06:00 and replaced by v2
// (plan p2, accepted at 11:00): v1's table was last used until 11:00.
func replaced(t *testing.T, v2 model) *world {
	t.Helper()
	w := deployed(t, h(6), model{name: "events"})
	w.run("prod", h(6), h(10))
	v2.name, v2.version = "events", "v2"
	w.register(v2.command())
	w.plan("p2", "prod", map[string]string{"events": "v2"}, h(10))
	w.backfill("p2", h(10))
	if pd := w.decided("p2", h(11)); pd.Outcome != events.Accepted {
		t.Fatalf("p2: %s %v", pd.Outcome, pd.Codes)
	}
	return w
}

// TestRetirableRule is the rule at a state and a time, case by case.
func TestRetirableRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup builds the state; want is what Retirable returns at now.
		setup func(t *testing.T) *world
		now   time.Time
		want  []string
	}{
		{"nothing replaced", func(t *testing.T) *world { return deployed(t, h(6), model{name: "events"}) }, day(30), nil},
		{"demoted, within grace", func(t *testing.T) *world { return replaced(t, model{}) }, h(11 + 24), nil},
		{"demoted, after grace", func(t *testing.T) *world { return replaced(t, model{}) }, h(11 + 24).Add(time.Second), []string{"events@v1"}},
		{"forward-only sharer is incumbent", func(t *testing.T) *world { return replaced(t, model{kind: events.ForwardOnly}) }, day(30), nil},
		{"an open plan's candidate", func(t *testing.T) *world {
			w := replaced(t, model{})
			// p3 sets v1 again: v1's table is a candidate's while p3 is open.
			w.plan("p3", "prod", map[string]string{"events": "v1"}, h(12))
			return w
		}, day(30), nil},
		{"an open rejected plan", func(t *testing.T) *world {
			w := replaced(t, model{})
			w.plan("p3", "prod", map[string]string{"events": "v1"}, h(12))
			w.invalidate("events@v1", h(12), hrs(0, 1))
			if pd := w.decided("p3", h(12)); pd.Outcome != events.Rejected {
				t.Fatalf("p3: %s", pd.Outcome)
			}
			return w
		}, day(30), nil},
		{"a plan closed by another's acceptance", func(t *testing.T) *world {
			w := replaced(t, model{})
			w.plan("p3", "prod", map[string]string{"events": "v1"}, h(12))
			w.hourly("events", "v3")
			w.plan("p4", "prod", map[string]string{"events": "v3"}, h(12))
			w.backfill("p4", h(12))
			if pd := w.decided("p4", h(13)); pd.Outcome != events.Accepted {
				t.Fatalf("p4: %s %v", pd.Outcome, pd.Codes)
			}
			// p3 closed at 13:00: v1's grace runs from there; v2 was
			// demoted at 13:00 too.
			return w
		}, h(13 + 24).Add(time.Second), []string{"events@v1", "events@v2"}},
		{"closed plan, within grace", func(t *testing.T) *world {
			w := replaced(t, model{})
			w.plan("p3", "prod", map[string]string{"events": "v1"}, h(12))
			w.hourly("events", "v3")
			w.plan("p4", "prod", map[string]string{"events": "v3"}, h(12))
			w.backfill("p4", h(12))
			w.decided("p4", h(13))
			return w
		}, h(13 + 24), nil},
		{"incumbent in another env", func(t *testing.T) *world {
			w := replaced(t, model{})
			w.deploy("staging", "s1", map[string]string{"events": "v1"}, h(11))
			return w
		}, day(30), nil},
		{"never used", func(t *testing.T) *world {
			w := replaced(t, model{})
			w.hourly("events", "v9")
			return w
		}, day(30), []string{"events@v1"}},
		{"read by a downstream incumbent", func(t *testing.T) *world {
			w := deployed(t, h(6), model{name: "events"}, model{name: "daily", deps: []string{"events"}})
			w.hourly("daily", "v2", "events")
			w.plan("p2", "prod", map[string]string{"daily": "v2"}, h(7))
			w.backfill("p2", h(7))
			w.decided("p2", h(7))
			return w
		}, day(30), []string{"daily@v1"}},
		{"what an incumbent reads, though its plan closed", func(t *testing.T) *world {
			w := deployed(t, h(6), model{name: "events"}, model{name: "daily", deps: []string{"events"}})
			w.hourly("daily", "v2", "events")
			w.hourly("events", "v3")
			// r sets daily v2 over events v1; q, built after it, sets
			// daily v2 over events v3. r is accepted (q closes), and
			// daily@v2 reads what its newest plan named
			// (projections.State.UpstreamOf): events@v3's table.
			w.plan("r", "prod", map[string]string{"daily": "v2"}, h(7))
			w.plan("q", "prod", map[string]string{"daily": "v2", "events": "v3"}, h(7))
			w.backfill("r", h(7))
			if pd := w.decided("r", h(7)); pd.Outcome != events.Accepted {
				t.Fatalf("r: %s %v", pd.Outcome, pd.Codes)
			}
			if up, _ := w.st.UpstreamOf("daily@v2"); up["events"] != "events@v3" {
				t.Fatalf("daily@v2 reads %v", up)
			}
			return w
		}, day(30), []string{"daily@v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.setup(t)
			if got := w.retirable(tc.now); !slices.Equal(got, tc.want) {
				t.Fatalf("Retirable at %s: %v, want %v", tc.now.Format(time.RFC3339), got, tc.want)
			}
		})
	}
}

// TestRetireTablesRefusals: a named table in use, within grace, never
// used, unknown or retired already is refused with the field named, and
// nothing is appended.
func TestRetireTablesRefusals(t *testing.T) {
	w := replaced(t, model{})
	w.hourly("events", "v9")
	after := h(11 + 24).Add(time.Minute)
	for _, tc := range []struct {
		name, field, text string
		cmd               *commands.RetireTables
		at                time.Time
		code              commands.Code
	}{
		{"incumbent", "tables[0]", "env prod: incumbent events@v2", retireCmd("events@v2"), after, commands.CodeConflict},
		{"within grace", "tables[0]", "within the grace period", retireCmd("events@v1"), h(12), commands.CodeConflict},
		{"second in use", "tables[1]", "in use", retireCmd("events@v1", "events@v2"), after, commands.CodeConflict},
		{"never used", "tables[0]", "never used", retireCmd("events@v9"), after, commands.CodeConflict},
		{"unknown", "tables[0]", "no registered snapshot", retireCmd("ghost@v1"), after, commands.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := w.refused(tc.cmd, tc.at, tc.code)
			if ce.Field != tc.field || !strings.Contains(ce.Message, tc.text) {
				t.Fatalf("refusal %+v: want field %s and %q", ce, tc.field, tc.text)
			}
		})
	}
	dec := w.must(retireCmd("events@v1"), after)
	if len(dec.Events) != 1 {
		t.Fatalf("retire: %d events", len(dec.Events))
	}
	ev := dec.Events[0].(events.TableRetired)
	if ev.Table != "events@v1" || !slices.Equal(ev.Snapshots, []string{"events@v1"}) || ev.JudgedAtSeq != w.st.Seq-1 ||
		!ev.ReleasedAt.Equal(h(11)) || ev.GraceMS != grace.Milliseconds() || len(ev.Coverage) == 0 {
		t.Fatalf("retirement %+v", ev)
	}
	if !w.st.Table("events@v1").Empty() {
		t.Fatalf("the retired table still has coverage %v", w.st.Table("events@v1"))
	}
	if _, ok := w.st.Retired["events@v1"]; !ok {
		t.Fatalf("the table is not marked retired")
	}
	ce := w.refused(retireCmd("events@v1"), after, commands.CodeConflict)
	if !strings.Contains(ce.Message, "retired already") {
		t.Fatalf("second retirement: %v", ce)
	}
	// A late completion (work of a closed plan) into the retired table
	// is refused: the warehouse dropped its rows.
	ce = w.refused(&commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(10, 11)}, RunKind: events.RunBackfill}, after, commands.CodeInvalid)
	if ce.Field != "version" || !strings.Contains(ce.Message, "retired") {
		t.Fatalf("completion into the retired table: %v", ce)
	}
	if got := w.retirable(day(60)); got != nil {
		t.Fatalf("Retirable after the retirement: %v", got)
	}
}

// TestRetiredTableBackfillsAgain: a plan that uses a retired table takes
// it back, and backfills it from its start (its rows are gone).
func TestRetiredTableBackfillsAgain(t *testing.T) {
	w := replaced(t, model{})
	at := h(11 + 25)
	w.must(retireCmd("events@v1"), at)
	pb := w.plan("p5", "prod", map[string]string{"events": "v1"}, at)
	if _, ok := w.st.Retired["events@v1"]; ok {
		t.Fatalf("a plan uses the retired table again, yet it is still retired")
	}
	if len(pb.Candidates) != 1 || len(pb.Candidates[0].Backfill) == 0 || !pb.Candidates[0].Backfill[0].Start.Equal(t0) {
		t.Fatalf("backfill of the reused table: %+v", pb.Candidates)
	}
	w.backfill("p5", at) // completions into the table taken back are recorded
	if !w.st.Table("events@v1").Covers(pb.Candidates[0].Backfill[0]) {
		t.Fatalf("the reused table covers %v", w.st.Table("events@v1"))
	}
}

// TestRetireTablesValidate: hostile input names its field.
func TestRetireTablesValidate(t *testing.T) {
	for _, tc := range []struct {
		cmd   commands.RetireTables
		field string
	}{
		{commands.RetireTables{GraceMS: grace.Milliseconds()}, "tables"},
		{commands.RetireTables{Tables: []string{"events"}, GraceMS: grace.Milliseconds()}, "tables[0]"},
		{commands.RetireTables{Tables: []string{"a@v1", "a@v1"}, GraceMS: grace.Milliseconds()}, "tables[1]"},
		{commands.RetireTables{Tables: []string{"a@v1"}, GraceMS: time.Minute.Milliseconds()}, "grace_ms"},
		{commands.RetireTables{Tables: []string{"a@v1"}}, "grace_ms"},
		{commands.RetireTables{Tables: []string{"a@v1"}, GraceMS: grace.Milliseconds(), RetainMS: time.Minute.Milliseconds()}, "retain_ms"},
		{commands.RetireTables{Tables: []string{"a@v1"}, GraceMS: grace.Milliseconds(), RetainMS: -1}, "retain_ms"},
	} {
		tc.cmd.ID = "r1"
		err := tc.cmd.Validate()
		ce, ok := err.(*commands.Error)
		if !ok || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a rejection of %s", tc.cmd, err, tc.field)
		}
	}
}
