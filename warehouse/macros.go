package warehouse

import (
	"fmt"
	"strings"
)

// The forms @start_ts and @end_ts take in rendered SQL.
const (
	// ParamStart and ParamEnd bind the interval's bounds as the
	// statement's two positional parameters.
	ParamStart = "CAST($1 AS TIMESTAMP)"
	ParamEnd   = "CAST($2 AS TIMESTAMP)"
	// NullTS stands for both bounds where no parameters may be bound
	// (table creation in Postgres: DDL takes no parameters). It is a
	// constant, not a value: the table is created from LIMIT 0.
	NullTS = "CAST(NULL AS TIMESTAMP)"
)

// The unexported names the package's own code uses.
const (
	paramStart = ParamStart
	paramEnd   = ParamEnd
	nullTS     = NullTS
)

// Wrap is how the warehouse embeds a model's query (its macros
// substituted) in its own statements: every statement built from model
// SQL selects from it (under the upstream CTEs, when it has upstream).
// sqlcheck parses the same text, so what is checked is what runs.
func Wrap(body string) string { return "SELECT * FROM (" + body + "\n) q" }

// Rendered is a model's SQL with its macros replaced (Text), and the way
// back from an offset in Text to one in the model's SQL (Source).
type Rendered struct {
	Text  string
	marks []mark // replacements, in order
}

// mark is one replacement: the text from at (in the rendered text) up to
// at+n stands for the model's SQL from orig up to orig+m.
type mark struct{ at, n, orig, m int }

// Source maps an offset in Text to the model's SQL (an offset inside a
// replacement maps to the macro's '@').
func (r Rendered) Source(i int) int {
	shift := 0
	for _, k := range r.marks {
		if i < k.at {
			break
		}
		if i < k.at+k.n {
			return k.orig
		}
		shift = k.orig + k.m - (k.at + k.n)
	}
	return i + shift
}

// MacroError is a model's SQL that cannot be rendered: an unknown macro,
// a parameter of its own, an unterminated literal or comment. Offset is
// the byte offset in the model's SQL.
type MacroError struct {
	Offset int
	Msg    string
}

func (e *MacroError) Error() string { return fmt.Sprintf("%s (at offset %d)", e.Msg, e.Offset) }

// SubstituteMacros replaces @start_ts and @end_ts (SQLMesh's names, any
// case) outside string literals, quoted identifiers and comments with
// start and end, and refuses any other macro and parameters of the
// query's own (a *MacroError). It only finds the macros: what the result
// means is for the engine's parser to say (sqlcheck parses exactly this
// text), so a comment it misreads is harmless. Comments end at '\n' or
// '\r', as both engines end them.
func SubstituteMacros(sql, start, end string) (Rendered, error) {
	return substitute(sql, map[string]string{"start_ts": start, "end_ts": end}, nil, "only @start_ts and @end_ts are defined")
}

// ThisModel is what @this_model becomes in a custom audit's SQL
// (SubstituteAuditMacros): the name of the CTE the warehouse binds to the
// audited batch's rows of the snapshot table (Warehouse.Audit), and the
// table sqlcheck binds the audit against.
const ThisModel = "this_model"

// SubstituteAuditMacros is SubstituteMacros for a custom audit's SQL: it
// also replaces @this_model (any case) with ThisModel, the audited rows.
func SubstituteAuditMacros(sql, start, end string) (Rendered, error) {
	return substitute(sql, map[string]string{"start_ts": start, "end_ts": end, ThisModel: ThisModel}, nil,
		"only @this_model, @start_ts and @end_ts are defined in an audit")
}

// MacrosSQLMesh is Model.Macros for SQLMesh's macro vocabulary (the
// value of models.MacrosSQLMesh; "" is tidemark's own, @start_ts and
// @end_ts as TIMESTAMPs with the end exclusive).
const MacrosSQLMesh = "sqlmesh"

