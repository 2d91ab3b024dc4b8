package sqlcheck

import (
	"fmt"
	"strings"
)

// The forms @start_ts and @end_ts take in the text the check parses: the
// warehouse's own (warehouse/render.go: paramStart, paramEnd, nullTS).
const (
	paramStart = "CAST($1 AS TIMESTAMP)"
	paramEnd   = "CAST($2 AS TIMESTAMP)"
	nullTS     = "CAST(NULL AS TIMESTAMP)"
)

// wrap is how the warehouse embeds a model's query (warehouse/render.go's
// render: "SELECT * FROM (" + body + "\n) q", under the upstream CTEs).
func wrap(body string) string { return "SELECT * FROM (" + body + "\n) q" }

// rendered is a model's SQL with its macros replaced, and the way back
// from an offset in it to one in the model's SQL.
type rendered struct {
	text  string
	marks []mark // replacements, in order
}

// mark is one replacement: the text from at (in the rendered text) up to
// at+n stands for the model's SQL from orig up to orig+m.
type mark struct{ at, n, orig, m int }

// source maps an offset in the rendered text to the model's SQL.
func (r rendered) source(i int) int {
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

// substitute replaces @start_ts and @end_ts outside string literals, quoted
// identifiers and comments with start and end, and refuses any other macro
// and parameters of the query's own. It is a copy of the warehouse's
// substituteMacros (warehouse/render.go, unexported, and being reworked
// meanwhile), kept byte for byte in its reading of the text, so that the
// text checked here is the text the warehouse runs: where this scanner
// misreads SQL (it ends a comment at '\n' only, and knows no dollar
// quotes), the warehouse misreads it the same way, and DuckDB's parser,
// not this scanner, says what the result is.
func substitute(sql, start, end string) (rendered, error) {
	var b strings.Builder
	var marks []mark
	err := scanSQL(sql, func(i int, c byte) (int, error) {
		switch {
		case c == '@' && i+1 < len(sql) && isIdentStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			var with string
			switch name := sql[i+1 : j]; strings.ToLower(name) {
			case "start_ts":
				with = start
			case "end_ts":
				with = end
			default:
				return 0, &posError{i, fmt.Sprintf("uses the macro @%s: only @start_ts and @end_ts are defined", name)}
			}
			marks = append(marks, mark{at: b.Len(), n: len(with), orig: i, m: j - i})
			b.WriteString(with)
			return j, nil
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9':
			return 0, &posError{i, "has a positional parameter: use @start_ts and @end_ts"}
		case c == '?':
			return 0, &posError{i, "has a parameter placeholder '?': use @start_ts and @end_ts"}
		}
		b.WriteByte(c)
		return i + 1, nil
	}, func(s string) { b.WriteString(s) })
	if err != nil {
		return rendered{}, err
	}
	return rendered{text: b.String(), marks: marks}, nil
}

// posError is a problem at a byte offset of the model's SQL.
type posError struct {
	at  int
	msg string
}

func (e *posError) Error() string { return e.msg }

// scanSQL is warehouse/render.go's scanSQL (see substitute).
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
				return &posError{i, fmt.Sprintf("has an unterminated %c", c)}
			}
			end++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			end = strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql)
			} else {
				end += i + 1
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			k := strings.Index(sql[i+2:], "*/")
			if k < 0 {
				return &posError{i, "has an unterminated /* comment"}
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
