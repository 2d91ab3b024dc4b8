package sqlrun_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/pgtest"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// computeAsWorker does what `tidemark worker --warehouse` does with the
// items r made due, as serve publishes them: each step described by
// StepSQL (the publisher's hook), each range computed by the Computer,
// and only then the item recorded complete.
func (w *world) computeAsWorker(c *sqlrun.Computer, r commands.Reply) []work.Item {
	w.t.Helper()
	items := w.items(r)
	for _, it := range items {
		for i, st := range it.Steps {
			s, err := sqlrun.StepSQL(w.e.Projection())(w.t.Context(), it.EventSeq, st.Snapshot)
			if err != nil {
				w.t.Fatal(err)
			}
			it.Steps[i].SQL = s
		}
		for i, st := range it.Steps {
			for _, rg := range st.Ranges {
				if _, err := c.Compute(w.t.Context(), work.Batch{Item: it, Step: i, Range: rg, Attempt: 1}); err != nil {
					w.t.Fatalf("%s step %d %s: %v", it.ID, i, rg, err)
				}
			}
		}
		if err := (&inproc.Worker{Handler: w.e, Actor: "worker:test"}).Run(w.t.Context(), it, w.now); err != nil {
			w.t.Fatal(err)
		}
	}
	return items
}

// TestComputerFromPublishedSQL: the SQL a step carries is enough to
// compute it (no projection at the worker): a plan's backfill and a tick
// computed from it promote views whose rows verify, on both engines; a
// model without SQL is recorded done without a row written.
func TestComputerFromPublishedSQL(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		c := &sqlrun.Computer{WH: w.wh}
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@daily", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}})
		w.registerAt(&commands.RegisterSnapshot{Model: "plain", Version: "v1", Cron: "@hourly"})
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"pv": "v1", "agg": "v1", "plain": "v1"}})
		items := w.computeAsWorker(c, r)
		if len(items) != 1 || len(items[0].Steps) != 3 {
			t.Fatalf("the backfill: %+v", items)
		}
		for _, st := range items[0].Steps {
			switch {
			case st.Model == "plain" && st.SQL != nil:
				t.Errorf("a model without SQL carries %+v", st.SQL)
			case st.Model == "agg" && (st.SQL == nil || st.SQL.Unit != interval.Day || st.SQL.Upstream["pv"] == "" || st.SQL.Table != sqlrun.TableName("agg@v1")):
				t.Errorf("agg's step: %+v", st.SQL)
			}
		}
		if d := w.do(&commands.Promote{Plan: "p1"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote: %+v", d)
		}
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "2880" {
			t.Fatalf("prod.pv: %s rows", got)
		}
		// A tick's work, computed the same way (twice: idempotent).
		w.at(hour(49))
		gen := w.do(&commands.Status{Env: "prod"}).Envs[0].Generation
		tick := w.do(&commands.AdvanceScheduler{Env: "prod", Generation: gen})
		w.computeAsWorker(c, tick)
		w.computeAsWorker(c, tick)
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.pv"); got != "2940" {
			t.Fatalf("prod.pv after the tick: %s rows, want 49*60", got)
		}
	})
}