// SubstituteMacrosIn renders a model's SQL in the macro vocabulary vocab
// (Model.Macros). "" is SubstituteMacros (this unused). MacrosSQLMesh
// replaces SQLMesh's predefined variables (SQLMeshMacro; any case) with
// expressions computed from start and the exclusive end (ParamStart and
// ParamEnd, or NullTS), and @this_model with this (the model's own
// table, a quoted identifier; "" refuses @this_model). Any other macro, a
// parameter of the query's own, an unknown vocabulary is refused (a
// *MacroError).
func SubstituteMacrosIn(vocab, sql, start, end, this string) (Rendered, error) {
	switch vocab {
	case "":
		return SubstituteMacros(sql, start, end)
	case MacrosSQLMesh:
		with := sqlmeshMacros(start, end)
		why := map[string]string{}
		if this != "" {
			with[ThisModel] = this
		} else {
			why[ThisModel] = "a model's SQL reading its own table is not supported here (its columns would be its own result's)"
		}
		return substitute(sql, with, why, sqlmeshDefined)
	}
	return Rendered{}, &MacroError{0, fmt.Sprintf("has the macro vocabulary %q: want %q or \"\"", vocab, MacrosSQLMesh)}
}

// SubstituteAuditMacrosIn is SubstituteMacrosIn for a custom audit's SQL:
// @this_model is ThisModel, the audited rows (as in
// SubstituteAuditMacros, which is vocab "").
func SubstituteAuditMacrosIn(vocab, sql, start, end string) (Rendered, error) {
	if vocab == "" {
		return SubstituteAuditMacros(sql, start, end)
	}
	return SubstituteMacrosIn(vocab, sql, start, end, ThisModel)
}

// sqlmeshNames are SQLMesh's predefined variables SQLMeshMacro renders
// (models.SQLMeshMacros but @this_model, which is the caller's).
var sqlmeshNames = []string{
	"start_ds", "end_ds", "start_date", "end_date", "start_ts", "end_ts",
	"start_dt", "end_dt", "start_epoch", "end_epoch", "start_millis", "end_millis",
	"execution_ds",
}

var sqlmeshDefined = "SQLMesh's macros defined here are @" + strings.Join(sqlmeshNames, ", @") + " and @this_model"

// SQLMeshMacro is the expression SQLMesh's predefined variable name
// (lower case, without '@') becomes for the interval [start, end), start
// and end being TIMESTAMP expressions (ParamStart and ParamEnd, or
// NullTS); ok is false for a name it does not define (@this_model is
// the caller's). Each is plain SQL both DuckDB and Postgres run, of
// SQLMesh's value (sqlmesh/utils/date.py date_dict) for the interval
// whose inclusive end is end minus 1 microsecond (make_inclusive_end):
//
//   - _dt and _ts: the bound as a TIMESTAMP;
//   - _date and _ds: its date, a DATE; @execution_ds: the date of the
//     exclusive end (a recomputation renders the same);
//   - _millis: milliseconds since the Unix epoch, a BIGINT (truncated);
//   - _epoch: _millis / 1000 as a DOUBLE (FLOAT8), as Python divides.
//
// SQLMesh renders _ds and _ts as string literals, which each engine reads
// as the type of what they are compared with: typed values are what
// compare the same way with DATE and TIMESTAMP columns (WHERE ts BETWEEN
// @start_ts AND @end_ts); a value of no type of its own cannot be
// computed. Cast to text in the engine (CAST(@start_ds AS VARCHAR)),
// _ds is SQLMesh's 'YYYY-MM-DD' and _ts its 'YYYY-MM-DD HH:MM:SS' (with
// '.ffffff' when the microseconds are not zero, where the engines drop
// trailing zeros). A column of text compared with them needs a cast.
func SQLMeshMacro(name, start, end string) (expr string, ok bool) {
	var x string
	switch {
	case strings.HasPrefix(name, "start_"):
		x = start
	case strings.HasPrefix(name, "end_"):
		x = "CAST(" + end + " - INTERVAL '1 microsecond' AS TIMESTAMP)"
	case name == "execution_ds":
		return "CAST(" + end + " AS DATE)", true
	default:
		return "", false
	}
	switch name[strings.IndexByte(name, '_')+1:] {
	case "dt", "ts":
		return x, true
	case "date", "ds":
		return "CAST(" + x + " AS DATE)", true
	case "millis":
		return millis(x), true
	case "epoch":
		return "(CAST(" + millis(x) + " AS FLOAT8) / 1000)", true
	}
	return "", false
}

