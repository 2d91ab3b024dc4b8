package sqlmesh

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a token of the property syntax.
type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // bare word: letters, digits, _, $ (not starting with a digit)
	tQIdent         // "double-quoted" identifier, doubled quotes unescaped
	tString         // 'single-quoted' string, doubled quotes unescaped
	tNumber         // 12, -3, 1.5, 2e3
	tLParen         // (
	tRParen         // )
	tLBrack         // [
	tRBrack         // ]
	tComma          // ,
	tSemi           // ;
	tDot            // .
	tAssign         // :=
	tOther          // any other single character (=, *, @, …)
)

// token is one token with its position: off/end are byte offsets into the
// source, line and col are 1-based (col counts runes).
type token struct {
	kind      tokKind
	text      string // value: unescaped for strings and quoted identifiers
	off, end  int
	line, col int
}

// describe is how an error shows a token.
func (t token) describe(src []byte) string {
	if t.kind == tEOF {
		return "end of file"
	}
	s := string(src[t.off:t.end])
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	if t.kind == tString {
		return s // already in quotes
	}
	return "'" + s + "'"
}

// lexer turns the bytes of a property block into tokens, skipping
// whitespace and comments.
type lexer struct {
	file      string
	src       []byte
	off       int
	line, col int // of src[off]
}

func newLexer(file string, src []byte, off, line, col int) *lexer {
	return &lexer{file: file, src: src, off: off, line: line, col: col}
}

func (l *lexer) errAt(line, col int, format string, args ...any) error {
	return &Error{File: l.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// advance moves past one rune, keeping line and col.
func (l *lexer) advance() rune {
	r, n := utf8.DecodeRune(l.src[l.off:])
	l.off += n
	if r == '\n' {
		l.line++
		l.col = 1
	} else {
		l.col++
	}
	return r
}

func (l *lexer) peekByte(i int) byte {
	if l.off+i < len(l.src) {
		return l.src[l.off+i]
	}
	return 0
}

// skipSpace skips whitespace and comments; an unterminated /* comment is an
// error.
func (l *lexer) skipSpace() error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.advance()
		case c == '-' && l.peekByte(1) == '-':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance()
			}
		case c == '/' && l.peekByte(1) == '*':
			line, col := l.line, l.col
			l.advance()
			l.advance()
			for {
				if l.off >= len(l.src) {
					return l.errAt(line, col, "unterminated /* comment")
				}
				if l.src[l.off] == '*' && l.peekByte(1) == '/' {
					l.advance()
					l.advance()
					break
				}
				l.advance()
			}
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// next returns the next token.
func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	t := token{off: l.off, line: l.line, col: l.col}
	if l.off >= len(l.src) {
		t.kind, t.end = tEOF, l.off
		return t, nil
	}
	c := l.src[l.off]
	r, _ := utf8.DecodeRune(l.src[l.off:])
	switch {
	case c == '\'' || c == '"':
		val, err := l.quoted(c)
		if err != nil {
			return token{}, err
		}
		t.kind, t.text = tString, val
		if c == '"' {
			t.kind = tQIdent
		}
	case isIdentStart(r):
		for l.off < len(l.src) {
			r, _ := utf8.DecodeRune(l.src[l.off:])
			if !isIdentPart(r) {
				break
			}
			l.advance()
		}
		t.kind, t.text = tIdent, string(l.src[t.off:l.off])
	case isDigit(c) || (c == '-' || c == '+' || c == '.') && isDigit(l.peekByte(1)):
		l.number()
		t.kind, t.text = tNumber, string(l.src[t.off:l.off])
	case c == ':' && l.peekByte(1) == '=':
		l.advance()
		l.advance()
		t.kind, t.text = tAssign, ":="
	default:
		l.advance()
		t.text = string(l.src[t.off:l.off])
		switch c {
		case '(':
			t.kind = tLParen
		case ')':
			t.kind = tRParen
		case '[':
			t.kind = tLBrack
		case ']':
			t.kind = tRBrack
		case ',':
			t.kind = tComma
		case ';':
			t.kind = tSemi
		case '.':
			t.kind = tDot
		default:
			t.kind = tOther
		}
	}
	t.end = l.off
	return t, nil
}

// number consumes a numeric literal: sign, digits, fraction, exponent.
func (l *lexer) number() {
	if c := l.src[l.off]; c == '-' || c == '+' {
		l.advance()
	}
	for l.off < len(l.src) && isDigit(l.src[l.off]) {
		l.advance()
	}
	if l.peekByte(0) == '.' && isDigit(l.peekByte(1)) {
		l.advance()
		for l.off < len(l.src) && isDigit(l.src[l.off]) {
			l.advance()
		}
	}
	if c := l.peekByte(0); (c == 'e' || c == 'E') && (isDigit(l.peekByte(1)) ||
		(l.peekByte(1) == '-' || l.peekByte(1) == '+') && isDigit(l.peekByte(2))) {
		l.advance()
		if c := l.src[l.off]; c == '-' || c == '+' {
			l.advance()
		}
		for l.off < len(l.src) && isDigit(l.src[l.off]) {
			l.advance()
		}
	}
}

// quoted consumes a string quoted by q, where a doubled q stands for one.
func (l *lexer) quoted(q byte) (string, error) {
	line, col := l.line, l.col
	l.advance()
	var b []byte
	for {
		if l.off >= len(l.src) {
			what := "string"
			if q == '"' {
				what = "quoted identifier"
			}
			return "", l.errAt(line, col, "unterminated %s", what)
		}
		c := l.src[l.off]
		if c == q {
			if l.peekByte(1) == q {
				b = append(b, q)
				l.advance()
				l.advance()
				continue
			}
			l.advance()
			return string(b), nil
		}
		start := l.off
		l.advance()
		b = append(b, l.src[start:l.off]...)
	}
}
