package warehouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The kinds of audit (Audit.Kind): SQLMesh's built-in audits of the same
// names, and custom (Audit.SQL).
const (
	AuditNotNull        = "not_null"
	AuditUniqueValues   = "unique_values"
	AuditNumberOfRows   = "number_of_rows"
	AuditAcceptedValues = "accepted_values"
	AuditAcceptedRange  = "accepted_range"
	AuditCustom         = "custom"
)

// The bounds of an AuditResult.
const (
	// AuditSampleRows bounds AuditResult.Sample.
	AuditSampleRows = 5
	// AuditSampleColumns bounds AuditResult.Columns (a wider row's
	// sample keeps its first columns).
	AuditSampleColumns = 64
	// AuditValueBytes bounds each value of a sample, and each column
	// name (cut at a UTF-8 boundary).
	AuditValueBytes = 200
	// AuditErrorBytes bounds AuditResult.Error.
	AuditErrorBytes = 1000
)

// AuditNull is how a sample shows an SQL NULL.
const AuditNull = "NULL"

// Audit is one audit of a model's rows: a check over the rows of a
// computed range of its snapshot table, which it reads and never
// writes. Its violations are rows; it passes when it finds none
// (number_of_rows: when it finds at least Threshold rows).
type Audit struct {
	// Name names the result (AuditResult.Name); "" takes Kind.
	Name string
	// Kind is one of AuditNotNull, AuditUniqueValues, AuditNumberOfRows,
	// AuditAcceptedValues, AuditAcceptedRange, AuditCustom.
	Kind string
	// Columns: not_null (the rows where any of them IS NULL) and
	// unique_values (the rows whose value of any of them, NULL included,
	// an earlier row of the range has too: each column on its own, as
	// SQLMesh's unique_values; its sample shows these columns only).
	Columns []string
	// Column: accepted_values and accepted_range.
	Column string
	// Threshold: number_of_rows fails when the range holds fewer rows.
	Threshold int64
	// IsIn: accepted_values' values; a row whose Column, cast to text in
	// the engine, is none of them is a violation (NULL passes, as in
	// SQLMesh).
	IsIn []string
	// Min and Max: accepted_range's bounds, as written ("" = unbounded),
	// bound as parameters and compared in Column's type: a row below Min
	// or above Max is a violation (NULL passes).
	Min, Max string
	// SQL: custom's query, whose rows are the violations. @this_model
	// is the snapshot table's rows in the audited range (the CTE
	// ThisModel), the other macros (in the model's vocabulary,
	// Model.Macros) the range's bounds (SubstituteAuditMacrosIn).
	SQL string
}

// AuditResult is one audit's result over one range.
type AuditResult struct {
	// Name is the audit's (Audit.Name, else its Kind).
	Name string
	// Passed: no violation was found, and the audit ran.
	Passed bool
	// Count is the violating rows (number_of_rows: the rows found).
	Count int64
	// Columns and Sample: at most AuditSampleRows violating rows (their
	// first AuditSampleColumns columns), values as text (AuditNull for
	// NULL, times in RFC 3339), each cut to AuditValueBytes.
	Columns []string
	Sample  [][]string
	// Error says why the audit could not run (it failed): an SQL error,
	// its timeout. At most AuditErrorBytes.
	Error string
}

// Audit runs each audit over the rows of m's snapshot table in [start,
// end) (an interval or batch just written; a model computed whole: every
// row of its object, start and end the computation's bounds) and returns their results in
// order. Each audit is one statement built from its kind (a custom
// audit's SQL, its macros substituted) run as QueryLimited runs a query:
// in a read-only transaction of its own, in the sandbox, within m's
// timeout (Model.Timeout, else Options.ModelTimeout), its values bound as
// parameters. An audit that cannot run is a failed result saying why
// (Error), never an error: the rows are written, and a failed audit is
// what there is to report of them. A ctx that ended fails every audit
// left: the caller should check ctx before reporting the results.
func (w *Warehouse) Audit(ctx context.Context, m Model, audits []Audit, start, end time.Time) []AuditResult {
	audits = w.tableCase(ctx, m, audits)
	out := make([]AuditResult, len(audits))
	for i, a := range audits {
		out[i] = w.audit(ctx, m, a, start.UTC(), end.UTC())
	}
	return out
}

