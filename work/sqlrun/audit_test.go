package sqlrun_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// completions passes commands to the engine and keeps the completions.
type completions struct {
	commands.Handler
	mu   sync.Mutex
	seen []commands.CompleteIntervals
}

func (c *completions) Handle(ctx context.Context, cmd commands.Command) commands.Reply {
	if ci, ok := cmd.(*commands.CompleteIntervals); ok {
		c.mu.Lock()
		c.seen = append(c.seen, *ci)
		c.mu.Unlock()
	}
	return c.Handler.Handle(ctx, cmd)
}

// pvAudits are pv(60)'s audits: two pass, a blocking one and a
// non-blocking one fail on user 4's rows (12 an hour).
var pvAudits = []models.Audit{
	{Name: "not_null", Kind: models.AuditNotNull, Columns: []string{"ts", "user_id"}},
	{Name: "number_of_rows", Kind: models.AuditNumberOfRows, Threshold: 24 * 60},
	{Name: "no_user_4", Kind: models.AuditCustom, SQL: "SELECT ts, user_id FROM @this_model WHERE user_id = 4 AND ts >= @start_ts ORDER BY ts"},
	{Name: "users", Kind: models.AuditAcceptedValues, Column: "user_id", IsIn: []string{"0", "1", "2", "3"}, NonBlocking: true},
}

// checkOutcomes fails unless outs are pvAudits' outcomes over one day of
// pv(60) starting at day.
func checkOutcomes(t *testing.T, day time.Time, outs []events.AuditOutcome) {
	t.Helper()
	want := []struct {
		passed bool
		count  int64
	}{{true, 0}, {true, 24 * 60}, {false, 24 * 12}, {false, 24 * 12}}
	if len(outs) != len(want) {
		t.Fatalf("%d outcomes, want %d: %+v", len(outs), len(want), outs)
	}
	for i, o := range outs {
		if o.Audit != pvAudits[i].Name || o.Passed != want[i].passed || o.Count != want[i].count || o.Error != "" {
			t.Errorf("outcome %d: %+v, want %s passed %v count %d", i, o, pvAudits[i].Name, want[i].passed, want[i].count)
		}
	}
	custom := outs[2]
	first := day.Add(4 * time.Minute).Format(time.RFC3339)
	if !slices.Equal(custom.Columns, []string{"ts", "user_id"}) || len(custom.Sample) != warehouse.AuditSampleRows || custom.Sample[0][0] != first || custom.Sample[0][1] != "4" {
		t.Errorf("the custom audit's sample: %v %q, want 5 rows of user 4 from %s", custom.Columns, custom.Sample, first)
	}
}

// The built-in worker audits every batch it commits, over that batch's
// range, and its completion carries the outcomes; the engine records one
// AuditRecorded per outcome (blocking from the definition), and the
// promotion is rejected audit_failed for the blocking audit that failed,
// with audit_warning for the non-blocking one. On both engines.
func TestRunnerAuditsEachBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		rec := &completions{Handler: w.e}
		w.run.Done = &inproc.Worker{Handler: rec, Actor: "test"}
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts", BatchSize: 24, Audits: pvAudits})
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"pv": "v1"}})
		if err := w.run.Run(t.Context(), work.Backfill(*r.Plan), w.now); err != nil {
			t.Fatal(err)
		}
		var batches []interval.Range
		for _, c := range rec.seen {
			if len(c.Audits) == 0 {
				continue
			}
			if len(c.Ranges) != 1 {
				t.Fatalf("a completion with audits of %v", c.Ranges)
			}
			batches = append(batches, c.Ranges[0])
			checkOutcomes(t, c.Ranges[0].Start, c.Audits)
		}
		// Postgres computes the batches at once, in any order.
		slices.SortFunc(batches, func(a, b interval.Range) int { return a.Start.Compare(b.Start) })
		if want := []interval.Range{interval.R(hour(0), hour(24)), interval.R(hour(24), hour(48))}; !slices.Equal(batches, want) {
			t.Fatalf("audited batches %v, want %v", batches, want)
		}

		// The stream: one AuditRecorded per outcome, in the outcomes'
		// order, with its batch's IntervalsCompleted.
		js, err := jetstream.New(w.e.Log().JetStream().Conn())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		recs, err := jstest.ReadLog(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []events.AuditRecorded
		for _, rc := range recs {
			if a, ok := rc.Event.Payload.(events.AuditRecorded); ok {
				recorded = append(recorded, a)
			}
		}
		if len(recorded) != 2*len(pvAudits) {
			t.Fatalf("%d AuditRecorded, want %d", len(recorded), 2*len(pvAudits))
		}
		var ranges []interval.Range
		for i, a := range recorded {
			k := i % len(pvAudits)
			if k == 0 {
				ranges = append(ranges, a.Ranges...)
			}
			if a.Snapshot != "pv@v1" || a.Audit != pvAudits[k].Name || a.Blocking == pvAudits[k].NonBlocking || !slices.Equal(a.Ranges, ranges[len(ranges)-1:]) {
				t.Errorf("AuditRecorded %d: %+v", i, a)
			}
		}
		slices.SortFunc(ranges, func(a, b interval.Range) int { return a.Start.Compare(b.Start) })
		if !slices.Equal(ranges, batches) {
			t.Errorf("AuditRecorded of %v, want %v", ranges, batches)
		}

		d := w.do(&commands.Promote{Plan: "p1"}).Decision
		if d == nil || d.Outcome != events.Rejected || !slices.Contains(d.Codes, policy.CodeAuditFailed) || !slices.Contains(d.Codes, policy.CodeAuditWarning) {
			t.Fatalf("promote: %+v, want rejected audit_failed with audit_warning", d)
		}
		for _, f := range d.Findings {
			// The count sums the failing batches' in the window.
			if f.Code == policy.CodeAuditFailed && (f.Audit != "no_user_4" || f.Count != 2*24*12 || !slices.Equal(f.Ranges, []interval.Range{interval.R(hour(0), hour(48))})) {
				t.Errorf("the audit_failed finding: %+v", f)
			}
		}
	})
}

