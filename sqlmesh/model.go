package sqlmesh

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Model is a SQLMesh model file: its MODEL block's properties and its query.
type Model struct {
	File string
	Line int // of the MODEL keyword

	Name   string // as written, e.g. sales.orders
	Schema string // every part before the last: sales (catalog.schema when three parts)
	Short  string // the last part: orders

	Kind        Kind
	Cron        string    // "" when not set (SQLMesh's default is @daily)
	Start       time.Time // UTC; zero when not set
	Owner       string
	Description string
	Dialect     string
	Grain       []string
	DependsOn   []string
	Audits      []AuditCall
	Columns     []Column

	// Unknown are the properties this package does not read, in file order.
	Unknown []Property

	// Lines are where each property given starts, by lower-cased name
	// (start, cron, dialect, …), so a later error can point at it.
	Lines map[string]int

	// Query is the rest of the file after the MODEL block, verbatim from its
	// first non-blank character, trailing blanks trimmed; QueryLine is the
	// line it starts on, so a later error can point into it. A SEED model
	// may have none (SQLMesh's seeds have no query): Query is "" and
	// QueryLine 0.
	Query     string
	QueryLine int
}

// Kind is a model's kind: a name and its settings.
type Kind struct {
	Name string // upper-cased: INCREMENTAL_BY_TIME_RANGE, FULL, VIEW, SEED, …
	Line int    // of the kind's name; without a kind (VIEW, SQLMesh's default), of the block's ')'

	// INCREMENTAL_BY_TIME_RANGE
	TimeColumn       string
	TimeFormat       string // the optional format of time_column (col, 'format')
	BatchSize        int    // 0 when not set
	Lookback         int
	BatchConcurrency int

	// SEED
	Path string

	// Settings are every setting as written, by lower-cased key; those this
	// package reads are in the fields above too.
	Settings map[string]Value
}

// The kinds whose settings this package reads; others are kept for the
// caller to refuse.
const (
	KindIncrementalByTimeRange = "INCREMENTAL_BY_TIME_RANGE"
	KindFull                   = "FULL"
	KindView                   = "VIEW"
	KindSeed                   = "SEED"
)

// AuditCall is one entry of a model's audits: a name and its arguments.
type AuditCall struct {
	Name string           // as written
	Args map[string]Value // by lower-cased argument name; nil without arguments
	Line int
}

// Column is one entry of a model's columns: a name and its type as written.
type Column struct {
	Name string
	Type string // e.g. DECIMAL(12,2)
	Line int
}

// Property is a property this package keeps without reading.
type Property struct {
	Name string // as written
	Raw  string // its value as written
	Line int
}

// ParseModel reads a SQLMesh model file: an optional leading comment block,
// a MODEL ( … ) block, then the query. file names the file in errors.
func ParseModel(file string, src []byte) (*Model, error) {
	lx := newLexer(file, src, 0, 1, 1)
	if err := lx.skipSpace(); err != nil {
		return nil, err
	}
	m := &Model{File: file, Line: lx.line}
	p := &parser{lx: lx}
	props, err := p.block("MODEL")
	if err != nil {
		return nil, err
	}
	closeLine := p.tok.line
	q, qline, err := query(p, "MODEL")
	noQuery := err
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Property != "query" {
			return nil, err
		}
	}
	m.Query, m.QueryLine = q, qline
	m.Lines = map[string]int{}
	for _, pr := range props {
		if err := m.set(file, src, pr); err != nil {
			return nil, err
		}
		m.Lines[pr.name] = pr.line
	}
	if noQuery != nil && m.Kind.Name != KindSeed {
		return nil, noQuery
	}
	if m.Name == "" {
		return nil, &Error{File: file, Line: m.Line, Property: "name", Msg: "missing: every model needs a name schema.model"}
	}
	if m.Kind.Name == "" {
		m.Kind.Name, m.Kind.Line = KindView, closeLine // SQLMesh's default kind
	}
	return m, nil
}

