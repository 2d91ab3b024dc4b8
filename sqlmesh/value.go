package sqlmesh

import "strings"

// ValueKind is the type of a property argument.
type ValueKind int

// The kinds of Value.
const (
	Ident  ValueKind = iota // a bare or quoted name: status, "My Col", a.b
	String                  // 'text'
	Number                  // 12, 1.5 (Text is the literal)
	Bool                    // true or false (any case)
	List                    // [a, b] or (a, b)
	Expr                    // anything else, kept as written in Text
)

// Value is a typed argument, such as the values of an audit's arguments or
// of a kind's settings.
type Value struct {
	Kind ValueKind
	Text string  // the name, string content, number literal, true/false, or raw text
	List []Value // a List's elements
	Line int
}

// value turns terms into a Value.
func value(src []byte, terms []term) Value {
	if len(terms) != 1 {
		return Value{Kind: Expr, Text: raw(src, terms), Line: terms[0].line}
	}
	t := terms[0]
	v := Value{Text: t.text, Line: t.line}
	switch t.kind {
	case termName:
		v.Kind = Ident
		if !t.quoted && len(t.parts) == 1 {
			if l := strings.ToLower(t.text); l == "true" || l == "false" {
				v.Kind, v.Text = Bool, l
			}
		}
	case termString:
		v.Kind = String
	case termNumber:
		v.Kind = Number
	case termParen, termBrack:
		v.Kind, v.Text = List, raw(src, terms)
		for _, it := range t.items {
			if it.assign || len(it.terms) == 0 {
				return Value{Kind: Expr, Text: raw(src, terms), Line: t.line}
			}
			v.List = append(v.List, value(src, it.terms))
		}
	default:
		v.Kind, v.Text = Expr, raw(src, terms)
	}
	return v
}