// `tidemark worker --warehouse` (the Computer) audits each range it
// computes from the step's SQL alone (the audits StepSQL put there) and
// returns the outcomes with the rows, for its complete_work.
func TestComputerAuditsEachRange(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		c := &sqlrun.Computer{WH: w.wh}
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts", BatchSize: 6, Audits: pvAudits})
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"pv": "v1"}})
		items := w.items(r)
		if len(items) != 1 {
			t.Fatalf("%d items", len(items))
		}
		it := items[0]
		s, err := sqlrun.StepSQL(w.e.Projection())(t.Context(), it.EventSeq, "pv@v1")
		if err != nil || s == nil || len(s.Audits) != len(pvAudits) || s.Audits[3].Kind != models.AuditAcceptedValues {
			t.Fatalf("the step's SQL: %+v, %v", s, err)
		}
		it.Steps[0].SQL = s
		for _, day := range []interval.Range{interval.R(hour(0), hour(24)), interval.R(hour(24), hour(48))} {
			res, err := c.Compute(t.Context(), work.Batch{Item: it, Step: 0, Range: day, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows != 24*60 {
				t.Fatalf("%v: %d rows", day, res.Rows)
			}
			checkOutcomes(t, day.Start, res.Audits)
		}
		// A step without audits reports none.
		it.Steps[0].SQL.Audits = nil
		res, err := c.Compute(t.Context(), work.Batch{Item: it, Step: 0, Range: interval.R(hour(0), hour(1)), Attempt: 1})
		if err != nil || res.Audits != nil || res.Rows != 60 {
			t.Fatalf("without audits: %+v, %v", res, err)
		}
	})
}

// The warehouse's bounds of a result are the wire's.
func TestAuditBoundsMatchTheWire(t *testing.T) {
	if warehouse.AuditSampleRows != events.MaxAuditSampleRows || warehouse.AuditSampleColumns != events.MaxAuditColumns ||
		warehouse.AuditValueBytes != events.MaxAuditValue || warehouse.AuditErrorBytes != events.MaxAuditError {
		t.Fatal("the warehouse's audit bounds differ from the events'")
	}
}

// An audit that cannot run (here: a column the model lacks, which the
// register check would have refused) is a failed outcome with its error:
// the batch is computed and recorded all the same.
func TestRunnerAuditThatCannotRun(t *testing.T) {
	w := newWorld(t)
	rec := &completions{Handler: w.e}
	w.run.Done = &inproc.Worker{Handler: rec, Actor: "test"}
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts", BatchSize: 48,
		Audits: []models.Audit{{Name: "broken", Kind: models.AuditCustom, SQL: "SELECT * FROM @this_model WHERE nope > 1"}}})
	r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"pv": "v1"}})
	if err := w.run.Run(t.Context(), work.Backfill(*r.Plan), w.now); err != nil {
		t.Fatal(err)
	}
	var outs []events.AuditOutcome
	for _, c := range rec.seen {
		outs = append(outs, c.Audits...)
	}
	if len(outs) != 1 || outs[0].Passed || !strings.Contains(outs[0].Error, "nope") || len(outs[0].Error) > events.MaxAuditError {
		t.Fatalf("outcomes %+v, want one failed saying why", outs)
	}
	if got := w.scalar(`SELECT count(*) FROM tidemark."` + sqlrun.TableName("pv@v1") + `"`); got != "2880" {
		t.Fatalf("%s rows written", got)
	}
	var done interval.Set
	w.e.Projection().Read(func(st *projections.State) { done = st.SnapshotCoverage("pv@v1") })
	if !done.Covers(interval.R(hour(0), hour(48))) {
		t.Fatalf("recorded %v", done)
	}
}
