package models

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxSQL bounds a model's SQL, in bytes (64 KiB).
const MaxSQL = 64 << 10

// MaxTimeColumn bounds a model's time column, in bytes (PostgreSQL's
// identifier length).
const MaxTimeColumn = 63

// The macros a model's SQL may use (SQLMesh's names): the bounds of the
// interval being computed, TIMESTAMP values. The warehouse binds them as
// query parameters; they are never spliced into the text.
const (
	MacroStartTS = "start_ts"
	MacroEndTS   = "end_ts"
)

// SQLMeshMacros are the macros a version's SQL may use when its Macros
// is MacrosSQLMesh (SQLMesh's predefined variables, SQLMesh's values; the
// warehouse computes each from the interval's bounds, bound as query
// parameters, never spliced): the interval's start and inclusive end as
// a date string (_ds), a DATE (_date), a timestamp string (_ts), a
// TIMESTAMP (_dt), seconds (_epoch) and milliseconds (_millis) since the
// Unix epoch; @execution_ds, the date of the interval's end; @this_model,
// the version's own table (in an audit: the audited rows).
var SQLMeshMacros = []string{
	"start_ds", "end_ds", "start_date", "end_date", "start_ts", "end_ts",
	"start_dt", "end_dt", "start_epoch", "end_epoch", "start_millis", "end_millis",
	"execution_ds", MacroThisModel,
}

// sqlTok is a token kind of the small SQL lexer: just enough to find
// macros outside string literals, quoted identifiers and comments.
type sqlTok int

const (
	tokWord    sqlTok = iota // an unquoted identifier or keyword
	tokString                // '...' ('' escapes a quote)
	tokQuoted                // "..." ("" escapes a quote)
	tokComment               // -- to end of line, or /* ... */
	tokMacro                 // @identifier (text without the '@')
	tokSemi                  // ;
	tokOther                 // any other byte (operators, digits, punctuation)
)

type sqlToken struct {
	kind sqlTok
	pos  int // byte offset of the token in the SQL
	text string
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// lexSQL splits s into tokens, whitespace dropped. It refuses an
// unterminated string literal, quoted identifier or block comment (the rest
// of the text would be read differently by the warehouse). Block comments
// do not nest. Dialect extensions (backslash escapes in E-strings, dollar
// quoting) are not read: a backslash before a quote does not escape it,
// so such a literal ends early and may read as unterminated (refused).
func lexSQL(s string) ([]sqlToken, error) {
	var out []sqlToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for {
				k := strings.IndexByte(s[j:], c)
				if k < 0 {
					what := "string literal"
					if c == '"' {
						what = "quoted identifier"
					}
					return nil, fmt.Errorf("has an unterminated %s at %s", what, where(s, i))
				}
				j += k + 1
				if j < len(s) && s[j] == c { // doubled quote: an escaped one
					j++
					continue
				}
				break
			}
			kind := tokString
			if c == '"' {
				kind = tokQuoted
			}
			out = append(out, sqlToken{kind, i, s[i:j]})
			i = j
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, sqlToken{tokComment, i, s[i : i+j]})
			i += j
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("has an unterminated /* comment at %s", where(s, i))
			}
			out = append(out, sqlToken{tokComment, i, s[i : i+2+j+2]})
			i += 2 + j + 2
		case c == '@' && i+1 < len(s) && isIdentStart(s[i+1]):
			j := i + 2
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			out = append(out, sqlToken{tokMacro, i, s[i+1 : j]})
			i = j
		case c == ';':
			out = append(out, sqlToken{tokSemi, i, ";"})
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && (isIdentPart(s[j]) || s[j] == '$') {
				j++
			}
			out = append(out, sqlToken{tokWord, i, s[i:j]})
			i = j
		default:
			out = append(out, sqlToken{tokOther, i, s[i : i+1]})
			i++
		}
	}
	return out, nil
}

// where names byte offset i of s as "line L, column C" (1-based; columns
// count bytes).
func where(s string, i int) string {
	line := 1 + strings.Count(s[:i], "\n")
	col := i + 1
	if k := strings.LastIndexByte(s[:i], '\n'); k >= 0 {
		col = i - k
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}

// checkSQL checks a model's query cheaply, without a SQL engine: its size,
// its encoding, and its macros (read by the same scanner's rules as the
// warehouse's substitution, so an unterminated literal or comment is
// refused here as it would be there). Whether it is one SELECT reading
// only its upstream models is the engine's parser's to say (package
// sqlcheck, run by the engine on register_snapshot): a lexer here read
// "--\r" and "$$" otherwise than DuckDB and Postgres do. The error is the
// detail of a FieldError on "sql" (it does not name the field).
func checkSQL(s string) error { return checkSQLMacros(s, MacroStartTS, MacroEndTS) }

// checkSQLMacros is checkSQL for a query that may use the macros allowed
// (a custom audit's also names @this_model).
func checkSQLMacros(s string, allowed ...string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("is empty")
	}
	if len(s) > MaxSQL {
		return fmt.Errorf("is %d bytes: at most %d", len(s), MaxSQL)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("has a NUL byte at %s", where(s, i))
	}
	toks, err := lexSQL(s)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t.kind == tokMacro && !slices.Contains(allowed, t.text) {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = "@" + a
			}
			list := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
			return fmt.Errorf("uses the macro @%s at %s: only %s are defined", t.text, where(s, t.pos), list)
		}
	}
	return nil
}

// checkTimeColumn checks a model's time column: a plain SQL identifier.
func checkTimeColumn(c string) error {
	if len(c) > MaxTimeColumn {
		return fmt.Errorf("%q: at most %d bytes", c, MaxTimeColumn)
	}
	if !plainIdent(c) {
		return fmt.Errorf("%q: a plain column name (letters, digits and '_', not starting with a digit)", c)
	}
	return nil
}

// plainIdent reports whether c is a plain SQL identifier: letters, digits
// and '_', not starting with a digit.
func plainIdent(c string) bool {
	ok := c != "" && isIdentStart(c[0])
	for i := 1; ok && i < len(c); i++ {
		ok = isIdentPart(c[i])
	}
	return ok
}
