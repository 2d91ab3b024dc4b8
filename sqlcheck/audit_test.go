//go:build cgo

package sqlcheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
)

// audited is the scenario's events model (ts, user_id, amount) with
// audits.
func audited(as ...models.Audit) Model {
	m := eventsSeries
	m.Audits = as
	return m
}

func custom(sql string) models.Audit {
	return models.Audit{Name: "c", Kind: models.AuditCustom, SQL: sql}
}

// TestAuditsAccepted: built-in audits over the model's columns, and
// custom audits reading @this_model, its CTEs and the bounds, pass.
func TestAuditsAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		a    models.Audit
	}{
		{"not_null", models.Audit{Name: "n", Kind: models.AuditNotNull, Columns: []string{"ts", "user_id"}}},
		{"unique_values", models.Audit{Name: "n", Kind: models.AuditUniqueValues, Columns: []string{"ts"}}},
		{"number_of_rows", models.Audit{Name: "n", Kind: models.AuditNumberOfRows, Threshold: 1}},
		{"accepted_values", models.Audit{Name: "n", Kind: models.AuditAcceptedValues, Column: "user_id", IsIn: []string{"1", "2"}}},
		{"accepted_range numbers", models.Audit{Name: "n", Kind: models.AuditAcceptedRange, Column: "amount", Min: "0", Max: "6.25"}},
		{"accepted_range time", models.Audit{Name: "n", Kind: models.AuditAcceptedRange, Column: "ts", Min: "2026-01-01 00:00:00"}},
		{"custom", custom("SELECT * FROM @this_model WHERE amount < 0")},
		{"custom bounds", custom("SELECT ts FROM @this_model WHERE ts < @start_ts OR ts >= @end_ts -- outside")},
		{"custom CTE and qualified column", custom("WITH x AS (SELECT user_id, count(*) AS n FROM @THIS_MODEL GROUP BY 1) SELECT x.* FROM x JOIN @this_model ON this_model.user_id = x.user_id WHERE n > 100")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Check(t.Context(), audited(c.a), nil); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestAuditsRefused: an audit naming a column the model does not
// return, a bound not of its column's type, and a custom audit that is
// not one SELECT reading @this_model (writes, files, other tables, the
// catalog, several statements, a misspelt column) are refused, naming
// the audit's field.
func TestAuditsRefused(t *testing.T) {
	ok := models.Audit{Name: "ok", Kind: models.AuditNumberOfRows, Threshold: 1}
	for _, c := range []struct {
		name  string
		a     models.Audit
		field string
		msg   string
	}{
		{"not_null column", models.Audit{Name: "n", Kind: models.AuditNotNull, Columns: []string{"ts", "userid"}}, "audits[1].columns[1]", `"userid" is not a column of the model's result (its columns: ts, user_id, amount)`},
		{"unique_values column", models.Audit{Name: "n", Kind: models.AuditUniqueValues, Columns: []string{"id"}}, "audits[1].columns[0]", `"id" is not a column`},
		{"accepted_values column", models.Audit{Name: "n", Kind: models.AuditAcceptedValues, Column: "status", IsIn: []string{"a"}}, "audits[1].column", `"status" is not a column`},
		{"accepted_range column", models.Audit{Name: "n", Kind: models.AuditAcceptedRange, Column: "amt", Min: "0"}, "audits[1].column", `"amt" is not a column`},
		{"accepted_range min", models.Audit{Name: "n", Kind: models.AuditAcceptedRange, Column: "user_id", Min: "zero"}, "audits[1].min", `"zero" is not a value of user_id's type BIGINT`},
		{"accepted_range max", models.Audit{Name: "n", Kind: models.AuditAcceptedRange, Column: "ts", Max: "tomorrow-ish"}, "audits[1].max", `"tomorrow-ish" is not a value of ts's type TIMESTAMP`},
		{"custom delete", custom("DELETE FROM this_model"), "audits[1].sql", "is not one SELECT statement"},
		{"custom several", custom("SELECT * FROM @this_model; SELECT 1"), "audits[1].sql", "has 2 statements: an audit's query is exactly one SELECT"},
		{"custom drop", custom("SELECT * FROM @this_model; DROP TABLE x"), "audits[1].sql", "is not one SELECT statement"},
		{"custom escapes the wrapper", custom("SELECT * FROM @this_model\n) q; SELECT * FROM (SELECT 1"), "audits[1].sql", "does not parse"},
		{"custom file", custom("SELECT * FROM read_text('/etc/passwd')"), "audits[1].sql", "calls the table function read_text"},
		{"custom csv", custom("SELECT * FROM '/etc/passwd'"), "audits[1].sql", "reads"},
		{"custom another table", custom("SELECT * FROM events"), "audits[1].sql", `reads "events", which is neither @this_model nor a CTE in scope`},
		{"custom snapshot table", custom(`SELECT * FROM tidemark."events__abc"`), "audits[1].sql", "reads tidemark.events__abc: a model reads"},
		{"custom catalog", custom("SELECT * FROM @this_model, pg_catalog.pg_authid"), "audits[1].sql", "pg_catalog.pg_authid"},
		{"custom denied function", custom("SELECT current_setting('threads') FROM @this_model"), "audits[1].sql", "current_setting"},
		{"custom forever", custom("SELECT * FROM @this_model, range(0, 10) a WHERE list_reduce([1, 2], (x, y) -> x || y) IS NULL"), "audits[1].sql", "list_reduce"},
		{"custom sleep", custom("SELECT sleep_ms(100000) FROM @this_model"), "audits[1].sql", "sleep_ms"},
		{"custom unknown macro", custom("SELECT * FROM @this_model WHERE ts > @now"), "audits[1].sql", "@now"},
		{"custom parameter", custom("SELECT * FROM @this_model WHERE ts > $1"), "audits[1].sql", "positional parameter"},
		{"custom misspelt column", custom("SELECT * FROM @this_model WHERE amout > 1"), "audits[1].sql", "does not bind"},
		{"custom control character", custom("SELECT * FROM @this_model\x00"), "audits[1].sql", "control character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(t.Context(), audited(ok, c.a), nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if e.Field != c.field || !strings.Contains(e.Error(), c.msg) {
				t.Fatalf("refused on %q: %v; want %q saying %q", e.Field, e, c.field, c.msg)
			}
		})
	}
}

// TestForEngineAudits: register_snapshot's audits are checked at
// register, the refusal naming the audit's field.
func TestForEngineAudits(t *testing.T) {
	check := ForEngine(func(func(*projections.State)) {})
	reg := &commands.RegisterSnapshot{Model: "m", Version: "v1", SQL: "SELECT @start_ts AS ts, 1 AS n", TimeColumn: "ts",
		Audits: []models.Audit{{Name: "a", Kind: models.AuditNotNull, Columns: []string{"n"}}, {Name: "b", Kind: models.AuditCustom, SQL: "SELECT * FROM @this_model WHERE m > 1"}}}
	var ce *commands.Error
	if err := check(t.Context(), reg); !errors.As(err, &ce) || ce.Code != commands.CodeInvalid || ce.Field != "audits[1].sql" || !strings.Contains(ce.Error(), "does not bind") {
		t.Fatalf("a custom audit reading a column the model lacks: %v, want invalid on audits[1].sql", err)
	}
	reg.Audits[1].SQL = "SELECT * FROM @this_model WHERE n > 1"
	if err := check(t.Context(), reg); err != nil {
		t.Fatalf("good audits: %v", err)
	}
}
