package sqlmesh

import (
	"strings"
	"time"
)

// Param is an @name of an audit's query that SubstituteParams left as it
// was: its name (as written, without the '@') and where it is.
type Param struct {
	Name string
	Line int // 1-based, in the query given
	Off  int // byte offset of the '@'
}

// SubstituteParams replaces in an audit's query each @name whose
// lower-cased name is a key of args by args' text (SQLMesh's audit
// arguments: @column becomes the column a model's call gives). It reads
// the query with this package's tokenizer, so an @name inside a string
// literal, a quoted identifier or a comment is left alone; the rest of the
// text is kept byte for byte. Left are the @names it did not replace, in
// order (macros such as @this_model, or an argument nobody gave). file
// names the query's file in errors (an unterminated string or comment).
func SubstituteParams(file, query string, args map[string]string) (out string, left []Param, err error) {
	lx := newLexer(file, []byte(query), 0, 1, 1)
	var b strings.Builder
	last := 0
	var at *token
	for {
		t, err := lx.next()
		if err != nil {
			return "", nil, err
		}
		if t.kind == tEOF {
			break
		}
		if at != nil && t.kind == tIdent && t.off == at.end {
			if v, ok := args[strings.ToLower(t.text)]; ok {
				b.WriteString(query[last:at.off])
				b.WriteString(v)
				last = t.end
			} else {
				left = append(left, Param{Name: t.text, Line: at.line, Off: at.off})
			}
		}
		at = nil
		if t.kind == tOther && t.text == "@" {
			at = &t
		}
	}
	b.WriteString(query[last:])
	return b.String(), left, nil
}

// TrimQuery is a query as a file writes it without what ends it: its
// final ';' (several: each), even when comments follow it (they are kept:
// they end at the line break the warehouse's wrapper adds), and the
// blanks at its end. It reads the query with this package's tokenizer,
// so a ';' inside a literal or a comment is not the end; a query the
// tokenizer cannot read (an unterminated literal) is only trimmed of
// blanks and ';' at its end, for the SQL check to place the problem.
func TrimQuery(file, query string) string {
	plain := strings.TrimRight(strings.TrimRight(query, " \t\r\n\f\v;"), " \t\r\n\f\v")
	lx := newLexer(file, []byte(query), 0, 1, 1)
	var toks []token
	for n := 0; n <= len(query); n++ {
		t, err := lx.next()
		if err != nil {
			return plain
		}
		if t.kind == tEOF {
			break
		}
		toks = append(toks, t)
	}
	for i := len(toks) - 1; i >= 0 && toks[i].kind == tSemi; i-- {
		query = query[:toks[i].off] + query[toks[i].end:]
	}
	return strings.TrimRight(query, " \t\r\n\f\v")
}

// SQL is the value as SQL text, for an audit's query: a name as written
// (double-quoted when it is not a plain dotted name), a string quoted with
// its quotes doubled, a number or boolean as written, a list or any other
// expression as written in the file.
func (v Value) SQL() string {
	switch v.Kind {
	case Ident:
		if plainDotted(v.Text) {
			return v.Text
		}
		return `"` + strings.ReplaceAll(v.Text, `"`, `""`) + `"`
	case String:
		return "'" + strings.ReplaceAll(v.Text, "'", "''") + "'"
	}
	return v.Text
}

// plainDotted: letters, digits and '_' in parts joined by '.', no part
// starting with a digit.
func plainDotted(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" || part[0] >= '0' && part[0] <= '9' {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// ParseTime reads a start as SQLMesh's files and config write it: a date
// 'YYYY-MM-DD' or an ISO timestamp (UTC when it names no zone).
func ParseTime(s string) (time.Time, error) {
	return parseStart(term{kind: termString, text: s})
}
