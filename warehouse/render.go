package warehouse

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Model is what the warehouse needs to know of one model's snapshot.
type Model struct {
	// Name is the model's name; an environment's view is <env>.<Name>,
	// or <schema>__<env>.<model> for a schema-qualified name
	// "<schema>.<model>" (ViewOf).
	Name string
	// Table is the snapshot table in schema "tidemark" (e.g. "hourly__3f2a9c").
	Table string
	// SQL is one SELECT (it may start with its own WITH) over sources and
	// upstream model names. It refers to the interval as @start_ts and
	// @end_ts.
	SQL string
	// TimeColumn is the column of the query's rows that places them in an
	// interval (a TIMESTAMP holding UTC).
	TimeColumn string
	// Upstream maps each upstream model name the SQL reads to that
	// upstream snapshot's table in schema "tidemark".
	Upstream map[string]string
	// Snapshot names the snapshot this model is (e.g. "agg@v2"); a write
	// records it as the interval's writer (Writers). Optional.
	Snapshot string
	// Macros is the vocabulary of SQL's macros (and of its custom
	// audits'): "" tidemark's @start_ts and @end_ts, MacrosSQLMesh
	// SQLMesh's (SubstituteMacrosIn).
	Macros string
	// Timeout bounds one computation of the model (an interval's write, its
	// table's creation, a verification); 0 means Options.ModelTimeout.
	Timeout time.Duration
	// Kind is how the model is computed: KindInterval ("", interval by
	// interval, by TimeColumn), or one of the kinds computed whole
	// (KindFull, KindView, KindSeed), which have no TimeColumn.
	Kind string
	// Seed is a KindSeed model's CSV content (a header row, then its
	// rows); such a model has no SQL.
	Seed string
}

// Range is a half-open interval of time [Start, End).
type Range struct {
	Start, End time.Time
}

// Schema is the schema of the snapshot tables.
const Schema = "tidemark"

// quoteIdent quotes an identifier the way both DuckDB and Postgres read it.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// qualified is schema.name, both quoted.
func qualified(schema, name string) string {
	return quoteIdent(schema) + "." + quoteIdent(name)
}

// ViewOf is the schema and name of the view of model in environment env:
// <env>.<model>, or <schema>__<env>.<model> for a schema-qualified model
// "<schema>.<model>" (models.ViewOf computes the same; models checks that
// the schema fits an identifier).
func ViewOf(env, model string) (schema, view string) {
	if s, m, ok := strings.Cut(model, "."); ok {
		return s + "__" + env, m
	}
	return env, model
}

// upstreamName reports whether s can name an upstream model's CTE: a
// plain identifier (plainIdent), or a schema-qualified model's name, two
// plain identifiers joined by one '.', which model SQL writes as one
// quoted identifier ("sushi.orders").
func upstreamName(s string) bool {
	if schema, model, ok := strings.Cut(s, "."); ok {
		return plainIdent(schema) && plainIdent(model)
	}
	return plainIdent(s)
}

// plainIdent reports whether s is a lower-case SQL identifier that reads
// the same quoted and unquoted in both engines.
func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// render turns model SQL into runnable SQL: the upstream CTE prefix, and
// its macros (in m.Macros' vocabulary) computed from start/end
// (paramStart/paramEnd, or nullTS), @this_model being m's own table.
// It refuses any other @name, and positional parameters of its own.
func render(m Model, start, end string) (string, error) {
	r, err := SubstituteMacrosIn(m.Macros, m.SQL, start, end, thisTable(m))
	if err != nil {
		return "", fmt.Errorf("model %q: %w", m.Name, err)
	}
	if len(m.Upstream) == 0 {
		return Wrap(r.Text), nil
	}
	names := make([]string, 0, len(m.Upstream))
	for n := range m.Upstream {
		if !upstreamName(n) {
			return "", fmt.Errorf("model %q: upstream name %q is not a plain lower-case identifier, nor two joined by one '.' (the CTE binding cannot cover it)", m.Name, n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("WITH ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s AS (SELECT * FROM %s)", quoteIdent(n), qualified(Schema, m.Upstream[n]))
	}
	b.WriteString("\n" + Wrap(r.Text))
	return b.String(), nil
}

// thisTable is what @this_model becomes in m's own SQL: its snapshot
// table, schema-qualified and quoted ("" without one: refused).
func thisTable(m Model) string {
	if m.Table == "" {
		return ""
	}
	return qualified(Schema, m.Table)
}

// readOnlyStatement reports why sql is not one read-only statement, or "".
func readOnlyStatement(sql string) string {
	var code strings.Builder
	err := scanSQL(sql, func(i int, c byte) (int, error) {
		code.WriteByte(c)
		return i + 1, nil
	}, func(s string) {
		if strings.HasPrefix(s, "--") || strings.HasPrefix(s, "/*") {
			code.WriteByte(' ')
			return
		}
		code.WriteString("''") // a literal's content is not code
	})
	if err != nil {
		return err.Error()
	}
	text := strings.TrimRight(strings.TrimSpace(code.String()), "; \t\r\n")
	if strings.Contains(text, ";") {
		return "more than one statement"
	}
	first := strings.ToUpper(strings.TrimLeft(text, "( \t\r\n"))
	if k := strings.IndexFunc(first, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r == '_') }); k >= 0 {
		first = first[:k]
	}
	if first == "EXPLAIN" && strings.Contains(strings.ToUpper(text), "ANALY") {
		return "EXPLAIN ANALYZE runs its statement"
	}
	switch first {
	case "SELECT", "WITH", "SHOW", "DESCRIBE", "EXPLAIN", "VALUES", "TABLE", "FROM", "SUMMARIZE":
		return ""
	case "":
		return "empty statement"
	}
	return first + " is not a read-only statement"
}
