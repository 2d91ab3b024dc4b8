// Package sqlcheck checks a model's SQL with DuckDB's own parser and
// binder before the model is registered, so that nothing runs in the
// warehouse that was not declared, and a query that cannot run is refused
// at register_snapshot rather than failing at every computation.
//
// What Check accepts. A model's SQL, its macros replaced the way the
// warehouse replaces them in the model's vocabulary (Model.Macros:
// tidemark's @start_ts and @end_ts, or SQLMesh's; the same renderer,
// warehouse.SubstituteMacrosIn: the text checked is the text that runs;
// SQLMesh's @this_model is refused in a model's SQL, which would bind
// against its own result), must be:
//
//   - free of characters that tools read differently: control characters
//     other than tab, CR and LF, and the Unicode line separators U+0085,
//     U+2028, U+2029 (one lexer's comment is another's line break);
//   - exactly one statement for DuckDB's parser (json_serialize_sql), a
//     SELECT (WITH, UNION, VALUES included), also inside the warehouse's
//     wrapper ("SELECT * FROM (" + sql + "\n) q"), so a ';' or a comment
//     cannot end the wrapper early;
//   - reading only its declared upstream models (depends_on) and the CTEs
//     in scope, by their plain names: a schema- or catalog-qualified
//     table (tidemark."x__abc", prod.events, information_schema.tables), a
//     file ('/etc/passwd'), any other name is refused. Scope is the
//     engines': a CTE's body sees the CTEs before it in its WITH (and the
//     enclosing ones), never itself nor a later one, whose name would
//     reach the catalog's table (WITH pg_statistic AS (SELECT * FROM
//     pg_statistic)); a recursive CTE sees itself in its recursive term;
//   - reading no table of a reserved name (Reserved: pg_*, duckdb_*,
//     sqlite_*, pragma_*, information_schema, main, temp, system, memory,
//     public, tidemark), not even an upstream model's or a CTE's;
//   - of a bounded expanded size: MaxExpansion tables once every CTE
//     reference is expanded (CTEs doubling each other bind exponentially);
//   - calling the list and string builders that DuckDB allocates outside
//     its memory limit (range and generate_series as lists, repeat, lpad,
//     rpad, list_resize, array_resize, to_base, bitstring,
//     equi_width_bins) only with integer literal sizes of at most MaxSize,
//     format and printf only with a literal format without computed or
//     large widths, and never list_reduce or sleep_ms;
//   - calling table functions only from a small allowlist that generates
//     data (range, generate_series, unnest), never read_text, read_csv,
//     glob, duckdb_settings() and the like; no qualified function, and no
//     scalar function of a denylist that reads or changes the server's
//     state (current_setting, nextval, pg_read_file, query_to_xml, …);
//   - bound by DuckDB's binder against its direct upstream models'
//     columns, in a sandbox holding those tables only (each upstream's
//     columns come from binding its own SQL, recursively, each in a
//     sandbox of its own): a misspelt column or function is refused with
//     DuckDB's message;
//   - returning its time column, of a date or timestamp type;
//   - its audits (Model.Audits) fitting its result: a built-in audit's
//     columns are columns of it, accepted_range's bounds values of its
//     column's type; a custom audit's SQL (@this_model and the model's
//     vocabulary's macros replaced as the warehouse replaces them:
//     warehouse.SubstituteAuditMacrosIn) passes every check above with @this_model
//     (a table of the model's result's columns) as its one upstream
//     table, and binds. A refusal names the audit's field
//     ("audits[2].sql", "audits[0].columns[1]").
//
// Everything runs in a private in-memory DuckDB opened per check with
// enable_external_access=false and lock_configuration=true, one thread and
// a memory limit; the query is only described (bound), never executed.
// Known gap: the warehouse runs the query in-process, and a string or list
// grown by data rather than by a size argument (s || s, compounded through
// CTEs or a recursive CTE) is still allocated outside DuckDB's memory
// limit; running the query in a child process with an OS memory limit is
// the complete fix.
// A build without cgo has no DuckDB: Check then refuses every model with
// SQL (ErrNoParser), saying why.
//
// Postgres warehouses: DuckDB's parser derives from PostgreSQL's, so the
// statement and reference checks hold for both; a model must also bind in
// DuckDB, so SQL only Postgres understands is refused (docs/security.md).
//
// Importers: server (serve wires ForEngine into engine.Config.Check),
// cmd/tidemark (apply checks a file's models locally first), scenario and
// sqlmesh/project.
package sqlcheck