// TestComputerRefusesBadSteps: a step whose SQL lacks a field, or carries
// the engine's error, fails with ErrBadStep naming the field, and writes
// nothing; a step without SQL writes nothing and succeeds.
func TestComputerRefusesBadSteps(t *testing.T) {
	wh := tempDuckDB(t)
	c := &sqlrun.Computer{WH: wh}
	good := work.SQL{Query: pv(60), TimeColumn: "ts", Table: "pv__000000000001", Unit: interval.Hour}
	batch := func(s *work.SQL) work.Batch {
		return work.Batch{Item: work.Item{ID: "work-1-backfill", Steps: []work.Step{{Model: "pv", Snapshot: "pv@v1", SQL: s}}}, Range: interval.R(t0, hour(1)), Attempt: 1}
	}
	for _, tt := range []struct {
		field string
		edit  func(s *work.SQL)
	}{
		{"query", func(s *work.SQL) { s.Query = "" }},
		{"time_column", func(s *work.SQL) { s.TimeColumn = "" }},
		{"table", func(s *work.SQL) { s.Table = "" }},
		{"unit", func(s *work.SQL) { s.Unit = "fortnight" }},
		{"upstream", func(s *work.SQL) { s.Upstream = map[string]string{"raw": ""} }},
		{"error", func(s *work.SQL) { s.Error = "sqlrun: pv@v1: no planned upstream snapshot for [raw]" }},
		{"kind", func(s *work.SQL) { s.Kind, s.TimeColumn = "snapshot", "" }},
		{"time_column", func(s *work.SQL) { s.Kind = "full" }},
		{"seed", func(s *work.SQL) { s.Seed = "a\n1\n" }},
		{"seed", func(s *work.SQL) { s.Kind, s.TimeColumn, s.Query = "seed", "", "" }},
		{"query", func(s *work.SQL) { s.Kind, s.TimeColumn, s.Seed = "seed", "", "a\n1\n" }},
		{"query", func(s *work.SQL) { s.Kind, s.TimeColumn, s.Query = "view", "", "" }},
	} {
		s := good
		tt.edit(&s)
		_, err := c.Compute(t.Context(), batch(&s))
		if !errors.Is(err, sqlrun.ErrBadStep) || !strings.Contains(err.Error(), "sql."+tt.field) {
			t.Errorf("%s: %v, want ErrBadStep naming sql.%s", tt.field, err, tt.field)
		}
	}
	if _, err := c.Compute(t.Context(), work.Batch{Item: work.Item{ID: "x"}, Step: 3}); !errors.Is(err, sqlrun.ErrBadStep) {
		t.Errorf("a step out of range: %v", err)
	}
	if _, err := c.Compute(t.Context(), batch(nil)); err != nil {
		t.Errorf("a step without SQL: %v", err)
	}
	if _, rows, err := wh.Query(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'tidemark'"); err != nil || rows[0][0] != int64(0) {
		t.Fatalf("tables after refused steps: %v %v", rows, err)
	}
	if _, err := c.Compute(t.Context(), batch(&good)); err != nil {
		t.Fatal(err)
	}
	if _, rows, err := wh.Query(t.Context(), `SELECT count(*) FROM tidemark."pv__000000000001"`); err != nil || rows[0][0] != int64(60) {
		t.Fatalf("rows of the good step: %v %v", rows, err)
	}
	// The write records the step's snapshot as the interval's writer (what
	// verify recomputes it with).
	recs, err := wh.Writers(t.Context(), "pv__000000000001")
	if err != nil || len(recs) != 1 || recs[0].Snapshot != "pv@v1" {
		t.Fatalf("writer records: %+v %v", recs, err)
	}
}

// BenchmarkComputer: one worker batch of a day of an hourly model (24
// intervals of 60 rows, one transaction each), as `tidemark worker
// --warehouse` computes it, on DuckDB and on Postgres.
func BenchmarkComputer(b *testing.B) {
	for _, be := range []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"duckdb", func(b *testing.B) string { return filepath.Join(b.TempDir(), "w.duckdb") }},
		{"postgres", func(b *testing.B) string { return pgtest.DSN(b) }},
	} {
		b.Run(be.name, func(b *testing.B) {
			wh, err := warehouse.Open(b.Context(), be.dsn(b), warehouse.Options{})
			if errors.Is(err, warehouse.ErrNoCgo) {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer wh.Close()
			c := &sqlrun.Computer{WH: wh}
			s := &work.SQL{Query: pv(60), TimeColumn: "ts", Table: "pv__000000000001", Unit: interval.Hour}
			it := work.Item{ID: "work-1-backfill", Steps: []work.Step{{Model: "pv", Snapshot: "pv@v1", SQL: s}}}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				day := interval.R(t0.AddDate(0, 0, i%30), t0.AddDate(0, 0, i%30+1))
				if _, err := c.Compute(b.Context(), work.Batch{Item: it, Range: day, Attempt: 1}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/24/1000, "ms/interval")
		})
	}
}
