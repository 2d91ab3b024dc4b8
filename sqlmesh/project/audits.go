package project

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlmesh"
)

// auditsOf maps a model's audits: SQLMesh's built-ins to tidemark's
// (not_null(columns := […]), unique_values(columns := […]),
// number_of_rows(threshold := n), accepted_values(column := c,
// is_in := […]), accepted_range(column := c, min_v := x, max_v := y)),
// the name of an AUDIT of audits/ to a custom audit (its query with the
// call's arguments, and the AUDIT's defaults, substituted; blocking from
// the AUDIT or the call's blocking := false). Any other name is refused.
func (l *loader) auditsOf(e *entry) error {
	f, r := e.src, &e.m.Register
	used := map[string]int{}
	for _, c := range f.Audits {
		fail := func(line int, format string, args ...any) error {
			return &Error{File: f.File, Line: line, Property: "audits", Msg: fmt.Sprintf("audit %s: ", c.Name) + fmt.Sprintf(format, args...)}
		}
		args := map[string]sqlmesh.Value{}
		for k, v := range c.Args {
			args[k] = v
		}
		take := func(key string) (sqlmesh.Value, bool) {
			v, ok := args[key]
			delete(args, key)
			return v, ok
		}
		var a models.Audit
		src := auditSource{call: c}
		nonBlocking := false
		if v, ok := take("blocking"); ok {
			if v.Kind != sqlmesh.Bool {
				return fail(v.Line, "blocking: expected true or false, got '%s'", v.Text)
			}
			nonBlocking = v.Text == "false"
		}
		kind := strings.ToLower(c.Name)
		switch kind {
		case models.AuditNotNull, models.AuditUniqueValues:
			v, ok := take("columns")
			if !ok {
				return fail(c.Line, "missing columns := [column, …]")
			}
			cols, err := names(v)
			if err != nil {
				return fail(v.Line, "columns: %v", err)
			}
			a = models.Audit{Kind: kind, Columns: cols}
		case models.AuditNumberOfRows:
			a = models.Audit{Kind: kind, Threshold: 1}
			if v, ok := take("threshold"); ok {
				n, err := strconv.ParseInt(v.Text, 10, 64)
				if v.Kind != sqlmesh.Number || err != nil || n < 0 {
					return fail(v.Line, "threshold: expected a whole number >= 0, got '%s'", v.Text)
				}
				// SQLMesh's number_of_rows fails when the rows are at most
				// the threshold; tidemark's when they are fewer.
				a.Threshold = n + 1
			}
		case models.AuditAcceptedValues:
			col, err := column(take)
			if err != nil {
				return fail(c.Line, "%v", err)
			}
			v, ok := take("is_in")
			if !ok {
				return fail(c.Line, "missing is_in := [value, …]")
			}
			vals, err := literals(v)
			if err != nil {
				return fail(v.Line, "is_in: %v", err)
			}
			a = models.Audit{Kind: kind, Column: col, IsIn: vals}
		case models.AuditAcceptedRange:
			col, err := column(take)
			if err != nil {
				return fail(c.Line, "%v", err)
			}
			a = models.Audit{Kind: kind, Column: col}
			for _, b := range []struct {
				key string
				to  *string
			}{{"min_v", &a.Min}, {"max_v", &a.Max}} {
				if v, ok := take(b.key); ok {
					if v.Kind != sqlmesh.Number && v.Kind != sqlmesh.String {
						return fail(v.Line, "%s: expected a number or a string, got '%s'", b.key, v.Text)
					}
					*b.to = v.Text
				}
			}
			if v, ok := take("inclusive"); ok && !(v.Kind == sqlmesh.Bool && v.Text == "true") {
				return fail(v.Line, "inclusive := %s is not supported: tidemark's accepted_range includes its bounds", v.Text)
			}
		default:
			def, ok := l.audits[kind]
			if !ok {
				return fail(c.Line, "neither a SQLMesh built-in tidemark maps (%s) nor an AUDIT of audits/", strings.Join(models.AuditKinds, ", "))
			}
			subst := map[string]string{}
			for k, v := range def.Defaults {
				subst[k] = v.SQL()
			}
			for k, v := range args {
				subst[k] = v.SQL()
			}
			args = nil
			sql, left, err := sqlmesh.SubstituteParams(def.File, def.Query, subst)
			if err != nil {
				var se *sqlmesh.Error
				if errors.As(err, &se) { // its line is the query's: the file's
					return &Error{File: def.File, Line: def.QueryLine + se.Line - 1, Property: "query", Msg: fmt.Sprintf("audit %s: %s", def.Name, se.Msg)}
				}
				return err
			}
			for _, p := range left {
				if !slices.Contains(models.SQLMeshMacros, strings.ToLower(p.Name)) {
					return &Error{File: def.File, Line: def.QueryLine + p.Line - 1, Property: "audits",
						Msg: fmt.Sprintf("audit %s uses @%s, which the call at %s:%d gives no value and the AUDIT no default", def.Name, p.Name, f.File, c.Line)}
				}
			}
			a = models.Audit{Name: strings.ToLower(def.Name), Kind: models.AuditCustom,
				SQL: sqlmesh.TrimQuery(def.File, sql)}
			nonBlocking = nonBlocking || !def.Blocking
			if v, ok := c.Args["blocking"]; ok {
				nonBlocking = v.Text == "false"
			}
			src.file, src.queryLine = def.File, def.QueryLine
		}
		if ks := sortedKeys(args); len(ks) > 0 {
			return fail(args[ks[0]].Line, "argument %s is not read by tidemark's %s", ks[0], kind)
		}
		if a.Name == "" {
			a.Name = kind
		}
		used[a.Name]++
		if n := used[a.Name]; n > 1 {
			a.Name = fmt.Sprintf("%s_%d", a.Name, n)
		}
		a.NonBlocking = nonBlocking
		r.Audits = append(r.Audits, a)
		e.audits = append(e.audits, src)
	}
	return nil
}

// column is an audit's column := c.
func column(take func(string) (sqlmesh.Value, bool)) (string, error) {
	v, ok := take("column")
	if !ok {
		return "", fmt.Errorf("missing column := name")
	}
	if v.Kind != sqlmesh.Ident && v.Kind != sqlmesh.String {
		return "", fmt.Errorf("column: expected a column name, got '%s'", v.Text)
	}
	return v.Text, nil
}

// names is a column or a list of columns.
func names(v sqlmesh.Value) ([]string, error) {
	switch v.Kind {
	case sqlmesh.Ident, sqlmesh.String:
		return []string{v.Text}, nil
	case sqlmesh.List:
		out := []string{}
		for _, it := range v.List {
			if it.Kind != sqlmesh.Ident && it.Kind != sqlmesh.String {
				return nil, fmt.Errorf("expected a column name, got '%s'", it.Text)
			}
			out = append(out, it.Text)
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a column or a list [a, b], got '%s'", v.Text)
}

// literals are the values of a list, as written (strings without quotes).
func literals(v sqlmesh.Value) ([]string, error) {
	if v.Kind != sqlmesh.List {
		return nil, fmt.Errorf("expected a list [value, …], got '%s'", v.Text)
	}
	out := []string{}
	for _, it := range v.List {
		switch it.Kind {
		case sqlmesh.String, sqlmesh.Number, sqlmesh.Bool:
			out = append(out, it.Text)
		default:
			return nil, fmt.Errorf("expected a string or a number, got '%s'", it.Text)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