import (
	"context"
	"errors"
	"fmt"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/warehouse"
	"slices"
	"strings"
)

// Model is what the check needs of a model version.
type Model struct {
	Name       string
	SQL        string
	TimeColumn string
	// Kind is the version's kind (events.Kind's values; "" is
	// incremental). A kind computed whole (full, view, seed) has no time
	// column to check; a seed has no SQL: its Seed content is checked
	// as the warehouse reads it (warehouse.SeedColumns), and a model
	// reading it sees the columns found there.
	Kind string
	// Seed is a seed's CSV content.
	Seed string
	// DependsOn are the models the SQL may read, by name.
	DependsOn []string
	// Audits are the version's audits (checked against the SQL's
	// result; an upstream model's are not checked).
	Audits []models.Audit
	// Grain are the key columns: each must be a column of the result.
	Grain []string
	// Macros is the vocabulary of SQL's macros and of its custom
	// audits' (models.Definition.Macros): rendered as the warehouse
	// renders them (warehouse.SubstituteMacrosIn), except @this_model in
	// SQL, refused (a query binding against its own result).
	Macros string
}

// Lookup gives the definition of an upstream model by name (the latest
// registered version); ok is false when none is registered.
type Lookup func(name string) (m Model, ok bool)

// ErrNoParser is returned (wrapped in an *Error) by a build without cgo:
// it has no DuckDB to parse SQL with, so it accepts no SQL model.
var ErrNoParser = errors.New("sqlcheck: this build has no DuckDB parser (built without cgo): models with SQL are refused")

// Error is a refused model. Field is the definition's field at fault
// ("sql" or "time_column"); Line and Column place the problem in the SQL
// (1-based; 0 when not known); Upstream names the upstream model whose
// SQL is at fault, if it is not the model's own.
type Error struct {
	Field        string
	Line, Column int
	Upstream     string
	Msg          string
	Err          error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Upstream != "" {
		fmt.Fprintf(&b, "upstream model %s: ", e.Upstream)
	}
	b.WriteString(e.Msg)
	switch {
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, " (at line %d, column %d)", e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&b, " (at line %d)", e.Line)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// at places byte offset i of s as a 1-based line and column (columns count
// runes).
func at(s string, i int) (line, col int) {
	if i < 0 || i > len(s) {
		return 0, 0
	}
	line = 1 + strings.Count(s[:i], "\n")
	k := strings.LastIndexByte(s[:i], '\n')
	return line, 1 + len([]rune(s[k+1:i]))
}

// errAt is a refusal of sql at byte offset i (-1: nowhere in particular).
func errAt(sql string, i int, format string, args ...any) *Error {
	e := &Error{Field: "sql", Msg: fmt.Sprintf(format, args...)}
	if i >= 0 {
		e.Line, e.Column = at(sql, i)
	}
	return e
}

// checkChars refuses the characters lexers disagree on.
func checkChars(sql string) *Error {
	for i, r := range sql {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || r == 0x7f:
			return errAt(sql, i, "has the control character %U: only tab, CR and LF are allowed", r)
		case r == 0x85 || r == 0x2028 || r == 0x2029:
			return errAt(sql, i, "has the line separator %U: tools disagree whether it ends a -- comment, so it is refused", r)
		}
	}
	return nil
}

