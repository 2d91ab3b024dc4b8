//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/warehouse"
)

// sqlmeshModel is a model in SQLMesh's vocabulary over the scenario's
// events (ts TIMESTAMP, user_id, amount).
func sqlmeshModel(sql string, audits ...models.Audit) Model {
	return Model{Name: "daily", TimeColumn: "ts", DependsOn: []string{"events"}, Macros: models.MacrosSQLMesh, SQL: sql, Audits: audits}
}

// TestSQLMeshMacros: SQLMesh's vocabulary is rendered as the warehouse
// renders it: its macros bind (each of them, the inclusive-end filters of
// the warehouse's tests), its custom audits take them, an unknown macro
// is refused at its line and column, and @this_model in a model's SQL is
// refused saying why; tidemark's vocabulary still refuses SQLMesh's names.
func TestSQLMeshMacros(t *testing.T) {
	if warehouse.MacrosSQLMesh != models.MacrosSQLMesh {
		t.Fatalf("warehouse.MacrosSQLMesh %q, models.MacrosSQLMesh %q", warehouse.MacrosSQLMesh, models.MacrosSQLMesh)
	}
	// Every macro models accepts in the vocabulary, in a SELECT list.
	var sel []string
	for _, n := range models.SQLMeshMacros {
		if n != models.MacroThisModel {
			sel = append(sel, "@"+n+" AS "+n)
		}
	}
	up := lookup(eventsSeries)
	for _, c := range []struct {
		name string
		m    Model
	}{
		{"every macro", sqlmeshModel("SELECT ts, " + strings.Join(sel, ", ") + " FROM events")},
		{"timestamps BETWEEN", sqlmeshModel("SELECT ts, user_id FROM events WHERE ts BETWEEN @start_ts AND @end_ts")},
		{"dates BETWEEN", sqlmeshModel("SELECT ts FROM events WHERE CAST(ts AS DATE) BETWEEN @start_ds AND @END_DS")},
		{"numbers", sqlmeshModel("SELECT ts FROM events WHERE epoch_ms(ts) BETWEEN @start_millis AND @end_millis AND @end_epoch > 0")},
		{"audits", sqlmeshModel("SELECT ts, amount FROM events",
			custom("SELECT * FROM @this_model WHERE ts NOT BETWEEN @start_ts AND @end_ts"),
			custom("SELECT * FROM @this_model WHERE CAST(ts AS DATE) > @end_date OR @execution_ds < @start_ds"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Check(t.Context(), c.m, up); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
	for _, c := range []struct {
		name       string
		m          Model
		field, has string
		line, col  int
	}{
		{"unknown macro", sqlmeshModel("SELECT ts\nFROM events WHERE ts > @start_hour"), "sql", "@start_hour", 2, 24},
		{"this_model in the model", sqlmeshModel("SELECT ts\n  FROM @this_model"), "sql", "reading its own table", 2, 8},
		{"unknown macro in an audit", sqlmeshModel("SELECT ts FROM events", custom("SELECT *\nFROM @this_model WHERE @latest_ds IS NULL")), "audits[0].sql", "@latest_ds", 2, 24},
		{"a typed value: text compared needs a cast", sqlmeshModel("SELECT ts FROM events WHERE CAST(ts AS VARCHAR) > @start_ts"), "sql", "does not bind", 0, 0},
		{"tidemark's vocabulary", Model{Name: "daily", TimeColumn: "ts", DependsOn: []string{"events"}, SQL: "SELECT ts FROM events WHERE ts > @start_ds"}, "sql", "only @start_ts and @end_ts", 1, 34},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(t.Context(), c.m, up)
			var e *Error
			if !errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Msg, c.has) || c.line > 0 && (e.Line != c.line || e.Column != c.col) {
				t.Fatalf("got %v (%+v), want field %s saying %q at %d:%d", err, e, c.field, c.has, c.line, c.col)
			}
		})
	}
	// Tables reads the vocabulary's macros too.
	refs, err := Tables(t.Context(), "SELECT * FROM sushi.orders WHERE ds BETWEEN @start_ds AND @end_ds", models.MacrosSQLMesh)
	if err != nil || len(refs) != 1 || refs[0].Qualified() != "sushi.orders" {
		t.Fatalf("Tables: %+v, %v", refs, err)
	}
	// Offsets after macros (their expressions longer than their names)
	// are the SQL's.
	sql := "SELECT @start_ds AS d, @end_millis AS m\nFROM sushi.orders JOIN \"sushi\".\"items\" ON @start_epoch > 0"
	refs, err = Tables(t.Context(), sql, models.MacrosSQLMesh)
	if err != nil || len(refs) != 2 || refs[0].End > len(sql) || refs[1].End > len(sql) || sql[refs[0].Start:refs[0].End] != "sushi.orders" || sql[refs[1].Start:refs[1].End] != `"sushi"."items"` {
		t.Fatalf("Tables after macros: %+v, %v", refs, err)
	}
	if _, err := Tables(t.Context(), "SELECT * FROM t WHERE ds = @start_ds", ""); err == nil {
		t.Fatal("Tables in tidemark's vocabulary took @start_ds")
	}
}