// millis is the milliseconds since the epoch of the TIMESTAMP x, in
// integer arithmetic in both engines (EXTRACT(EPOCH ...) is a DOUBLE in
// DuckDB): whole days, hours, minutes, and the minute's microseconds
// (EXTRACT(MICROSECONDS ...) counts the seconds too) truncated to
// milliseconds.
func millis(x string) string {
	us := "EXTRACT(MICROSECONDS FROM " + x + ")"
	return "CAST(CAST(CAST(" + x + " AS DATE) - DATE '1970-01-01' AS BIGINT) * 86400000" +
		" + CAST(EXTRACT(HOUR FROM " + x + ") AS BIGINT) * 3600000" +
		" + CAST(EXTRACT(MINUTE FROM " + x + ") AS BIGINT) * 60000" +
		" + CAST((" + us + " - " + us + " % 1000) / 1000 AS BIGINT) AS BIGINT)"
}

// sqlmeshMacros is every SQLMeshMacro for [start, end), by name.
func sqlmeshMacros(start, end string) map[string]string {
	out := make(map[string]string, len(sqlmeshNames)+1)
	for _, n := range sqlmeshNames {
		out[n], _ = SQLMeshMacro(n, start, end)
	}
	return out
}

// substitute replaces each macro of with (by lower-case name) and refuses
// any other (saying why[name], else defined) and parameters of the
// query's own.
func substitute(sql string, with, why map[string]string, defined string) (Rendered, error) {
	var b strings.Builder
	var marks []mark
	err := scanSQL(sql, func(i int, c byte) (int, error) {
		switch {
		case c == '@' && i+1 < len(sql) && isIdentStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			name := sql[i+1 : j]
			to, ok := with[strings.ToLower(name)]
			if !ok {
				if w, ok := why[strings.ToLower(name)]; ok {
					return 0, &MacroError{i, fmt.Sprintf("uses the macro @%s: %s", name, w)}
				}
				return 0, &MacroError{i, fmt.Sprintf("uses the macro @%s: %s", name, defined)}
			}
			marks = append(marks, mark{at: b.Len(), n: len(to), orig: i, m: j - i})
			b.WriteString(to)
			return j, nil
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9':
			return 0, &MacroError{i, "has a positional parameter: use @start_ts and @end_ts"}
		case c == '?':
			return 0, &MacroError{i, "has a parameter placeholder '?': use @start_ts and @end_ts"}
		}
		b.WriteByte(c)
		return i + 1, nil
	}, func(s string) { b.WriteString(s) })
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Text: b.String(), marks: marks}, nil
}

// scanSQL walks sql, handing every byte outside literals, quoted
// identifiers and comments to code (which returns where to go on), and
// every literal, quoted identifier or comment whole to verbatim.
func scanSQL(sql string, code func(i int, c byte) (int, error), verbatim func(string)) error {
	for i := 0; i < len(sql); {
		c := sql[i]
		var end int
		switch {
		case c == '\'' || c == '"':
			end = i + 1
			for end < len(sql) {
				if sql[end] == c {
					if end+1 < len(sql) && sql[end+1] == c { // doubled quote
						end += 2
						continue
					}
					break
				}
				end++
			}
			if end >= len(sql) {
				return &MacroError{i, fmt.Sprintf("has an unterminated %c", c)}
			}
			end++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			end = strings.IndexAny(sql[i:], "\n\r")
			if end < 0 {
				end = len(sql)
			} else {
				end += i + 1
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			k := strings.Index(sql[i+2:], "*/")
			if k < 0 {
				return &MacroError{i, "has an unterminated /* comment"}
			}
			end = i + 2 + k + 2
		default:
			next, err := code(i, c)
			if err != nil {
				return err
			}
			i = next
			continue
		}
		verbatim(sql[i:end])
		i = end
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
