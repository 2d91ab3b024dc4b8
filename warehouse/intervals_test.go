package warehouse

import (
	"testing"
	"time"
)

// stamp is a model whose one row per write is stamped with the write's
// start: computing a part of an interval gives other rows than computing
// the interval and keeping that part, so a verify must recompute each
// write over its own bounds.
func stamp(snapshot, factor string) Model {
	return Model{Name: "stamp", Table: "stamp__x", TimeColumn: "t", Snapshot: snapshot,
		SQL: `SELECT CAST(@start_ts AS TIMESTAMP) AS t, CAST(` + factor + ` * count(*) AS BIGINT) AS n
			FROM raw.page_views WHERE ts >= @start_ts AND ts < @end_ts`}
}

// Every write records its writer with the rows; a write of an interval
// that overlaps earlier writes leaves them holding only the parts outside
// it, and each part verifies against its writer's query over that
// writer's bounds. Rewriting the whole interval leaves one record, and a
// dropped table none.
func TestWritersOfOverlappingWrites(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		v1, v2 := stamp("stamp@v1", "1"), stamp("stamp@v2", "2")
		h := func(n int) time.Time { return day0.Add(time.Duration(n) * time.Hour) }
		write(t, w, v1, Range{h(0), h(24)})
		write(t, w, v2, Range{h(5), h(6)})
		recs, err := w.Writers(ctx, "stamp__x")
		if err != nil {
			t.Fatal(err)
		}
		fp1, _ := Fingerprint(v1)
		fp2, _ := Fingerprint(v2)
		want := []Written{
			{Table: "stamp__x", Query: Range{h(0), h(24)}, Holds: Range{h(0), h(5)}, Snapshot: "stamp@v1", Fingerprint: fp1, Rows: 1},
			{Table: "stamp__x", Query: Range{h(5), h(6)}, Holds: Range{h(5), h(6)}, Snapshot: "stamp@v2", Fingerprint: fp2, Rows: 1},
			{Table: "stamp__x", Query: Range{h(0), h(24)}, Holds: Range{h(6), h(24)}, Snapshot: "stamp@v1", Fingerprint: fp1, Rows: 1},
		}
		if fp1 == fp2 || len(recs) != len(want) {
			t.Fatalf("writers: %+v", recs)
		}
		for i := range want {
			got := recs[i]
			if got.At.IsZero() {
				t.Errorf("record %d has no time", i)
			}
			got.At = time.Time{}
			if got != want[i] {
				t.Errorf("record %d: %+v, want %+v", i, got, want[i])
			}
		}
		if err := w.Promote(ctx, "prod", map[string]string{"stamp": "stamp__x"}); err != nil {
			t.Fatal(err)
		}
		models := map[string]Model{"stamp@v1": v1, "stamp@v2": v2}
		var byWriter, naive []Check
		for _, r := range recs {
			byWriter = append(byWriter, Check{Model: models[r.Snapshot], Query: r.Query, Rows: r.Holds})
			naive = append(naive, Check{Model: models[r.Snapshot], Query: r.Holds, Rows: r.Holds})
		}
		if d, err := w.VerifyChecks(ctx, "prod", byWriter); err != nil || !d.Empty() {
			t.Fatalf("each part against its writer's query over its bounds: %+v %v", d, err)
		}
		// Recomputed over the parts instead, v1's rows differ (the check
		// can fail).
		if d, err := w.VerifyChecks(ctx, "prod", naive); err != nil || d.OnlyInView != 1 || d.OnlyInRecompute != 2 {
			t.Fatalf("v1's parts recomputed over themselves: %+v %v, want 1 row only in the view, 2 only in the recompute", d, err)
		}

		write(t, w, v1, Range{h(0), h(24)})
		if recs, err := w.Writers(ctx, "stamp__x"); err != nil || len(recs) != 1 || recs[0].Holds != (Range{h(0), h(24)}) || recs[0].Snapshot != "stamp@v1" {
			t.Fatalf("after rewriting the day: %+v %v", recs, err)
		}
		last, ok, err := w.LastWritten(ctx, "stamp__x")
		if err != nil || !ok || last.Query != (Range{h(0), h(24)}) {
			t.Fatalf("LastWritten: %+v %v %v", last, ok, err)
		}
		mustExec(t, w, `DROP VIEW prod."stamp"`)
		if err := w.DropTable(ctx, "stamp__x"); err != nil {
			t.Fatal(err)
		}
		if recs, err := w.Writers(ctx, "stamp__x"); err != nil || len(recs) != 0 {
			t.Fatalf("writers of a dropped table: %+v %v", recs, err)
		}
	})
}
