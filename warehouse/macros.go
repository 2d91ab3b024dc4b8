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
	return substitute(sql, map[string]string{"start_ts": start, "end_ts": end}, "only @start_ts and @end_ts are defined")
}

// ThisModel is what @this_model becomes in a custom audit's SQL
// (SubstituteAuditMacros): the name of the CTE the warehouse binds to the
// audited batch's rows of the snapshot table (Warehouse.Audit), and the
// table sqlcheck binds the audit against.
const ThisModel = "this_model"

// SubstituteAuditMacros is SubstituteMacros for a custom audit's SQL: it
// also replaces @this_model (any case) with ThisModel, the audited rows.
func SubstituteAuditMacros(sql, start, end string) (Rendered, error) {
	return substitute(sql, map[string]string{"start_ts": start, "end_ts": end, ThisModel: ThisModel},
		"only @this_model, @start_ts and @end_ts are defined in an audit")
}

// substitute replaces each macro of with (by lower-case name) and refuses
// any other (saying defined) and parameters of the query's own.
func substitute(sql string, with map[string]string, defined string) (Rendered, error) {
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
