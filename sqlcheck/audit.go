package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/warehouse"
)

// checkAudits checks each of m's audits against cols, the model's output
// columns: a built-in's columns are columns of them (accepted_range's
// bounds values of its column's type); a custom audit's SQL is one
// SELECT reading only @this_model (those columns) and its CTEs, checked
// as a model's SQL is (statement), and binds. A refusal is an *Error whose
// Field names the audit's field ("audits[2].sql").
func checkAudits(ctx context.Context, sb *sandbox, m Model, cols []column) error {
	for i, a := range m.Audits {
		err := checkAudit(ctx, sb, a, m.Macros, cols)
		var e *Error
		if errors.As(err, &e) {
			e.Field = fmt.Sprintf("audits[%d].%s", i, e.Field)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkAudit checks one audit; a refusal's Field is relative to the
// audit ("sql", "columns[1]").
func checkAudit(ctx context.Context, sb *sandbox, a models.Audit, macros string, cols []column) error {
	typeOf := map[string]string{}
	var names []string
	for _, c := range cols {
		typeOf[c.Name] = c.Type
		names = append(names, c.Name)
	}
	missing := func(field, col string) error {
		return &Error{Field: field, Msg: fmt.Sprintf("%q is not a column of the model's result (its columns: %s)", col, strings.Join(names, ", "))}
	}
	switch a.Kind {
	case models.AuditNotNull, models.AuditUniqueValues:
		for j, c := range a.Columns {
			if _, ok := typeOf[c]; !ok {
				return missing(fmt.Sprintf("columns[%d]", j), c)
			}
		}
	case models.AuditAcceptedValues:
		if _, ok := typeOf[a.Column]; !ok {
			return missing("column", a.Column)
		}
	case models.AuditAcceptedRange:
		typ, ok := typeOf[a.Column]
		if !ok {
			return missing("column", a.Column)
		}
		for _, b := range []struct{ field, v string }{{"min", a.Min}, {"max", a.Max}} {
			if b.v == "" {
				continue
			}
			if err := sb.cast(ctx, b.v, typ); err != nil {
				var ce *castError
				if errors.As(err, &ce) {
					return &Error{Field: b.field, Msg: fmt.Sprintf("%q is not a value of %s's type %s: %s", b.v, a.Column, typ, ce.Message)}
				}
				return err
			}
		}
	case models.AuditCustom:
		return checkCustom(ctx, sb, a.SQL, macros, cols)
	}
	return nil
}

// checkCustom checks a custom audit's SQL: the structure of a model's
// (characters, macros of the model's vocabulary with @this_model, one SELECT reading only
// @this_model and its CTEs), and that it binds against the model's
// columns, in a sandbox of its own holding only @this_model's table.
func checkCustom(ctx context.Context, sb *sandbox, sql, macros string, cols []column) error {
	if e := checkChars(sql); e != nil {
		return e
	}
	r, err := warehouse.SubstituteAuditMacrosIn(macros, sql, warehouse.ParamStart, warehouse.ParamEnd)
	if err != nil {
		return macroErr(sql, err)
	}
	if err := statement(ctx, sb, sql, r, []string{warehouse.ThisModel}, true); err != nil {
		return err
	}
	bsb, err := openSandbox(ctx)
	if err != nil {
		return err
	}
	defer bsb.close()
	if err := bsb.createTable(ctx, warehouse.ThisModel, cols); err != nil {
		return err
	}
	nr, err := warehouse.SubstituteAuditMacrosIn(macros, sql, warehouse.NullTS, warehouse.NullTS)
	if err != nil {
		return macroErr(sql, err)
	}
	if _, err := bsb.describe(ctx, warehouse.Wrap(nr.Text)); err != nil {
		var be *bindError
		if errors.As(err, &be) {
			return &Error{Field: "sql", Line: be.Line, Msg: "does not bind: " + be.Message}
		}
		return err
	}
	return nil
}
