package modelfile

import (
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/models"
)

// auditFields are the keys of each built-in audit's mapping, beside name
// and blocking.
var auditFields = map[string][]string{
	models.AuditNotNull:        {"columns"},
	models.AuditUniqueValues:   {"columns"},
	models.AuditNumberOfRows:   {"threshold"},
	models.AuditAcceptedValues: {"column", "is_in"},
	models.AuditAcceptedRange:  {"column", "min", "max"},
}

// DecodeAudits reads a model's audits list. Each item is a built-in
// audit, a mapping of one key, its kind, to its fields (and optionally
// name, which defaults to the kind, and blocking, which defaults to true),
// or a custom audit, a mapping of name, sql and optionally blocking:
//
//	audits:
//	  - not_null: {columns: [user_id, ts]}
//	  - accepted_range: {column: amount, min: 0, blocking: false}
//	  - name: no_future_rows
//	    sql: SELECT * FROM @this_model WHERE ts > now()
//	    blocking: false
//
// It checks how each field is written; whether the audits hold is
// models.Definition.Validate's to say.
func DecodeAudits(n Node) ([]models.Audit, error) {
	items, err := n.List()
	if err != nil {
		return nil, err
	}
	out := make([]models.Audit, 0, len(items))
	for _, it := range items {
		m, err := it.Map()
		if err != nil {
			return nil, err
		}
		var a models.Audit
		if len(m.Keys()) == 1 && auditFields[m.Keys()[0]] != nil {
			a.Kind = m.Keys()[0]
			body, err := m.Get(a.Kind).Map()
			if err != nil {
				return nil, err
			}
			if err := body.Only(append([]string{"name", "blocking"}, auditFields[a.Kind]...)...); err != nil {
				return nil, err
			}
			if a.Name, err = body.Str("name", false); err != nil {
				return nil, err
			}
			if a.Name == "" {
				a.Name = a.Kind
			}
			if err := decodeAuditFields(body, &a); err != nil {
				return nil, err
			}
			if a.NonBlocking, err = nonBlocking(body); err != nil {
				return nil, err
			}
		} else {
			if !m.Has("sql") && !m.Has("name") {
				kinds := append(slices.Clone(models.AuditKinds), "name (a custom audit, with sql)")
				k := ""
				if len(m.Keys()) > 0 {
					k = m.Keys()[0]
				}
				return nil, it.Errorf("want a built-in audit (one key: %s) or a custom audit (name, sql), got %q", joinOr(kinds), k)
			}
			if err := m.Only("name", "sql", "blocking"); err != nil {
				return nil, err
			}
			a.Kind = models.AuditCustom
			if a.Name, err = m.Str("name", true); err != nil {
				return nil, err
			}
			if a.SQL, err = m.Str("sql", true); err != nil {
				return nil, err
			}
			if a.NonBlocking, err = nonBlocking(m); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func decodeAuditFields(body *Map, a *models.Audit) error {
	var err error
	if body.Has("columns") {
		if a.Columns, err = body.StrList("columns"); err != nil {
			return err
		}
	}
	if a.Column, err = body.Str("column", false); err != nil {
		return err
	}
	if n, ok, err := body.Int("threshold"); err != nil {
		return err
	} else if ok {
		a.Threshold = int64(n)
	}
	if body.Has("is_in") {
		l, err := body.Get("is_in").List()
		if err != nil {
			return err
		}
		for _, v := range l {
			s, err := v.Scalar()
			if err != nil {
				return err
			}
			a.IsIn = append(a.IsIn, s)
		}
	}
	if a.Min, err = body.Str("min", false); err != nil {
		return err
	}
	a.Max, err = body.Str("max", false)
	return err
}

// nonBlocking reads blocking (default true) as the Audit's NonBlocking.
func nonBlocking(m *Map) (bool, error) {
	b, err := m.Bool("blocking", true)
	return !b, err
}

func joinOr(ss []string) string {
	out := ""
	for i, s := range ss {
		switch {
		case i == 0:
		case i == len(ss)-1:
			out += " or "
		default:
			out += ", "
		}
		out += s
	}
	return out
}

// Scalar reads the node as a string, numbers and booleans as written.
func (n Node) Scalar() (string, error) {
	switch s := n.v.(type) {
	case string:
		return s, nil
	case uint64, int64, int, float64, bool:
		return fmt.Sprint(s), nil
	}
	return "", n.Errorf("want a value, got %s", describe(n.v))
}
