package sqlcheck

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/warehouse"
)

// TableRef is one table a model's SQL reads by name (not a CTE in scope
// there), as DuckDB's parser reads it: Catalog and Schema are empty when
// the reference does not qualify the name. Start and End are the byte
// offsets of the reference's text in the model's SQL (sushi.orders,
// "sushi"."orders": the qualified name, never its alias), so a caller can
// replace it. Alias is the alias the query gives it (FROM sushi.orders AS
// o, or FROM sushi.orders o), "" when none: the query then names the
// table by Name (orders.amount), which a replacement must keep (ReplacedBy).
type TableRef struct {
	Catalog, Schema, Name string
	Alias                 string
	Start, End            int
}

// ReplacedBy is the text replacing r's by name, the one quoted identifier
// "name", keeping the name the query calls r by: when r has no alias and
// is not already that identifier, "name" AS "<r's name>" (lower case: a
// bare name both engines fold), so that a column qualified by it
// (orders.amount of FROM sushi.orders) still binds.
func (r TableRef) ReplacedBy(name string) string {
	q := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	if r.Alias != "" || r.Catalog == "" && r.Schema == "" && strings.EqualFold(r.Name, name) {
		return q
	}
	return q + ` AS "` + strings.ReplaceAll(strings.ToLower(r.Name), `"`, `""`) + `"`
}

// Qualified is the reference as schema.name (catalog.schema.name), or its
// plain name.
func (r TableRef) Qualified() string {
	return strings.TrimLeft(r.Catalog+"."+r.Schema+"."+r.Name, ".")
}

// Tables lists the tables sql reads by name (TableRef), in the order of
// their offsets: DuckDB's parser reads it (its macros substituted as the
// warehouse substitutes them in the vocabulary macros, Model.Macros; a
// model's @this_model refused as Check refuses it), and a reference to a
// CTE in scope is not a table. It checks nothing else: Check says whether
// the SQL may run. A SQL the parser refuses is an *Error placed in sql.
func Tables(ctx context.Context, sql, macros string) ([]TableRef, error) {
	if e := checkChars(sql); e != nil {
		return nil, e
	}
	r, err := warehouse.SubstituteMacrosIn(macros, sql, warehouse.ParamStart, warehouse.ParamEnd, "")
	if err != nil {
		return nil, macroErr(sql, err)
	}
	sb, err := openSandbox(ctx)
	if err != nil {
		return nil, &Error{Field: "sql", Msg: err.Error(), Err: err}
	}
	defer sb.close()
	tree, err := sb.parse(ctx, r.Text)
	if err != nil {
		return nil, parseErr(sql, r, err)
	}
	var refs []TableRef
	w := walker{collect: &refs}
	w.walk(tree.Statements, nil)
	if w.err != nil { // collecting refuses nothing; kept for safety
		return nil, w.err
	}
	out := refs[:0]
	for _, t := range refs {
		end := refEnd(r.Text, t.Start, t)
		if end < 0 {
			return nil, errAt(sql, r.Source(t.Start), "reads %s, whose name's text the parser placed where it cannot be found", t.Qualified())
		}
		t.Start, t.End = r.Source(t.Start), r.Source(end)
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TableRef) int { return cmp.Compare(a.Start, b.Start) })
	return out, nil
}

// refEnd is the end of the dotted name starting at byte i of text whose
// parts the parser read as ref's (each a quoted identifier, its quotes
// doubled inside, or a bare one, compared without case), or -1 when the
// text there is not that name.
func refEnd(text string, i int, ref TableRef) int {
	var parts []string
	for _, p := range []string{ref.Catalog, ref.Schema, ref.Name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if i < 0 || i > len(text) {
		return -1
	}
	for k, want := range parts {
		if k > 0 {
			i = skipSpace(text, i)
			if i >= len(text) || text[i] != '.' {
				return -1
			}
			i = skipSpace(text, i+1)
		}
		got, next := identAt(text, i)
		if next < 0 || !strings.EqualFold(got, want) {
			return -1
		}
		i = next
	}
	return i
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// identAt reads one identifier at byte i of s: "quoted" (a doubled quote
// is one) or bare (letters, digits, '_', '$' and any non-ASCII byte). It
// returns the identifier and where it ends, or -1.
func identAt(s string, i int) (string, int) {
	if i >= len(s) {
		return "", -1
	}
	if s[i] == '"' {
		var b strings.Builder
		for j := i + 1; j < len(s); j++ {
			if s[j] == '"' {
				if j+1 < len(s) && s[j+1] == '"' {
					b.WriteByte('"')
					j++
					continue
				}
				return b.String(), j + 1
			}
			b.WriteByte(s[j])
		}
		return "", -1
	}
	j := i
	for j < len(s) {
		c := s[j]
		if c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80 {
			j++
			continue
		}
		break
	}
	if j == i {
		return "", -1
	}
	return s[i:j], j
}

// Rewrite replaces the text of each reference in refs (Tables' answer for
// sql: offsets into sql, in order) for which to gives a replacement, and
// keeps the rest of sql byte for byte: comments, literals and references
// to gives none for. A reference whose offsets do not fit sql, or overlap
// an earlier one, is left as it is.
func Rewrite(sql string, refs []TableRef, to func(TableRef) (string, bool)) string {
	var b strings.Builder
	at := 0
	for _, r := range refs {
		if r.Start < at || r.End < r.Start || r.End > len(sql) {
			continue
		}
		s, ok := to(r)
		if !ok {
			continue
		}
		b.WriteString(sql[at:r.Start])
		b.WriteString(s)
		at = r.End
	}
	b.WriteString(sql[at:])
	return b.String()
}

// QuoteModels is a Rewrite replacement for a project's schema-qualified
// models: a reference schema.name (no catalog; DuckDB folds its case, so
// Sushi.Orders and "sushi"."orders" are one) for which isModel("sushi.orders")
// is true becomes the one quoted identifier "sushi.orders", the name
// stored model SQL reads an upstream schema-qualified model by (the
// warehouse binds it as a CTE of that name). Every other reference, and
// one already written "sushi.orders", is kept.
func QuoteModels(isModel func(name string) bool) func(TableRef) (string, bool) {
	return func(r TableRef) (string, bool) {
		if r.Catalog != "" || r.Schema == "" {
			return "", false
		}
		name := strings.ToLower(r.Schema + "." + r.Name)
		if !isModel(name) {
			return "", false
		}
		return r.ReplacedBy(name), true
	}
}