// tableCase names the columns of built-in audits as m's table does: a
// column the model's SQL names unquoted in mixed case (userId) is
// userid in a Postgres table (it folds unquoted names), while sqlcheck,
// on DuckDB, checked the audit against the name as written. A name
// with an upper-case letter and no exact match takes the table's one
// column equal to it but for case. Names in lower case (the common case)
// cost no lookup; when the columns cannot be listed, the audits are
// left as they are (and fail saying why).
func (w *Warehouse) tableCase(ctx context.Context, m Model, audits []Audit) []Audit {
	mixed := func(c string) bool { return c != strings.ToLower(c) }
	need := false
	for _, a := range audits {
		need = need || mixed(a.Column) || slices.ContainsFunc(a.Columns, mixed)
	}
	if !need {
		return audits
	}
	cols, err := w.tableColumns(ctx, m.Table)
	if err != nil {
		return audits
	}
	name := func(c string) string {
		if !mixed(c) || slices.Contains(cols, c) {
			return c
		}
		found := ""
		for _, t := range cols {
			if strings.EqualFold(t, c) {
				if found != "" {
					return c // ambiguous: as written
				}
				found = t
			}
		}
		if found == "" {
			return c
		}
		return found
	}
	out := slices.Clone(audits)
	for i := range out {
		out[i].Column = name(out[i].Column)
		if len(out[i].Columns) > 0 {
			cs := make([]string, len(out[i].Columns))
			for j, c := range out[i].Columns {
				cs[j] = name(c)
			}
			out[i].Columns = cs
		}
	}
	return out
}

func (w *Warehouse) audit(ctx context.Context, m Model, a Audit, start, end time.Time) AuditResult {
	res := AuditResult{Name: a.Name}
	if res.Name == "" {
		res.Name = a.Kind
	}
	fail := func(err error) AuditResult {
		res.Passed, res.Count, res.Columns, res.Sample = false, 0, nil, nil
		res.Error = cut(fmt.Sprintf("audit %s of %s: %v", res.Name, m.Table, err), AuditErrorBytes)
		return res
	}
	q, args, err := auditQuery(m, a)
	if err != nil {
		return fail(err)
	}
	args = append([]any{start, end}, args...)
	err = w.bounded(ctx, m, func(ctx context.Context, timeout time.Duration) error {
		return w.inReadOnlyTx(ctx, func(c *sql.Conn) error {
			if err := w.b.sandbox(ctx, c, timeout); err != nil {
				return err
			}
			return w.b.queryOne(ctx, c, q, args, func(cols []string, row []any) (bool, error) {
				n, err := asInt64(row[len(row)-1])
				if err != nil {
					return false, err
				}
				res.Count = n
				if a.Kind == AuditNumberOfRows {
					return false, nil
				}
				cols, row = cols[:len(cols)-1], row[:len(row)-1]
				if len(cols) > AuditSampleColumns {
					cols, row = cols[:AuditSampleColumns], row[:AuditSampleColumns]
				}
				if res.Columns == nil {
					res.Columns = make([]string, len(cols))
					for i, c := range cols {
						res.Columns[i] = cut(c, AuditValueBytes)
					}
				}
				vals := make([]string, len(row))
				for i, v := range row {
					vals[i] = cut(auditText(v), AuditValueBytes)
				}
				res.Sample = append(res.Sample, vals)
				return len(res.Sample) < AuditSampleRows, nil
			})
		})
	})
	if err != nil {
		return fail(err)
	}
	if a.Kind == AuditNumberOfRows {
		res.Passed = res.Count >= a.Threshold
	} else {
		res.Passed = res.Count == 0
	}
	return res
}

