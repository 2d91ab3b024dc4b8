package sqlrun_test

import (
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// wholeKinds registers pv (incremental, hourly) and, reading it, totals
// (full), per_user (view) and users (seed), the last two read by
// named_totals (full).
func wholeKinds(w *world) map[string]string {
	w.t.Helper()
	w.registerAt(&commands.RegisterSnapshot{Model: "pv", Version: "v1", Cron: "@hourly", SQL: pv(60), TimeColumn: "ts"})
	w.registerAt(&commands.RegisterSnapshot{Model: "totals", Version: "v1", Cron: "@daily", SnapshotKind: events.Full, DependsOn: []string{"pv"},
		SQL: "SELECT user_id, CAST(count(*) AS BIGINT) AS views FROM pv WHERE ts < @end_ts GROUP BY 1"})
	w.registerAt(&commands.RegisterSnapshot{Model: "per_user", Version: "v1", Cron: "@daily", SnapshotKind: events.View, DependsOn: []string{"pv"},
		SQL: "SELECT user_id, CAST(count(*) AS BIGINT) AS views FROM pv GROUP BY 1"})
	w.registerAt(&commands.RegisterSnapshot{Model: "users", Version: "v1", Cron: "@daily", SnapshotKind: events.Seed,
		Seed: "user_id,name\n0,ann\n1,bob\n2,cy\n3,dee\n4,\"eve, jr\"\n"})
	w.registerAt(&commands.RegisterSnapshot{Model: "named", Version: "v1", Cron: "@daily", SnapshotKind: events.Full, DependsOn: []string{"per_user", "users"},
		SQL: "SELECT u.name, p.views FROM per_user p JOIN users u ON u.user_id = p.user_id"})
	return map[string]string{"pv": "v1", "totals": "v1", "per_user": "v1", "users": "v1", "named": "v1"}
}

// checkWholeKinds: prod serves the whole kinds' objects, which verify.
func checkWholeKinds(w *world) {
	w.t.Helper()
	w.synced()
	rows := w.scalar("SELECT count(*) FROM prod.pv")
	for _, q := range []struct{ sql, want string }{
		{"SELECT count(*) FROM prod.totals", "5"},
		{"SELECT sum(views) FROM prod.totals", rows},
		{"SELECT sum(views) FROM prod.per_user", rows},
		{"SELECT count(*) FROM prod.users", "5"},
		{"SELECT name FROM prod.users WHERE user_id = 4", "eve, jr"},
		{"SELECT sum(views) FROM prod.named", rows},
		{"SELECT count(*) FROM prod.named WHERE name = 'eve, jr'", "1"},
	} {
		if got := w.scalar(q.sql); got != q.want {
			w.t.Errorf("%s = %s, want %s", q.sql, got, q.want)
		}
	}
	w.verify()
}

// TestWholeKindsThroughRunner: a plan of a full model, a view and a seed
// over an incremental model, computed by the runner (each whole-kind step
// one batch), promoted and verified; a recomputation of the backfill
// writes nothing new.
func TestWholeKindsThroughRunner(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: wholeKinds(w)})
		item := work.Backfill(*r.Plan)
		// A whole-kind step's ranges, however cut, are one computation
		// over their span.
		spans := map[string]interval.Range{}
		for i, st := range item.Steps {
			if st.Model == "pv" || len(st.Ranges) != 1 {
				continue
			}
			rg := st.Ranges[0]
			spans[st.Snapshot] = rg
			mid := rg.Start.Add(rg.End.Sub(rg.Start) / 2)
			item.Steps[i].Ranges = []interval.Range{interval.R(rg.Start, mid), interval.R(mid, rg.End)}
		}
		if len(spans) != 4 {
			t.Fatalf("whole-kind steps: %v", spans)
		}
		if err := w.run.Run(t.Context(), item, w.now); err != nil {
			t.Fatal(err)
		}
		if d := w.do(&commands.Promote{Plan: "p1"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote: %+v", d)
		}
		checkWholeKinds(w)
		for id, span := range spans {
			recs, err := w.wh.Writers(t.Context(), sqlrun.TableName(id))
			if err != nil || len(recs) != 1 || !recs[0].Query.Start.Equal(span.Start) || !recs[0].Query.End.Equal(span.End) {
				t.Fatalf("writers of %s: %+v, %v; want one computation over %s", id, recs, err, span)
			}
		}
		// Verify recomputes a full model whole, with its writer's query.
		if _, err := w.wh.DB().ExecContext(t.Context(), `UPDATE tidemark."`+sqlrun.TableName("totals@v1")+`" SET views = views + 1 WHERE user_id = 3`); err != nil {
			t.Fatal(err)
		}
		diffs, err := sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "totals")
		if d := diffs["totals"]; err != nil || d.OnlyInView != 1 || d.OnlyInRecompute != 1 || d.Writers["totals@v1"] != 1 || d.Unrecorded != 0 {
			t.Fatalf("VerifyEnv of a tampered full model: %+v, %v", diffs, err)
		}
		// Without its writer record: one check of the whole table with
		// the incumbent's query over its coverage's span.
		if _, err := w.wh.DB().ExecContext(t.Context(), `DELETE FROM tidemark_meta.intervals WHERE table_name = $1`, sqlrun.TableName("totals@v1")); err != nil {
			t.Fatal(err)
		}
		diffs, err = sqlrun.VerifyEnv(t.Context(), w.wh, w.e.Projection(), "prod", "totals")
		if d := diffs["totals"]; err != nil || d.OnlyInView != 1 || d.OnlyInRecompute != 1 || d.Unrecorded != 1 {
			t.Fatalf("VerifyEnv of a tampered full model without its record: %+v, %v", diffs, err)
		}
	})
}

// TestWholeKindsThroughComputer: the same through the worker's Computer,
// from the SQL (kind, seed) the published steps carry.
func TestWholeKindsThroughComputer(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *world) {
		c := &sqlrun.Computer{WH: w.wh}
		r := w.do(&commands.BuildPlan{Plan: "p1", Env: "prod", Versions: wholeKinds(w)})
		items := w.computeAsWorker(c, r)
		if len(items) != 1 {
			t.Fatalf("%d items", len(items))
		}
		for _, st := range items[0].Steps {
			if st.SQL == nil {
				t.Fatalf("step %s carries no SQL", st.Snapshot)
			}
			if st.Model == "users" && (st.SQL.Kind != "seed" || st.SQL.Seed == "" || st.SQL.Query != "") {
				t.Fatalf("the seed's step carries %+v", st.SQL)
			}
		}
		if d := w.do(&commands.Promote{Plan: "p1"}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote: %+v", d)
		}
		checkWholeKinds(w)
	})
}
