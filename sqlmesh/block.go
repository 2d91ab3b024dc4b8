package sqlmesh

import (
	"fmt"
	"strings"
)

// termKind is the kind of one term of a property value.
type termKind int

const (
	termName   termKind = iota // an identifier, possibly dotted: a.b, "x y".c
	termString                 // 'text'
	termNumber                 // 12
	termParen                  // ( items )
	termBrack                  // [ items ]
	termOther                  // a lone punctuation character
)

// term is one term of a value: a name, a literal or a bracketed group.
type term struct {
	kind      termKind
	text      string   // the name (dotted as written, quotes removed), string or number
	parts     []string // a name's dotted parts
	quoted    bool     // a name with a double-quoted part
	items     []item   // a group's items
	off, end  int      // source span
	line, col int
}

// item is one comma-separated entry of a group: its terms, and when it is
// written `key := value`, the key and the terms after :=.
type item struct {
	key       string // set when assign
	keyLine   int
	assign    bool
	terms     []term
	off, end  int
	line, col int
}

// property is one entry of a MODEL or AUDIT block: its name and value terms.
type property struct {
	name      string // lower-cased
	written   string
	terms     []term
	off, end  int // span of the value (after the name)
	line, col int
}

// parser reads a property block from a lexer, one token of lookahead.
type parser struct {
	lx   *lexer
	tok  token
	prop string // the property being read, for errors
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Property = p.prop
		}
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errTok(format string, args ...any) error {
	return &Error{File: p.lx.file, Line: p.tok.line, Property: p.prop,
		Msg: fmt.Sprintf(format, args...)}
}

// block reads `KEYWORD ( properties ) [;]` with the lexer positioned at its
// first token, and returns the properties and the offset just past the
// block (after the semicolon if there is one).
func (p *parser) block(keyword string) ([]property, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tIdent || !strings.EqualFold(p.tok.text, keyword) {
		return nil, p.errTok("expected %s (…), got %s", keyword, p.tok.describe(p.lx.src))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLParen {
		return nil, p.errTok("expected '(' after %s, got %s", keyword, p.tok.describe(p.lx.src))
	}
	openLine := p.tok.line
	if err := p.advance(); err != nil {
		return nil, err
	}
	var props []property
	seen := map[string]int{}
	for p.tok.kind != tRParen {
		if p.tok.kind == tEOF {
			p.prop = ""
			return nil, &Error{File: p.lx.file, Line: openLine, Msg: fmt.Sprintf("%s ( opened here is never closed", keyword)}
		}
		if p.tok.kind != tIdent {
			p.prop = ""
			return nil, p.errTok("expected a property name, got %s", p.tok.describe(p.lx.src))
		}
		pr := property{name: strings.ToLower(p.tok.text), written: p.tok.text, line: p.tok.line, col: p.tok.col}
		p.prop = pr.name
		if first, dup := seen[pr.name]; dup {
			return nil, p.errTok("set twice (first on line %d)", first)
		}
		seen[pr.name] = pr.line
		if err := p.advance(); err != nil {
			return nil, err
		}
		pr.off = p.tok.off
		terms, err := p.terms()
		if err != nil {
			return nil, err
		}
		if len(terms) == 0 {
			return nil, p.errTok("missing value, got %s", p.tok.describe(p.lx.src))
		}
		pr.terms = terms
		pr.end = terms[len(terms)-1].end
		props = append(props, pr)
		switch p.tok.kind {
		case tComma:
			p.prop = "" // what follows the comma is no longer this property's
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tRParen:
		default:
			return nil, p.errTok("expected ',' or ')' after the value, got %s", p.tok.describe(p.lx.src))
		}
	}
	p.prop = ""
	return props, nil
}

// terms reads terms up to a comma, a closing bracket, a semicolon, := or
// the end.
func (p *parser) terms() ([]term, error) {
	var out []term
	for {
		switch p.tok.kind {
		case tComma, tRParen, tRBrack, tSemi, tEOF, tAssign:
			return out, nil
		}
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
}

// term reads one term.
func (p *parser) term() (term, error) {
	t := term{off: p.tok.off, end: p.tok.end, line: p.tok.line, col: p.tok.col, text: p.tok.text}
	switch p.tok.kind {
	case tIdent, tQIdent:
		t.kind = termName
		for {
			t.parts = append(t.parts, p.tok.text)
			t.quoted = t.quoted || p.tok.kind == tQIdent
			t.end = p.tok.end
			if err := p.advance(); err != nil {
				return t, err
			}
			if p.tok.kind != tDot || p.tok.off != t.end {
				break
			}
			if err := p.advance(); err != nil {
				return t, err
			}
			if p.tok.kind != tIdent && p.tok.kind != tQIdent {
				return t, p.errTok("expected a name after '.', got %s", p.tok.describe(p.lx.src))
			}
		}
		t.text = strings.Join(t.parts, ".")
		return t, nil
	case tString, tNumber, tOther, tDot:
		t.kind = termString
		if p.tok.kind == tNumber {
			t.kind = termNumber
		} else if p.tok.kind != tString {
			t.kind = termOther
		}
		return t, p.advance()
	case tLParen, tLBrack:
		closeKind, closeText := tRParen, ")"
		t.kind = termParen
		if p.tok.kind == tLBrack {
			closeKind, closeText, t.kind = tRBrack, "]", termBrack
		}
		open := p.tok
		if err := p.advance(); err != nil {
			return t, err
		}
		for p.tok.kind != closeKind {
			if p.tok.kind == tEOF {
				return t, &Error{File: p.lx.file, Line: open.line, Col: open.col, Property: p.prop,
					Msg: fmt.Sprintf("'%s' opened here is never closed", open.text)}
			}
			it, err := p.item()
			if err != nil {
				return t, err
			}
			if len(it.terms) == 0 && !it.assign {
				return t, p.errTok("expected a value or '%s', got %s", closeText, p.tok.describe(p.lx.src))
			}
			t.items = append(t.items, it)
			if p.tok.kind == tComma {
				if err := p.advance(); err != nil {
					return t, err
				}
				continue
			}
			if p.tok.kind == tEOF {
				continue // reported as never closed
			}
			if p.tok.kind != closeKind {
				return t, p.errTok("expected ',' or '%s', got %s", closeText, p.tok.describe(p.lx.src))
			}
		}
		t.end = p.tok.end
		return t, p.advance()
	}
	return t, p.errTok("unexpected %s", p.tok.describe(p.lx.src))
}

// item reads one entry of a group: terms, or `key := terms`.
func (p *parser) item() (item, error) {
	it := item{off: p.tok.off, line: p.tok.line, col: p.tok.col}
	terms, err := p.terms()
	if err != nil {
		return it, err
	}
	if p.tok.kind == tAssign {
		if len(terms) != 1 || terms[0].kind != termName || len(terms[0].parts) != 1 {
			return it, p.errTok("expected one name before ':='")
		}
		it.assign, it.key, it.keyLine = true, strings.ToLower(terms[0].text), terms[0].line
		if err := p.advance(); err != nil {
			return it, err
		}
		if terms, err = p.terms(); err != nil {
			return it, err
		}
		if len(terms) == 0 {
			return it, p.errTok("missing value after '%s :='", it.key)
		}
	}
	it.terms = terms
	if len(terms) > 0 {
		it.end = terms[len(terms)-1].end
	}
	return it, nil
}

// raw is the source text of terms, as written.
func raw(src []byte, terms []term) string {
	if len(terms) == 0 {
		return ""
	}
	return string(src[terms[0].off:terms[len(terms)-1].end])
}