// Check checks m's SQL (see the package comment); upstream gives the
// definitions of the models it depends on, and of theirs in turn. A refusal
// is an *Error; any other error is the check failing (a cancelled ctx).
func Check(ctx context.Context, m Model, upstream Lookup) error {
	if events.Kind(m.Kind) == events.Seed {
		if _, err := warehouse.SeedColumns(ctx, m.Seed, 0); err != nil {
			if errors.Is(err, warehouse.ErrNoCgo) {
				return &Error{Field: "seed", Msg: ErrNoParser.Error(), Err: err}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{Field: "seed", Msg: err.Error(), Err: err}
		}
		return nil
	}
	if m.SQL == "" {
		return nil
	}
	ups, err := closure(m, upstream)
	if err != nil {
		return err
	}
	sb, err := openSandbox(ctx)
	if err != nil {
		if errors.Is(err, ErrNoParser) {
			return &Error{Field: "sql", Msg: ErrNoParser.Error(), Err: err}
		}
		return err
	}
	defer sb.close()
	for _, u := range ups {
		if events.Kind(u.Kind) == events.Seed {
			continue // no SQL
		}
		if err := structure(ctx, sb, u); err != nil {
			return upstreamErr(u.Name, err)
		}
	}
	if err := structure(ctx, sb, m); err != nil {
		return err
	}
	// Each model binds in a sandbox of its own holding only its direct
	// upstream models' tables, as the warehouse binds only those (its
	// WITH "up" AS (SELECT * FROM tidemark."up__…")): a name it does not
	// declare reaches nothing in the check either. ups is in dependency
	// order, so every upstream's columns are known before they are read.
	cols := map[string][]column{}
	for _, u := range ups {
		c, err := upstreamColumns(ctx, u, cols)
		if err != nil {
			return upstreamErr(u.Name, err)
		}
		cols[u.Name] = c
	}
	c, err := bind(ctx, m, cols)
	if err != nil {
		return err
	}
	if !events.Kind(m.Kind).Whole() {
		if err := timeColumn(m, c); err != nil {
			return err
		}
	}
	if err := grain(m, c); err != nil {
		return err
	}
	return checkAudits(ctx, sb, m, c)
}

// upstreamColumns are an upstream model's columns: its query's (bind), or
// a seed's, as the warehouse reads its content.
func upstreamColumns(ctx context.Context, u Model, cols map[string][]column) ([]column, error) {
	if events.Kind(u.Kind) != events.Seed {
		return bind(ctx, u, cols)
	}
	sc, err := warehouse.SeedColumns(ctx, u.Seed, 0)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Field: "sql", Msg: fmt.Sprintf("its seed cannot be read: %v", err), Err: err}
	}
	out := make([]column, len(sc))
	for i, c := range sc {
		out[i] = column{Name: c.Name, Type: c.Type}
	}
	return out, nil
}

// bind describes m in a fresh sandbox holding, as empty tables, only its
// direct upstream models, whose columns cols gives.
func bind(ctx context.Context, m Model, cols map[string][]column) ([]column, error) {
	sb, err := openSandbox(ctx)
	if err != nil {
		return nil, err
	}
	defer sb.close()
	made := map[string]bool{}
	for _, d := range m.DependsOn {
		if made[d] {
			continue
		}
		made[d] = true
		if err := sb.createTable(ctx, d, cols[d]); err != nil {
			return nil, err
		}
	}
	return describe(ctx, sb, m)
}

func upstreamErr(name string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Upstream = name
		e.Field = "sql"
		e.Line, e.Column = 0, 0 // a place in another model's SQL
		return e
	}
	return err
}

// closure is m's upstream models, transitively, dependencies first.
func closure(m Model, lookup Lookup) ([]Model, error) {
	var out []Model
	state := map[string]int{m.Name: 1} // 1: on the path, 2: done
	var visit func(of Model) error
	visit = func(of Model) error {
		for _, d := range of.DependsOn {
			switch state[d] {
			case 1:
				return &Error{Field: "sql", Msg: fmt.Sprintf("depends_on %s closes a dependency cycle", d)}
			case 2:
				continue
			}
			var u Model
			ok := false
			if lookup != nil {
				u, ok = lookup(d)
			}
			if !ok {
				return &Error{Field: "sql", Msg: fmt.Sprintf("depends on %s, which is not registered: register it first (apply registers a file's upstream models first)", d)}
			}
			if u.SQL == "" && events.Kind(u.Kind) != events.Seed {
				return &Error{Field: "sql", Msg: fmt.Sprintf("depends on %s, whose latest version has no SQL: an SQL model reads only SQL models' and seeds' tables", d)}
			}
			u.Name = d
			state[d] = 1
			if err := visit(u); err != nil {
				return err
			}
			state[d] = 2
			out = append(out, u)
		}
		return nil
	}
	return out, visit(m)
}

// structure is the parser's half of the check: characters, macros, one
// SELECT statement (alone and in the warehouse's wrapper), its references.
func structure(ctx context.Context, sb *sandbox, m Model) error {
	if e := checkChars(m.SQL); e != nil {
		return e
	}
	r, err := warehouse.SubstituteMacrosIn(m.Macros, m.SQL, warehouse.ParamStart, warehouse.ParamEnd, "")
	if err != nil {
		return macroErr(m.SQL, err)
	}
	for _, d := range m.DependsOn {
		if Reserved(d) {
			return errAt(m.SQL, -1, "depends on %q, a reserved name (a system catalog's): a model reads no table of such a name", d)
		}
	}
	return statement(ctx, sb, m.SQL, r, m.DependsOn, false)
}

// macroErr is a *warehouse.MacroError placed in sql.
func macroErr(sql string, err error) error {
	var me *warehouse.MacroError
	if errors.As(err, &me) {
		return errAt(sql, me.Offset, "%s", me.Msg)
	}
	return err
}