// query reads what follows a block's closing parenthesis: an optional
// semicolon, then the query verbatim up to the end.
func query(p *parser, keyword string) (string, int, error) {
	lx := p.lx
	// p.tok is the closing ')'; the lexer stands just past it.
	save := *lx
	t, err := lx.next()
	if err != nil || t.kind != tSemi {
		*lx = save
	}
	if err := skipBlank(lx); err != nil {
		return "", 0, err
	}
	rest := strings.TrimRight(string(lx.src[lx.off:]), " \t\r\n\f\v")
	if strings.TrimSpace(rest) == "" {
		return "", 0, &Error{File: lx.file, Line: p.tok.line, Property: "query",
			Msg: fmt.Sprintf("missing: a query must follow the %s block", keyword)}
	}
	return rest, lx.line, nil
}

// skipBlank skips whitespace only (comments before a query belong to it).
func skipBlank(lx *lexer) error {
	for lx.off < len(lx.src) {
		switch lx.src[lx.off] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			lx.advance()
		default:
			return nil
		}
	}
	return nil
}

// set reads one property into m.
func (m *Model) set(file string, src []byte, pr property) error {
	fail := failAt(file, pr.name)
	one := func() (term, error) {
		if len(pr.terms) != 1 {
			return term{}, fail(pr.terms[1].line, "expected one value, got %s after it (a missing comma?)", describeTerm(src, pr.terms[1]))
		}
		return pr.terms[0], nil
	}
	str := func(what string) (string, error) {
		t, err := one()
		if err != nil {
			return "", err
		}
		if t.kind != termString {
			return "", fail(t.line, "expected %s in quotes, got %s", what, describeTerm(src, t))
		}
		return t.text, nil
	}
	var err error
	switch pr.name {
	case "name":
		t, err := one()
		if err != nil {
			return err
		}
		parts := t.parts
		if t.kind == termString {
			parts = strings.Split(t.text, ".")
		} else if t.kind != termName {
			return fail(t.line, "expected a name schema.model, got %s", describeTerm(src, t))
		}
		if len(parts) < 2 || len(parts) > 3 {
			return fail(t.line, "expected a schema-qualified name schema.model, got %s", describeTerm(src, t))
		}
		for _, part := range parts {
			if part == "" {
				return fail(t.line, "empty part in name %s", describeTerm(src, t))
			}
		}
		m.Name = raw(src, pr.terms)
		if t.kind == termString {
			m.Name = t.text
		}
		m.Schema = strings.Join(parts[:len(parts)-1], ".")
		m.Short = parts[len(parts)-1]
	case "kind":
		m.Kind, err = parseKind(file, src, pr)
	case "cron":
		m.Cron, err = str("a cron expression")
	case "owner":
		m.Owner, err = nameOrString(src, pr, fail)
	case "description":
		m.Description, err = str("a description")
	case "dialect":
		m.Dialect, err = nameOrString(src, pr, fail)
	case "start":
		t, err := one()
		if err != nil {
			return err
		}
		m.Start, err = parseStart(t)
		if err != nil {
			return fail(t.line, "%v", err)
		}
	case "grain":
		m.Grain, err = nameList(src, pr, fail)
	case "depends_on":
		m.DependsOn, err = nameList(src, pr, fail)
	case "audits":
		m.Audits, err = parseAudits(src, pr, fail)
	case "columns":
		m.Columns, err = parseColumns(src, pr, fail)
	default:
		m.Unknown = append(m.Unknown, Property{Name: pr.written, Raw: raw(src, pr.terms), Line: pr.line})
	}
	return err
}

type failFunc func(line int, format string, args ...any) error

// failAt is the failFunc of property in file: an *Error naming both.
func failAt(file, property string) failFunc {
	return func(line int, format string, args ...any) error {
		return &Error{File: file, Line: line, Property: property, Msg: fmt.Sprintf(format, args...)}
	}
}

