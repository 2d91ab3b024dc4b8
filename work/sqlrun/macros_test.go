package sqlrun_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// sqlmeshAgg counts pv's rows of each hour with SQLMesh's inclusive end:
// pv has a row at every minute, so an exclusive end read as inclusive
// would count the next hour's first row too (61). One batch an hour
// (batch_size 1): a batch is one query, one row.
const sqlmeshAgg = `SELECT @start_dt AS hour, count(*) AS views FROM pv WHERE ts BETWEEN @start_ts AND @end_ts`

// TestSQLMeshVocabulary: a snapshot in SQLMesh's vocabulary is computed
// in it by the in-process runner (ModelOf) and by a worker from the SQL
// its step carries (StepSQL: macros on the wire), its custom audit too,
// and its rows verify (verify renders it the same way).
func TestSQLMeshVocabulary(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		audit := models.Audit{Name: "hourly", Kind: models.AuditCustom, SQL: "SELECT * FROM @this_model WHERE hour NOT BETWEEN @start_dt AND @end_dt OR views <> 60 OR @end_millis - @start_millis < 3599999"}
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: sqlmeshAgg, TimeColumn: "hour", BatchSize: 1,
			DependsOn: []string{"pv"}, Macros: models.MacrosSQLMesh, Audits: []models.Audit{audit}})
		// The runner: a backfill, promoted, verified.
		w.deploy("p1", map[string]string{"pv": "v1", "agg": "v1"})
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.agg WHERE views = 60"); got != "48" {
			t.Fatalf("prod.agg: %s hours of 60 views, want 48 (%s rows)", got, w.scalar("SELECT count(*) FROM prod.agg"))
		}
		var m struct{ macros string }
		w.e.Projection().Read(func(st *projections.State) {
			wm, ok, err := sqlrun.ModelOf(st, "agg@v1")
			if !ok || err != nil {
				t.Fatalf("ModelOf: %v %v", ok, err)
			}
			m.macros = wm.Macros
		})
		if m.macros != models.MacrosSQLMesh {
			t.Fatalf("ModelOf's Macros %q", m.macros)
		}
		// A worker: a tick computed from its step's SQL.
		w.at(hour(49))
		gen := w.do(&commands.Status{Env: "prod"}).Envs[0].Generation
		tick := w.do(&commands.AdvanceScheduler{Env: "prod", Generation: gen})
		items := w.computeAsWorker(&sqlrun.Computer{WH: w.wh}, tick)
		var carried bool
		for _, it := range items {
			for _, st := range it.Steps {
				if st.Model != "agg" {
					continue
				}
				b, _ := json.Marshal(st.SQL)
				if st.SQL == nil || st.SQL.Macros != models.MacrosSQLMesh || !strings.Contains(string(b), `"macros":"sqlmesh"`) {
					t.Fatalf("agg's step SQL: %s", b)
				}
				carried = true
			}
		}
		if !carried {
			t.Fatalf("the tick computed no step of agg: %+v", items)
		}
		w.clean()
		if got := w.scalar("SELECT count(*) FROM prod.agg WHERE views = 60"); got != "49" {
			t.Fatalf("prod.agg after the tick: %s hours of 60 views, want 49", got)
		}
		// Every batch's audit ran in the vocabulary and passed.
		w.e.Projection().Read(func(st *projections.State) {
			a := st.Audits["agg@v1"]["hourly"]
			if a == nil || a.Results < 2 || a.FailedSeq != 0 {
				t.Errorf("agg's audit: %+v", a)
			}
		})
	})
}
