package project

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlcheck"
)

// tablesOf is the tables sql (SQLMesh's macro vocabulary) reads, by the
// engine's parser: the one place the loader asks it.
func tablesOf(ctx context.Context, sql string) ([]sqlcheck.TableRef, error) {
	return sqlcheck.Tables(ctx, sql, models.MacrosSQLMesh)
}

// dependencies infers a model's depends_on from the tables its query
// reads (each must be a model of the project), rewrites each reference to
// a model to the quoted identifier "schema.model" (aliased by the name it
// was written with when it has no alias: TableRef.ReplacedBy), and checks an explicit
// depends_on against them.
func (l *loader) dependencies(e *entry, byName map[string]*entry) error {
	f, r := e.src, &e.m.Register
	if e.sql == "" { // a seed
		if len(f.DependsOn) > 0 {
			return &Error{File: f.File, Line: f.Lines["depends_on"], Property: "depends_on", Msg: "a SEED model depends on nothing: its rows are its CSV"}
		}
		return nil
	}
	refs, err := tablesOf(l.ctx, e.sql)
	if err != nil {
		var se *sqlcheck.Error
		if errors.As(err, &se) {
			line := f.QueryLine
			if se.Line > 0 {
				line += se.Line - 1
			}
			msg := se.Msg
			if se.Column > 0 {
				msg = fmt.Sprintf("%s (column %d)", msg, se.Column)
			}
			return &Error{File: f.File, Line: line, Property: "query", Msg: msg}
		}
		return &Error{File: f.File, Line: f.QueryLine, Property: "query", Msg: err.Error()}
	}
	sql := e.sql
	seen := map[string]bool{}
	names := make([]string, len(refs))
	// An unaliased reference keeps its name as an alias (ReplacedBy),
	// unless that name is another model's too somewhere in the query
	// (a.orders JOIN b.orders USING (id)): two tables of one alias would
	// be refused, and the query cannot call either by it anyway.
	implicit := map[string]map[string]bool{}
	for i, ref := range refs {
		line := lineIn(e.sql, ref.Start, f.QueryLine)
		name, err := resolve(ref, f.Schema, byName)
		if err != nil {
			return &Error{File: f.File, Line: line, Property: "query", Msg: err.Error()}
		}
		if name == r.Model {
			return &Error{File: f.File, Line: line, Property: "query", Msg: fmt.Sprintf("reads %s, the model itself: a model reads only other models", ref.Qualified())}
		}
		names[i] = name
		if ref.Alias == "" {
			short := strings.ToLower(ref.Name)
			if implicit[short] == nil {
				implicit[short] = map[string]bool{}
			}
			implicit[short][name] = true
		}
	}
	for i := len(refs) - 1; i >= 0; i-- {
		ref, name := refs[i], names[i]
		repl := ref.ReplacedBy(name)
		if ref.Alias == "" && len(implicit[strings.ToLower(ref.Name)]) > 1 {
			repl = `"` + name + `"`
		}
		sql = sql[:ref.Start] + repl + sql[ref.End:]
		seen[name] = true
		e.refLine[name] = lineIn(e.sql, ref.Start, f.QueryLine) // the last assignment is the first reference
	}
	deps := make([]string, 0, len(seen))
	for n := range seen {
		deps = append(deps, n)
	}
	sort.Strings(deps)
	if f.DependsOn != nil {
		var given []string
		for _, d := range f.DependsOn {
			given = append(given, strings.ToLower(d))
		}
		sort.Strings(given)
		given = slices.Compact(given)
		// SQLMesh's depends_on adds to the models the query reads: naming
		// some of them is fine; one it does not read, tidemark cannot bind
		// (a model reads only the upstream models its query names).
		if extra := slices.DeleteFunc(slices.Clone(given), func(d string) bool { return slices.Contains(deps, d) }); len(extra) > 0 {
			return &Error{File: f.File, Line: f.Lines["depends_on"], Property: "depends_on",
				Msg: fmt.Sprintf("[%s] disagrees with the models the query reads: [%s] (%s not read by it)", strings.Join(given, ", "), strings.Join(deps, ", "), strings.Join(extra, ", "))}
		}
	}
	r.DependsOn, r.SQL = deps, sql
	return validate(e)
}

// resolve is the model a table reference names: schema.model as written
// (any case), the quoted identifier "schema.model" (the form stored SQL
// reads it by), or a plain name: the model of that name in the reading
// model's schema, else the one model of that name in any schema.
func resolve(ref sqlcheck.TableRef, schema string, byName map[string]*entry) (string, error) {
	notModel := fmt.Errorf("reads %s, which is no model of this project: a tidemark model reads only other models (a raw table must be a SEED or a model)", ref.Qualified())
	if ref.Catalog != "" {
		return "", notModel
	}
	if ref.Schema != "" {
		n := strings.ToLower(ref.Schema + "." + ref.Name)
		if _, ok := byName[n]; ok {
			return n, nil
		}
		return "", notModel
	}
	short := strings.ToLower(ref.Name)
	if byName[short] != nil { // "shop.orders", already the stored form
		return short, nil
	}
	if n := strings.ToLower(schema) + "." + short; byName[n] != nil {
		return n, nil
	}
	var found []string
	for n := range byName {
		if _, s, _ := strings.Cut(n, "."); s == short {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", notModel
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", fmt.Errorf("reads %s, which names several models (%s): qualify it schema.model", ref.Name, strings.Join(found, ", "))
}

// cycle refuses a dependency cycle, naming it.
func cycle(deps map[string][]string, byName map[string]*entry) error {
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Strings(names)
	state := map[string]int{} // 1 on the path, 2 done
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = 1
		path = append(path, n)
		for _, d := range deps[n] {
			switch state[d] {
			case 1:
				i := slices.Index(path, d)
				return append(append([]string(nil), path[i:]...), d)
			case 0:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return nil
	}
	for _, n := range names {
		if state[n] != 0 {
			continue
		}
		if c := visit(n); c != nil {
			e := byName[c[0]]
			return &Error{File: e.m.File, Line: e.refLine[c[1]], Property: "query",
				Msg: fmt.Sprintf("dependency cycle: %s", strings.Join(c, " → "))}
		}
	}
	return nil
}