// describeTerm is how an error shows a term.
func describeTerm(src []byte, t term) string {
	if t.kind == termParen || t.kind == termBrack {
		return "'" + string(src[t.off]) + "'"
	}
	s := string(src[t.off:t.end])
	if t.kind == termString {
		return s // already in quotes
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return "'" + s + "'"
}

// nameOrString reads a value written as a bare name or a string.
func nameOrString(src []byte, pr property, fail failFunc) (string, error) {
	if len(pr.terms) != 1 {
		return "", fail(pr.terms[1].line, "expected one value, got %s after it (a missing comma?)", describeTerm(src, pr.terms[1]))
	}
	t := pr.terms[0]
	if t.kind != termName && t.kind != termString {
		return "", fail(t.line, "expected a name or a string, got %s", describeTerm(src, t))
	}
	return t.text, nil
}

// nameList reads a name, or a [list] or (list) of names.
func nameList(src []byte, pr property, fail failFunc) ([]string, error) {
	if len(pr.terms) != 1 {
		return nil, fail(pr.terms[1].line, "expected a name or a list, got %s after the first value", describeTerm(src, pr.terms[1]))
	}
	t := pr.terms[0]
	switch t.kind {
	case termName, termString:
		return []string{t.text}, nil
	case termParen, termBrack:
		out := []string{}
		for _, it := range t.items {
			if it.assign || len(it.terms) != 1 || (it.terms[0].kind != termName && it.terms[0].kind != termString) {
				return nil, fail(it.line, "expected a name in the list, got '%s'", string(src[it.off:max(it.end, it.off)]))
			}
			out = append(out, it.terms[0].text)
		}
		return out, nil
	}
	return nil, fail(t.line, "expected a name or a list, got %s", describeTerm(src, t))
}

// parseAudits reads a list of audit names or calls name(arg := value, …)
// (or arg = value, which SQLMesh reads alike).
func parseAudits(src []byte, pr property, fail failFunc) ([]AuditCall, error) {
	if len(pr.terms) != 1 || (pr.terms[0].kind != termParen && pr.terms[0].kind != termBrack) {
		return nil, fail(pr.line, "expected a list (…) of audits, got '%s'", raw(src, pr.terms))
	}
	out := []AuditCall{}
	for _, it := range pr.terms[0].items {
		if it.assign || len(it.terms) == 0 || it.terms[0].kind != termName {
			return nil, fail(it.line, "expected an audit name, got '%s'", string(src[it.off:max(it.end, it.off)]))
		}
		a := AuditCall{Name: it.terms[0].text, Line: it.terms[0].line}
		switch {
		case len(it.terms) == 1:
		case len(it.terms) == 2 && it.terms[1].kind == termParen:
			a.Args = map[string]Value{}
			for _, arg := range it.terms[1].items {
				if !arg.assign {
					// SQLMesh reads name = value as name := value.
					if ts := arg.terms; len(ts) >= 3 && ts[0].kind == termName && len(ts[0].parts) == 1 && !ts[0].quoted &&
						ts[1].kind == termOther && ts[1].text == "=" {
						arg.assign, arg.key, arg.keyLine, arg.terms = true, strings.ToLower(ts[0].text), ts[0].line, ts[2:]
					}
				}
				if !arg.assign {
					return nil, fail(arg.line, "audit %s: expected an argument name := value, got '%s'", a.Name, string(src[arg.off:max(arg.end, arg.off)]))
				}
				if _, dup := a.Args[arg.key]; dup {
					return nil, fail(arg.line, "audit %s: argument %s set twice", a.Name, arg.key)
				}
				a.Args[arg.key] = value(src, arg.terms)
			}
		default:
			return nil, fail(it.terms[1].line, "audit %s: expected '(' arguments ')' or ',', got %s", a.Name, describeTerm(src, it.terms[1]))
		}
		out = append(out, a)
	}
	return out, nil
}

// parseColumns reads (name TYPE, …).
func parseColumns(src []byte, pr property, fail failFunc) ([]Column, error) {
	if len(pr.terms) != 1 || pr.terms[0].kind != termParen {
		return nil, fail(pr.line, "expected a list (name TYPE, …), got '%s'", raw(src, pr.terms))
	}
	out := []Column{}
	for _, it := range pr.terms[0].items {
		if it.assign || len(it.terms) == 0 || it.terms[0].kind != termName || len(it.terms[0].parts) != 1 {
			return nil, fail(it.line, "expected a column name, got '%s'", string(src[it.off:max(it.end, it.off)]))
		}
		if len(it.terms) < 2 {
			return nil, fail(it.line, "column %s: missing its type", it.terms[0].text)
		}
		if it.terms[1].kind != termName {
			return nil, fail(it.terms[1].line, "column %s: expected a type name, got %s", it.terms[0].text, describeTerm(src, it.terms[1]))
		}
		out = append(out, Column{Name: it.terms[0].text, Type: raw(src, it.terms[1:]), Line: it.line})
	}
	return out, nil
}

// parseKind reads a kind: a name, or a name and its (settings).
func parseKind(file string, src []byte, pr property) (Kind, error) {
	fail := failAt(file, "kind")
	t := pr.terms[0]
	if t.kind != termName || len(t.parts) != 1 {
		return Kind{}, fail(t.line, "expected a kind name, got %s", describeTerm(src, t))
	}
	k := Kind{Name: strings.ToUpper(t.text), Line: t.line, Settings: map[string]Value{}}
	if len(pr.terms) > 2 || len(pr.terms) == 2 && pr.terms[1].kind != termParen {
		return Kind{}, fail(pr.terms[1].line, "%s: expected '(' settings ')' or ',', got %s", k.Name, describeTerm(src, pr.terms[1]))
	}
	if len(pr.terms) == 2 {
		for _, it := range pr.terms[1].items {
			var key string
			var vt []term
			if it.assign {
				key, vt = it.key, it.terms
			} else {
				if len(it.terms) < 2 || it.terms[0].kind != termName || len(it.terms[0].parts) != 1 {
					return Kind{}, fail(it.line, "%s: expected a setting 'name value', got '%s'", k.Name, string(src[it.off:max(it.end, it.off)]))
				}
				key, vt = strings.ToLower(it.terms[0].text), it.terms[1:]
			}
			if _, dup := k.Settings[key]; dup {
				return Kind{}, fail(it.line, "%s: setting %s set twice", k.Name, key)
			}
			k.Settings[key] = value(src, vt)
		}
	}
	intSetting := func(key string, min int) (int, error) {
		v, ok := k.Settings[key]
		if !ok {
			return 0, nil
		}
		n, err := strconv.Atoi(v.Text)
		if v.Kind != Number || err != nil || n < min {
			return 0, fail(v.Line, "%s: %s: expected a whole number >= %d, got '%s'", k.Name, key, min, v.Text)
		}
		return n, nil
	}
	var err error
	switch k.Name {
	case KindIncrementalByTimeRange:
		v, ok := k.Settings["time_column"]
		switch {
		case !ok:
			return Kind{}, fail(k.Line, "%s: missing time_column", k.Name)
		case v.Kind == Ident || v.Kind == String:
			k.TimeColumn = v.Text
		case v.Kind == List && len(v.List) == 2 && (v.List[0].Kind == Ident || v.List[0].Kind == String) && v.List[1].Kind == String:
			k.TimeColumn, k.TimeFormat = v.List[0].Text, v.List[1].Text
		default:
			return Kind{}, fail(v.Line, "%s: time_column: expected a column name or (column, 'format'), got '%s'", k.Name, v.Text)
		}
		if k.BatchSize, err = intSetting("batch_size", 1); err != nil {
			return Kind{}, err
		}
		if k.Lookback, err = intSetting("lookback", 0); err != nil {
			return Kind{}, err
		}
		if k.BatchConcurrency, err = intSetting("batch_concurrency", 1); err != nil {
			return Kind{}, err
		}
	case KindSeed:
		v, ok := k.Settings["path"]
		if !ok {
			return Kind{}, fail(k.Line, "%s: missing path", k.Name)
		}
		if v.Kind != String || v.Text == "" {
			return Kind{}, fail(v.Line, "%s: path: expected a path in quotes, got '%s'", k.Name, v.Text)
		}
		k.Path = v.Text
	}
	return k, nil
}

// startLayouts are the date and timestamp forms SQLMesh's start accepts
// here; a form without a zone is UTC.
var startLayouts = []string{
	"2006-01-02",
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
}

// parseStart reads a start: a date or timestamp string, or a number of
// milliseconds since the epoch (SQLMesh's reading of a number).
func parseStart(t term) (time.Time, error) {
	switch t.kind {
	case termNumber:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("expected a date, a timestamp or epoch milliseconds, got '%s'", t.text)
		}
		return time.UnixMilli(n).UTC(), nil
	case termString:
		s := strings.TrimSpace(t.text)
		for _, layout := range startLayouts {
			if ts, err := time.Parse(layout, s); err == nil {
				return ts.UTC(), nil
			}
		}
		return time.Time{}, fmt.Errorf("expected a date 'YYYY-MM-DD' or an ISO timestamp, got '%s'", t.text)
	}
	return time.Time{}, fmt.Errorf("expected a date in quotes, got '%s'", t.text)
}