// auditQuery is the statement that runs a: the violations (sel) with the
// count of them beside each (its last column; number_of_rows: the count
// alone), at most AuditSampleRows rows, over the CTE ThisModel (m's
// table in [$1, $2); a model computed whole: all of its object). args
// are its parameters after the bounds ($3 on).
func auditQuery(m Model, a Audit) (q string, args []any, err error) {
	if m.Table == "" || m.TimeColumn == "" && !m.Whole() {
		return "", nil, fmt.Errorf("model %q: Table and TimeColumn are required", m.Name)
	}
	var this string
	if m.Whole() {
		this = fmt.Sprintf("WITH %s AS (SELECT * FROM %s WHERE %s)\n", ThisModel, qualified(Schema, m.Table), boundsUsed)
	} else {
		tc := quoteIdent(m.TimeColumn)
		this = fmt.Sprintf("WITH %s AS (SELECT * FROM %s WHERE %s >= %s AND %s < %s)\n",
			ThisModel, qualified(Schema, m.Table), tc, paramStart, tc, paramEnd)
	}
	param := func(v string) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args)+2)
	}
	var sel string
	switch a.Kind {
	case AuditNotNull:
		if len(a.Columns) == 0 {
			return "", nil, fmt.Errorf("not_null needs columns")
		}
		conds := make([]string, len(a.Columns))
		for i, c := range a.Columns {
			conds[i] = quoteIdent(c) + " IS NULL"
		}
		sel = "SELECT * FROM " + ThisModel + " WHERE " + strings.Join(conds, " OR ")
	case AuditUniqueValues:
		if len(a.Columns) == 0 {
			return "", nil, fmt.Errorf("unique_values needs columns")
		}
		// Each column on its own (SQLMesh's unique_values): a row whose
		// value of a column an earlier row of the range has is a
		// violation. The ranks' names have spaces: no column's name can
		// be one of them.
		cols, ranks, conds := make([]string, len(a.Columns)), make([]string, len(a.Columns)), make([]string, len(a.Columns))
		for i, c := range a.Columns {
			cols[i] = quoteIdent(c)
			rank := quoteIdent(fmt.Sprintf("tidemark rank %d", i))
			ranks[i] = fmt.Sprintf("row_number() OVER (PARTITION BY %s) AS %s", cols[i], rank)
			conds[i] = rank + " > 1"
		}
		sel = fmt.Sprintf("SELECT %s FROM (SELECT %s, %s FROM %s) u WHERE %s",
			strings.Join(cols, ", "), strings.Join(cols, ", "), strings.Join(ranks, ", "), ThisModel, strings.Join(conds, " OR "))
	case AuditNumberOfRows:
		return this + "SELECT count(*) FROM " + ThisModel, nil, nil
	case AuditAcceptedValues:
		if a.Column == "" || len(a.IsIn) == 0 {
			return "", nil, fmt.Errorf("accepted_values needs a column and is_in")
		}
		ps := make([]string, len(a.IsIn))
		for i, v := range a.IsIn {
			ps[i] = param(v)
		}
		sel = fmt.Sprintf("SELECT * FROM %s WHERE CAST(%s AS VARCHAR) NOT IN (%s)", ThisModel, quoteIdent(a.Column), strings.Join(ps, ", "))
	case AuditAcceptedRange:
		if a.Column == "" || a.Min == "" && a.Max == "" {
			return "", nil, fmt.Errorf("accepted_range needs a column and min or max")
		}
		// The bounds are parameters of no type of their own: each engine
		// gives them the column's (the comparison's) and reads the text
		// as a value of it, so 10 > 9 for a number and '10' < '9' for
		// text.
		var conds []string
		if a.Min != "" {
			conds = append(conds, quoteIdent(a.Column)+" < "+param(a.Min))
		}
		if a.Max != "" {
			conds = append(conds, quoteIdent(a.Column)+" > "+param(a.Max))
		}
		sel = "SELECT * FROM " + ThisModel + " WHERE " + strings.Join(conds, " OR ")
	case AuditCustom:
		if a.SQL == "" {
			return "", nil, fmt.Errorf("a custom audit needs sql")
		}
		r, err := SubstituteAuditMacrosIn(m.Macros, a.SQL, paramStart, paramEnd)
		if err != nil {
			return "", nil, err
		}
		sel = r.Text
	default:
		return "", nil, fmt.Errorf("unknown audit kind %q", a.Kind)
	}
	q = fmt.Sprintf("%sSELECT *, count(*) OVER () FROM (%s\n) tidemark_violations LIMIT %d", this, sel, AuditSampleRows)
	return q, args, nil
}

// auditText is a sample's value as text.
func auditText(v any) string {
	switch x := v.(type) {
	case nil:
		return AuditNull
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprint(x)
	case fmt.Stringer:
		return x.String()
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// cut is s, valid UTF-8, cut to at most n bytes at a character's start.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
