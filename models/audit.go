package models

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidemark/tidemark/events"
)

// Audit is one audit a model version declares (issue 30): a check over
// each computed batch's rows of the version's table. It is events.Audit
// (the SnapshotRegistered that carries it is in package events, which
// this package imports); this package validates it (Definition.Validate).
type Audit = events.Audit

// The audit kinds.
const (
	AuditNotNull        = "not_null"
	AuditUniqueValues   = "unique_values"
	AuditNumberOfRows   = "number_of_rows"
	AuditAcceptedValues = "accepted_values"
	AuditAcceptedRange  = "accepted_range"
	AuditCustom         = "custom"
)

// AuditKinds lists the built-in audit kinds (custom is not one: an audit
// with SQL is custom).
var AuditKinds = []string{AuditNotNull, AuditUniqueValues, AuditNumberOfRows, AuditAcceptedValues, AuditAcceptedRange}

// MaxAudits is the most audits a version declares.
const MaxAudits = events.MaxAudits

// MacroThisModel names, in a custom audit's SQL, the table of the version
// being audited.
const MacroThisModel = "this_model"

// MaxAuditValues bounds accepted_values' list and a not_null or
// unique_values audit's columns.
const MaxAuditValues = 1000

// MaxAuditLiteral bounds one accepted value or range bound, in bytes.
const MaxAuditLiteral = 1000

// checkAudits is Definition.Validate's check of the audits: kinds known,
// names unique plain identifiers, columns plain identifiers, custom audits
// with SQL (checked like a model's, with @this_model too), built-ins
// without, a threshold >= 0, a non-empty is_in, a range with a bound, at
// most MaxAudits.
func checkAudits(as []Audit, macros []string) *FieldError {
	if len(as) > MaxAudits {
		m := fmt.Sprintf("audits: %d audits, at most %d", len(as), MaxAudits)
		return &FieldError{Field: "audits", Key: "audits", Msg: m, Detail: m}
	}
	names := map[string]int{}
	for i, a := range as {
		field := fmt.Sprintf("audits[%d]", i)
		if err := checkAuditName(a.Name); err != nil {
			return named(field+".name", "%v", err)
		}
		if j, dup := names[a.Name]; dup {
			return named(field+".name", "%q: audits[%d] has this name already (name one of them)", a.Name, j)
		}
		names[a.Name] = i
		if err := checkAudit(field, a, macros); err != nil {
			return err
		}
	}
	return nil
}

func checkAudit(field string, a Audit, macros []string) *FieldError {
	builtin := a.Kind != AuditCustom
	switch a.Kind {
	case AuditNotNull, AuditUniqueValues, AuditNumberOfRows, AuditAcceptedValues, AuditAcceptedRange, AuditCustom:
	case "":
		return named(field+".kind", "is required: one of %s, or custom (with sql)", strings.Join(AuditKinds, ", "))
	default:
		return named(field+".kind", "%q: want one of %s, or custom (with sql)", a.Kind, strings.Join(AuditKinds, ", "))
	}
	if builtin && a.SQL != "" {
		return named(field+".sql", "a built-in audit (%s) takes no sql; a custom audit is a name and its sql", a.Kind)
	}
	// Each kind's fields, and none of the others'.
	uses := map[string]bool{}
	switch a.Kind {
	case AuditNotNull, AuditUniqueValues:
		uses["columns"] = true
		if len(a.Columns) == 0 {
			return named(field+".columns", "%s needs at least one column", a.Kind)
		}
		if len(a.Columns) > MaxAuditValues {
			return named(field+".columns", "%d columns: at most %d", len(a.Columns), MaxAuditValues)
		}
		for j, c := range a.Columns {
			if err := checkTimeColumn(c); err != nil {
				return named(fmt.Sprintf("%s.columns[%d]", field, j), "%v", err)
			}
		}
	case AuditNumberOfRows:
		uses["threshold"] = true
		if a.Threshold < 0 {
			return named(field+".threshold", "%d: want a number of rows >= 0", a.Threshold)
		}
	case AuditAcceptedValues, AuditAcceptedRange:
		uses["column"] = true
		if a.Column == "" {
			return named(field+".column", "%s needs a column", a.Kind)
		}
		if err := checkTimeColumn(a.Column); err != nil {
			return named(field+".column", "%v", err)
		}
		if a.Kind == AuditAcceptedValues {
			uses["is_in"] = true
			if len(a.IsIn) == 0 {
				return named(field+".is_in", "accepted_values needs at least one value")
			}
			if len(a.IsIn) > MaxAuditValues {
				return named(field+".is_in", "%d values: at most %d", len(a.IsIn), MaxAuditValues)
			}
			for j, v := range a.IsIn {
				if err := checkLiteral(v); err != nil {
					return named(fmt.Sprintf("%s.is_in[%d]", field, j), "%v", err)
				}
			}
		} else {
			uses["min"], uses["max"] = true, true
			if a.Min == "" && a.Max == "" {
				return named(field+".min", "accepted_range needs min or max (or both)")
			}
			for _, b := range [...]struct{ key, v string }{{"min", a.Min}, {"max", a.Max}} {
				if err := checkLiteral(b.v); err != nil {
					return named(field+"."+b.key, "%v", err)
				}
			}
		}
	case AuditCustom:
		uses["sql"] = true
		if a.SQL == "" {
			return named(field+".sql", "a custom audit needs sql: a query whose rows are the violations")
		}
		if err := checkSQLMacros(a.SQL, macros...); err != nil {
			return named(field+".sql", "%v", err)
		}
	}
	for _, f := range []struct {
		key string
		set bool
	}{{"columns", len(a.Columns) > 0}, {"column", a.Column != ""}, {"threshold", a.Threshold != 0}, {"is_in", len(a.IsIn) > 0},
		{"min", a.Min != ""}, {"max", a.Max != ""}} {
		if f.set && !uses[f.key] {
			return named(field+"."+f.key, "is not a field of a %s audit", a.Kind)
		}
	}
	return nil
}

// checkAuditName checks an audit's name: a plain identifier (it names the
// audit in outcomes, findings and files).
func checkAuditName(n string) error {
	if n == "" {
		return fmt.Errorf("is required")
	}
	if len(n) > MaxTimeColumn || !plainIdent(n) {
		return fmt.Errorf("%q: a plain name (letters, digits and '_', not starting with a digit, at most %d bytes)", n, MaxTimeColumn)
	}
	return nil
}

// checkLiteral checks a value an audit compares with: bounded, UTF-8, no
// NUL (the warehouse binds it as a parameter, never splices it).
func checkLiteral(v string) error {
	if len(v) > MaxAuditLiteral {
		return fmt.Errorf("is %d bytes: at most %d", len(v), MaxAuditLiteral)
	}
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%q: not valid UTF-8 text", v)
	}
	return nil
}
