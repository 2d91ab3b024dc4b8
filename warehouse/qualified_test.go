package warehouse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A schema-qualified model sushi.hourly has the view sushi__<env>.hourly
// in each environment (the schema created at promotion), separate per
// environment; the query path (Query, through the sandbox on Postgres)
// reads it; a downstream model reads it as the single quoted identifier
// "sushi.hourly", bound to its snapshot table; verify compares that view;
// the janitor's ViewsReading names it; an unqualified model keeps
// <env>.<model> beside it.
func TestQualifiedModelViews(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		ctx := t.Context()
		h1 := hourly("sushi__hourly__v1")
		h1.Name = "sushi.hourly"
		h2 := hourly("sushi__hourly__v2")
		h2.Name = "sushi.hourly"
		h2.SQL = strings.Replace(h2.SQL, "CAST(count(*) AS BIGINT)", "CAST(2 * count(*) AS BIGINT)", 1)
		d1 := daily("sushi__daily__v1", "sushi__hourly__v1")
		d1.Name = "sushi.daily"
		d1.Upstream = map[string]string{"sushi.hourly": "sushi__hourly__v1"}
		d1.SQL = strings.Replace(d1.SQL, "FROM hourly", `FROM "sushi.hourly"`, 1)
		write(t, w, h1, full)
		write(t, w, h2, full)
		write(t, w, d1, full)
		write(t, w, hourly("hourly__p"), full)

		if err := w.Promote(ctx, "prod", map[string]string{"sushi.hourly": h1.Table, "sushi.daily": d1.Table, "hourly": "hourly__p"}); err != nil {
			t.Fatal(err)
		}
		if err := w.Promote(ctx, "dev", map[string]string{"sushi.hourly": h2.Table}); err != nil {
			t.Fatal(err)
		}
		sum := func(q string) int64 {
			t.Helper()
			_, rows, err := w.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if len(rows) != 1 || len(rows[0]) != 1 {
				t.Fatalf("%s: %v", q, rows)
			}
			n, err := asInt64(rows[0][0])
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		}
		for q, want := range map[string]int64{
			"SELECT CAST(sum(views) AS BIGINT) FROM sushi__prod.hourly": sourceRows,
			"SELECT CAST(sum(views) AS BIGINT) FROM sushi__dev.hourly":  2 * sourceRows,
			"SELECT CAST(sum(views) AS BIGINT) FROM sushi__prod.daily":  sourceRows,
			"SELECT CAST(sum(views) AS BIGINT) FROM prod.hourly":        sourceRows,
		} {
			if got := sum(q); got != want {
				t.Errorf("%s = %d, want %d", q, got, want)
			}
		}
		if _, _, err := w.Query(ctx, "SELECT * FROM prod.daily"); err == nil {
			t.Error("sushi.daily's view is also prod.daily")
		}
		if _, _, err := w.Query(ctx, "SELECT * FROM sushi__dev.daily"); err == nil {
			t.Error("dev got sushi.daily's view, which was promoted to prod only")
		}
		if d, err := w.Verify(ctx, "prod", d1, dayRanges()); err != nil || !d.Empty() {
			t.Fatalf("Verify of sushi.daily in prod: %+v, %v", d, err)
		}
		mustExec(t, w, `DELETE FROM tidemark."sushi__daily__v1" WHERE day = $1`, day(2))
		if d, err := w.Verify(ctx, "prod", d1, dayRanges()); err != nil || d.OnlyInRecompute != 1 {
			t.Fatalf("Verify of sushi.daily after a deleted row: %+v, %v", d, err)
		}
		views, err := w.ViewsReading(ctx, h1.Table)
		if err != nil || fmt.Sprint(views) != "[sushi__prod.hourly]" {
			t.Fatalf("ViewsReading(%s) = %v, %v", h1.Table, views, err)
		}
		if err := w.DropTable(ctx, h2.Table); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "sushi__dev.hourly") {
			t.Fatalf("DropTable of a table sushi__dev.hourly reads: %v", err)
		}
		// Promoting again swaps the qualified view in place.
		if err := w.Promote(ctx, "prod", map[string]string{"sushi.hourly": h2.Table}); err != nil {
			t.Fatal(err)
		}
		if got := sum("SELECT CAST(sum(views) AS BIGINT) FROM sushi__prod.hourly"); got != 2*sourceRows {
			t.Fatalf("after the swap sushi__prod.hourly sums %d", got)
		}
	})
}

// A view schema longer than an identifier is refused by the warehouse
// too (a plan refuses it first: models.CheckViewSchema), never cut.
func TestPromoteRefusesLongViewSchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, w *Warehouse) {
		write(t, w, hourly("hourly__l"), Range{day(0), day(1)})
		err := w.Promote(t.Context(), "prod", map[string]string{strings.Repeat("s", 58) + ".hourly": "hourly__l"})
		if err == nil || !strings.Contains(err.Error(), "more than 63 bytes") {
			t.Fatalf("a 64-byte view schema: %v", err)
		}
	})
}