// statement checks r, sql rendered, as one SELECT statement (alone and in
// the warehouse's wrapper) reading only deps and its CTEs, of a bounded
// expansion: a model's query, or a custom audit's (audit).
func statement(ctx context.Context, sb *sandbox, sql string, r warehouse.Rendered, deps []string, audit bool) error {
	what := "a model's query"
	if audit {
		what = "an audit's query"
	}
	tree, err := sb.parse(ctx, r.Text)
	if err != nil {
		return parseErr(sql, r, err)
	}
	if n := len(tree.Statements); n != 1 {
		return errAt(sql, -1, "has %d statements: %s is exactly one SELECT", n, what)
	}
	if _, err := sb.parse(ctx, warehouse.Wrap(r.Text)); err != nil {
		return errAt(sql, -1, "does not stay one query inside the warehouse's SELECT * FROM (…) q: %s is one SELECT, without ';' (%v)", what, err)
	}
	reads := map[string]bool{}
	for _, d := range deps {
		reads[d] = true
	}
	weight := 1
	w := walker{deps: reads, acc: &weight, audit: audit}
	w.walk(tree.Statements[0], nil)
	if w.err == nil && weight > MaxExpansion {
		w.err, w.loc = errAt(sql, -1, "expands too much: it reads CTEs that read CTEs… more than %d tables in all once expanded (the engines bind a CTE at each reference)", MaxExpansion), -1
	}
	if w.err != nil {
		if w.err.Line == 0 && w.loc >= 0 {
			w.err.Line, w.err.Column = at(sql, r.Source(w.loc))
		}
		return w.err
	}
	return nil
}

// parseErr turns a parser refusal into an *Error placed in the model's SQL.
func parseErr(sql string, r warehouse.Rendered, err error) error {
	var pe *parserError
	if !errors.As(err, &pe) {
		return err
	}
	if pe.Type == "not implemented" {
		return errAt(sql, -1, "is not one SELECT statement: DuckDB's parser reads a statement other than a SELECT in it (COPY, ATTACH, SET, PRAGMA, CALL, INSTALL, …; a comment may end at a CR)")
	}
	i := -1
	if pe.Position >= 0 {
		i = r.Source(pe.Position)
	}
	return errAt(sql, i, "does not parse: %s", pe.Message)
}

// timeColumn checks that the time column is an output column of a date or
// timestamp type. A model without one is of a whole kind (full, view:
// models.Definition requires a time column of every other SQL model).
func timeColumn(m Model, cols []column) error {
	var names []string
	for _, c := range cols {
		if c.Name == m.TimeColumn {
			t := strings.ToUpper(c.Type)
			if t == "DATE" || strings.HasPrefix(t, "TIMESTAMP") {
				return nil
			}
			return &Error{Field: "time_column", Msg: fmt.Sprintf("%q is a %s column: the time column must be a TIMESTAMP (or DATE)", m.TimeColumn, c.Type)}
		}
		names = append(names, c.Name)
	}
	return &Error{Field: "time_column", Msg: fmt.Sprintf("%q is not a column of the query's result (its columns: %s)", m.TimeColumn, strings.Join(names, ", "))}
}

// grain checks that every grain column is an output column (field
// grain[i]).
func grain(m Model, cols []column) error {
	for i, g := range m.Grain {
		if !slices.ContainsFunc(cols, func(c column) bool { return c.Name == g }) {
			names := make([]string, len(cols))
			for k, c := range cols {
				names[k] = c.Name
			}
			return &Error{Field: fmt.Sprintf("grain[%d]", i), Msg: fmt.Sprintf("%q is not a column of the query's result (its columns: %s)", g, strings.Join(names, ", "))}
		}
	}
	return nil
}

// column is one output column of a query, as DuckDB describes it.
type column struct{ Name, Type string }

// describe binds m's query (macros as NULL timestamps) in the sandbox,
// where its upstream models exist as empty tables, and returns its columns.
func describe(ctx context.Context, sb *sandbox, m Model) ([]column, error) {
	r, err := warehouse.SubstituteMacrosIn(m.Macros, m.SQL, warehouse.NullTS, warehouse.NullTS, "")
	if err != nil {
		return nil, err // structure refused it already
	}
	cols, err := sb.describe(ctx, warehouse.Wrap(r.Text))
	if err != nil {
		var be *bindError
		if errors.As(err, &be) {
			return nil, &Error{Field: "sql", Line: be.Line, Msg: "does not bind: " + be.Message}
		}
		return nil, err
	}
	return cols, nil
}
