package sqlmesh

import (
	"fmt"
	"strings"
)

// AuditDef is one audit of a SQLMesh audit file: its AUDIT block's
// properties and its query.
type AuditDef struct {
	File string
	Line int // of the AUDIT keyword

	Name        string
	Blocking    bool // SQLMesh's default: true
	Standalone  bool
	Dialect     string
	Owner       string
	Description string

	// Defaults are the default values of the audit's arguments, by
	// lower-cased name (defaults (threshold := 10, column := id)).
	Defaults map[string]Value

	// Unknown are the properties this package does not read, in file order.
	Unknown []Property

	// Query is the audit's query verbatim, from its first non-blank
	// character up to the next AUDIT block or the end of the file, trailing
	// blanks trimmed; QueryLine is the line it starts on.
	Query     string
	QueryLine int
}

// ParseAudit reads a SQLMesh audit file: one or more AUDIT ( … ) blocks,
// each followed by its query. A query runs up to the next line whose first
// word is AUDIT followed by '(' (the query is not tokenized, so an AUDIT (
// at the start of a line inside a query's string is taken as the next
// block). Audit names must be unique within the file.
func ParseAudit(file string, src []byte) ([]*AuditDef, error) {
	lx := newLexer(file, src, 0, 1, 1)
	var out []*AuditDef
	seen := map[string]int{}
	for {
		if err := lx.skipSpace(); err != nil {
			return nil, err
		}
		if lx.off >= len(src) {
			break
		}
		a := &AuditDef{File: file, Line: lx.line, Blocking: true}
		p := &parser{lx: lx}
		props, err := p.block("AUDIT")
		if err != nil {
			return nil, err
		}
		// Past the ')' and an optional ';', the query runs to the next block.
		closeLine := p.tok.line
		save := *lx
		if t, err := lx.next(); err != nil || t.kind != tSemi {
			*lx = save
		}
		if err := skipBlank(lx); err != nil {
			return nil, err
		}
		a.QueryLine = lx.line
		end := nextAudit(src, lx.off)
		a.Query = strings.TrimRight(string(src[lx.off:end]), " \t\r\n\f\v")
		if strings.TrimSpace(a.Query) == "" {
			return nil, &Error{File: file, Line: closeLine, Property: "query", Msg: "missing: a query must follow the AUDIT block"}
		}
		for lx.off < end {
			lx.advance()
		}
		for _, pr := range props {
			if err := a.set(file, src, pr); err != nil {
				return nil, err
			}
		}
		if a.Name == "" {
			return nil, &Error{File: file, Line: a.Line, Property: "name", Msg: "missing: every audit needs a name"}
		}
		key := strings.ToLower(a.Name)
		if first, dup := seen[key]; dup {
			return nil, &Error{File: file, Line: a.Line, Property: "name", Msg: fmt.Sprintf("audit %s defined twice (first on line %d)", a.Name, first)}
		}
		seen[key] = a.Line
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, &Error{File: file, Line: 1, Msg: "no AUDIT ( … ) block"}
	}
	return out, nil
}

// nextAudit is the offset of the next line, after off, whose first word is
// AUDIT (any case) followed by optional blanks and '('; len(src) if none.
func nextAudit(src []byte, off int) int {
	for i := off; i < len(src); i++ {
		if i > off && src[i-1] != '\n' { // the query's start counts as a line start
			continue
		}
		j := i
		for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
			j++
		}
		if j+5 > len(src) || !strings.EqualFold(string(src[j:j+5]), "AUDIT") {
			continue
		}
		j += 5
		for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r' || src[j] == '\n') {
			j++
		}
		if j < len(src) && src[j] == '(' {
			return i
		}
	}
	return len(src)
}

// set reads one property into a.
func (a *AuditDef) set(file string, src []byte, pr property) error {
	fail := failAt(file, pr.name)
	var err error
	switch pr.name {
	case "name":
		a.Name, err = nameOrString(src, pr, fail)
	case "blocking":
		a.Blocking, err = boolValue(src, pr, fail)
	case "standalone":
		a.Standalone, err = boolValue(src, pr, fail)
	case "dialect":
		a.Dialect, err = nameOrString(src, pr, fail)
	case "owner":
		a.Owner, err = nameOrString(src, pr, fail)
	case "description":
		if len(pr.terms) != 1 || pr.terms[0].kind != termString {
			return fail(pr.line, "expected a description in quotes, got '%s'", raw(src, pr.terms))
		}
		a.Description = pr.terms[0].text
	case "defaults":
		if len(pr.terms) != 1 || pr.terms[0].kind != termParen {
			return fail(pr.line, "expected (name := value, …), got '%s'", raw(src, pr.terms))
		}
		a.Defaults = map[string]Value{}
		for _, it := range pr.terms[0].items {
			if !it.assign {
				return fail(it.line, "expected name := value, got '%s'", string(src[it.off:max(it.end, it.off)]))
			}
			if _, dup := a.Defaults[it.key]; dup {
				return fail(it.line, "%s set twice", it.key)
			}
			a.Defaults[it.key] = value(src, it.terms)
		}
	default:
		a.Unknown = append(a.Unknown, Property{Name: pr.written, Raw: raw(src, pr.terms), Line: pr.line})
	}
	return err
}

// boolValue reads true or false (any case, bare or quoted).
func boolValue(src []byte, pr property, fail failFunc) (bool, error) {
	if len(pr.terms) == 1 && (pr.terms[0].kind == termName || pr.terms[0].kind == termString) {
		switch strings.ToLower(pr.terms[0].text) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fail(pr.line, "expected true or false, got '%s'", raw(src, pr.terms))
}
