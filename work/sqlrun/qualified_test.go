package sqlrun_test

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work"
)

// Schema-qualified models through the data plane: sushi.agg reads
// sushi.pv as the quoted identifier "sushi.pv" (bound to its snapshot
// table); their tables are sushi__pv__…/sushi__agg__…; the Syncer
// puts their views in sushi__prod and sushi__dev, one schema per
// environment, each on its own version; VerifyEnv compares them; the
// query path reads them by sushi__<env>.<model>.
func TestQualifiedModelsDataPlane(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		w.registerAt(&commands.RegisterSnapshot{Model: "sushi.pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "sushi.pv", Version: "v2", Cron: "@hourly", SQL: pv(30), TimeColumn: "ts"})
		w.registerAt(&commands.RegisterSnapshot{Model: "sushi.agg", Version: "v1", Cron: "@hourly", SQL: aggOf(`"sushi.pv"`), TimeColumn: "hour", DependsOn: []string{"sushi.pv"}})
		w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(10), TimeColumn: "ts"})
		w.deploy("p1", map[string]string{"sushi.pv": "v1", "sushi.agg": "v1", "pv": "v1"})
		w.clean()
		for q, want := range map[string]string{
			"SELECT count(*) FROM sushi__prod.pv":                              "2880",
			"SELECT CAST(sum(views) AS BIGINT) FROM sushi__prod.agg":           "2880",
			"SELECT count(*) FROM prod.pv":                                     "480",
			"SELECT count(*) FROM tidemark." + models.TableName("sushi.pv@v1"): "2880",
		} {
			if got := w.scalar(q); got != want {
				t.Errorf("%s = %s, want %s", q, got, want)
			}
		}

		r := w.do(&commands.BuildPlan{Plan: "d1", Env: "dev", Versions: map[string]string{"sushi.pv": "v2"}})
		if err := w.run.Run(t.Context(), work.Backfill(*r.Plan), w.now); err != nil {
			t.Fatal(err)
		}
		if d := w.do(&commands.Promote{Plan: "d1"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote d1: %+v", d)
		}
		w.countAt("sushi__dev.pv", 1440)
		w.countAt("sushi__prod.pv", 2880)

		// A new upstream version in prod derives sushi.agg's, which reads
		// sushi.pv@v2's table through "sushi.pv".
		w.deploy("p2", map[string]string{"sushi.pv": "v2"})
		w.countAt("sushi__prod.pv", 1440)
		w.clean()
		if got := w.scalar("SELECT CAST(sum(views) AS BIGINT) FROM sushi__prod.agg"); got != "1440" {
			t.Fatalf("sushi__prod.agg sums %s views after p2: it must read sushi.pv@v2", got)
		}
	})
}

// models.ViewOf (which a plan checks) and warehouse.ViewOf (which the
// warehouse creates) name the same view.
func TestViewOfAgrees(t *testing.T) {
	for _, env := range []string{"prod", "dev-1"} {
		for _, m := range []string{"orders", "sushi.orders", "a_b.c-d"} {
			ms, mv := models.ViewOf(env, m)
			ws, wv := warehouse.ViewOf(env, m)
			if ms != ws || mv != wv {
				t.Errorf("ViewOf(%s, %s): models %s.%s, warehouse %s.%s", env, m, ms, mv, ws, wv)
			}
		}
	}
}
