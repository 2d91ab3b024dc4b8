package sqlrun_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/views"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// TestDiffPlan, on DuckDB and Postgres: pv v2 (30 rows an hour, the first
// 30 of v1's 60) against prod's v1 over the 48 hours both cover: 1,440
// rows only in v1, none only in v2; the derived agg differs in every row
// (grain hour, user_id: every pair changed, in views and in amount). A forward-only candidate on its incumbent's table is
// skipped, saying so; an unknown plan is not_found.
func TestDiffPlan(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v1", Cron: "@hourly", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}, Grain: []string{"hour", "user_id"}})
		w.deploy("p1", map[string]string{"pv": "v1", "agg": "v1"})
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
		w.plan(&commands.BuildPlan{Plan: "p2", Versions: map[string]string{"pv": "v2"}})
		rep, err := sqlrun.DiffPlan(t.Context(), w.wh, w.e.Projection(), "p2", "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Env != "prod" || len(rep.Models) != 2 || rep.Models[0].TableDiff == nil || rep.Models[1].TableDiff == nil {
			t.Fatalf("diff p2: %+v", rep)
		}
		pvd, agg := rep.Models[0], rep.Models[1]
		if d := pvd.TableDiff; pvd.Model != "pv" || pvd.Incumbent != "pv@v1" || d.CandidateRows != 1440 || d.IncumbentRows != 2880 ||
			d.OnlyInCandidate != 0 || d.OnlyInIncumbent != 1440 || d.Grain != nil || !pvd.Differs() {
			t.Fatalf("pv: %+v %+v", pvd, d)
		}
		d := agg.TableDiff
		if agg.Candidate != "agg@v1+p2" || d.CandidateRows != 240 || d.OnlyInCandidate != 240 || d.OnlyInIncumbent != 240 || d.Changed != 240 ||
			fmt.Sprint(d.ChangedColumns) != "map[amount:240 views:240]" || len(d.Samples) != 10 {
			t.Fatalf("agg: %+v %+v", agg, d)
		}
		// A forward-only candidate writes its incumbent's table.
		w.registerAt(&commands.RegisterSnapshot{Model: "agg", Version: "v3", Cron: "@hourly", SQL: aggOf("pv"), TimeColumn: "hour", DependsOn: []string{"pv"}, SnapshotKind: events.ForwardOnly})
		w.plan(&commands.BuildPlan{Plan: "p3", Versions: map[string]string{"agg": "v3"}})
		rep, err = sqlrun.DiffPlan(t.Context(), w.wh, w.e.Projection(), "p3", "agg")
		if err != nil || len(rep.Models) != 1 || rep.Models[0].Skipped != views.SkipSameTable || rep.Models[0].TableDiff != nil || rep.Models[0].Differs() {
			t.Fatalf("diff p3: %+v %v", rep, err)
		}
		var ce *commands.Error
		if _, err := sqlrun.DiffPlan(t.Context(), w.wh, w.e.Projection(), "nope", ""); !errors.As(err, &ce) || ce.Code != commands.CodeNotFound {
			t.Fatalf("an unknown plan: %v", err)
		}
	})
}
