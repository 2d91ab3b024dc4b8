package project

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlmesh"
)

// DefaultCron is SQLMesh's cron for a model that gives none.
const DefaultCron = "@daily"

// entry is a model being built: its file, its registration and where its
// settings came from (for errors found later).
type entry struct {
	src     *sqlmesh.Model
	m       Model
	origins map[string]origin // start, cron, interval_unit
	audits  []auditSource     // one per Register.Audits
	sql     string            // the query as written, trailing ';' dropped
	refLine map[string]int    // a dependency's first reference: its line
}

// auditSource is where a registered audit comes from: the model's call,
// and for a custom audit its AUDIT's file and query.
type auditSource struct {
	call      sqlmesh.AuditCall
	file      string
	queryLine int
}

// build maps every parsed model file to a registration, then infers the
// dependencies and orders them.
func (l *loader) build() {
	var entries []*entry
	byName := map[string]*entry{}
	for _, f := range l.files {
		if off, err := disabled(f); err != nil {
			l.fail(err)
			continue
		} else if off != nil {
			l.note(f.File, off.Line, off.Name, "false: not registered (SQLMesh does not load a disabled model; a model reading it reads no model of the project)")
			continue
		}
		e, err := l.model(f)
		if err != nil {
			l.fail(err)
			if e == nil {
				continue
			}
		}
		if prev, dup := byName[e.m.Register.Model]; dup {
			l.fail(&Error{File: f.File, Line: f.Lines["name"], Property: "name",
				Msg: fmt.Sprintf("model %s is already defined at %s:%d", e.m.Register.Model, prev.m.File, prev.m.Line)})
			continue
		}
		byName[e.m.Register.Model] = e
		if err == nil {
			entries = append(entries, e)
		}
	}
	for _, e := range entries {
		if err := l.dependencies(e, byName); err != nil {
			l.fail(err)
		}
	}
	if len(l.errs) > 0 {
		return
	}
	deps := map[string][]string{}
	for _, e := range entries {
		deps[e.m.Register.Model] = e.m.Register.DependsOn
	}
	if err := cycle(deps, byName); err != nil {
		l.fail(err)
		return
	}
	for _, n := range models.TopoSort(deps) {
		e := byName[n]
		e.m.Register.Version = modelfile.ContentVersion(e.m.Register)
		e.m.at = e
		l.p.Models = append(l.p.Models, e.m)
	}
}

// disabled is the model's enabled property when it is false (SQLMesh
// loads no disabled model), nil when it is true or not set; an error when
// it is no boolean.
func disabled(f *sqlmesh.Model) (*sqlmesh.Property, error) {
	for i, u := range f.Unknown {
		if !strings.EqualFold(u.Name, "enabled") {
			continue
		}
		b, err := strconv.ParseBool(strings.Trim(u.Raw, `'"`))
		if err != nil {
			return nil, &Error{File: f.File, Line: u.Line, Property: "enabled", Msg: fmt.Sprintf("expected true or false, got '%s'", u.Raw)}
		}
		if !b {
			return &f.Unknown[i], nil
		}
	}
	return nil, nil
}

// model maps one model file's MODEL block to a registration (without its
// dependencies). A nil entry: the model has no name to know it by.
func (l *loader) model(f *sqlmesh.Model) (*entry, error) {
	fail := func(line int, prop, format string, args ...any) error {
		return &Error{File: f.File, Line: line, Property: prop, Msg: fmt.Sprintf(format, args...)}
	}
	if strings.Contains(f.Schema, ".") {
		return nil, fail(f.Lines["name"], "name", "%s: a catalog.schema.model name is not supported: tidemark names a model schema.model", f.Name)
	}
	name := f.Schema + "." + f.Short
	if !strings.Contains(f.Name, `"`) {
		name = strings.ToLower(name) // DuckDB folds unquoted names
	}
	for _, part := range []string{f.Schema, f.Short} {
		if !strings.Contains(f.Name, `"`) {
			part = strings.ToLower(part)
		}
		if fe := models.CheckWarehouseName("name", part); fe != nil {
			return nil, fail(f.Lines["name"], "name", "%s: %s", f.Name, fe.Detail)
		}
	}
	e := &entry{src: f, origins: map[string]origin{}, refLine: map[string]int{}}
	e.m = Model{File: f.File, Line: f.Line, QueryLine: f.QueryLine, Owner: f.Owner, Description: f.Description, Columns: f.Columns}
	r := &e.m.Register
	r.Model, r.Macros = name, models.MacrosSQLMesh
	if e.m.Owner == "" {
		e.m.Owner = l.defaults["owner"].value
	}

	// dialect
	if f.Dialect != "" && !duckdb(f.Dialect) {
		return e, fail(f.Lines["dialect"], "dialect", "%s", dialectMsg(f.Dialect))
	}
	if f.Dialect == "" && l.defaults["dialect"].value == "" {
		l.note(f.File, f.Line, "dialect", "no dialect (here or in model_defaults): read as duckdb")
	}

	// kind
	if err := l.kind(e, fail); err != nil {
		return e, err
	}

	// schedule: cron, interval_unit, start, allow_partials
	r.Cron = DefaultCron
	if d, ok := l.defaults["cron"]; ok {
		r.Cron, e.origins["cron"] = d.value, d.at
	}
	if f.Cron != "" {
		r.Cron, e.origins["cron"] = f.Cron, origin{f.File, f.Lines["cron"], "cron"}
	}
	if d, ok := l.defaults["interval_unit"]; ok {
		r.IntervalUnit, e.origins["interval_unit"] = interval.Unit(strings.ToLower(d.value)), d.at
	}
	r.Start = l.start
	if d, ok := l.defaults["start"]; ok {
		e.origins["start"] = d.at
	}
	if !f.Start.IsZero() {
		r.Start, e.origins["start"] = f.Start, origin{f.File, f.Lines["start"], "start"}
	}
	if r.Start.IsZero() {
		return e, fail(f.Line, "start", "missing: tidemark needs a model's start (in its MODEL block, e.g. start '2024-01-01', or model_defaults' start in config.yaml)")
	}
	for _, u := range f.Unknown {
		switch strings.ToLower(u.Name) {
		case "interval_unit":
			unit, err := interval.ParseUnit(strings.ToLower(strings.Trim(u.Raw, `'"`)))
			if err != nil {
				return e, fail(u.Line, "interval_unit", "%v", err)
			}
			r.IntervalUnit, e.origins["interval_unit"] = unit, origin{f.File, u.Line, "interval_unit"}
		case "end":
			return e, fail(u.Line, "end", "a model's end is not supported: tidemark computes a model's intervals up to now (SQLMesh computes none after its end)")
		case "enabled": // true: disabled reads it
		case "allow_partials":
			b, err := strconv.ParseBool(strings.Trim(u.Raw, `'"`))
			if err != nil {
				return e, fail(u.Line, "allow_partials", "expected true or false, got '%s'", u.Raw)
			}
			r.AllowPartials = b
		default:
			l.note(f.File, u.Line, u.Name, "not read by tidemark: no part of the version")
		}
	}
	for _, p := range []struct {
		name string
		set  bool
	}{{"owner", f.Owner != ""}, {"description", f.Description != ""}, {"columns", len(f.Columns) > 0}} {
		if p.set {
			l.note(f.File, f.Lines[p.name], p.name, "kept, but no part of the version (changing it alone registers nothing new)")
		}
	}
	r.Grain = f.Grain

	// query or seed
	if r.SnapshotKind == events.Seed {
		if f.Query != "" {
			return e, fail(f.QueryLine, "query", "a SEED model has no query: its rows are its CSV")
		}
		if err := l.seed(e, fail); err != nil {
			return e, err
		}
	} else {
		e.sql = sqlmesh.TrimQuery(f.File, f.Query)
		r.SQL = e.sql
	}

	// audits
	if err := l.auditsOf(e); err != nil {
		return e, err
	}
	if err := validate(e); err != nil {
		return e, err
	}
	return e, nil
}

// kind maps the model's kind and its settings.
func (l *loader) kind(e *entry, fail func(int, string, string, ...any) error) error {
	f, r := e.src, &e.m.Register
	k := f.Kind
	read := map[string]bool{}
	switch k.Name {
	case sqlmesh.KindIncrementalByTimeRange:
		r.SnapshotKind = events.Incremental
		r.TimeColumn, r.BatchSize, r.Lookback, r.BatchConcurrency = k.TimeColumn, k.BatchSize, k.Lookback, k.BatchConcurrency
		for _, s := range []string{"time_column", "batch_size", "lookback", "batch_concurrency", "forward_only"} {
			read[s] = true
		}
		if k.TimeFormat != "" {
			l.note(f.File, k.Settings["time_column"].Line, "kind", "time_column's format '%s' is not read: tidemark compares the column as a TIMESTAMP", k.TimeFormat)
		}
		if v, ok := k.Settings["forward_only"]; ok {
			if v.Kind != sqlmesh.Bool {
				return fail(v.Line, "kind", "%s: forward_only: expected true or false, got '%s'", k.Name, v.Text)
			}
			if v.Text == "true" {
				r.SnapshotKind = events.ForwardOnly
			}
		}
	case sqlmesh.KindFull:
		r.SnapshotKind = events.Full
	case sqlmesh.KindView:
		r.SnapshotKind = events.View
	case sqlmesh.KindSeed:
		r.SnapshotKind = events.Seed
		read["path"] = true
		if v, ok := k.Settings["csv_settings"]; ok {
			// They change what the file's rows are: never read otherwise.
			return fail(v.Line, "kind", "SEED: csv_settings are not supported: tidemark reads a seed as RFC 4180 CSV (a header row, ',' between values, '\"' quoting); write the file so")
		}
	default:
		return fail(k.Line, "kind", "%s is not supported: tidemark maps INCREMENTAL_BY_TIME_RANGE, FULL, VIEW and SEED", k.Name)
	}
	for _, key := range sortedKeys(k.Settings) {
		if !read[key] {
			l.note(f.File, k.Settings[key].Line, "kind", "%s: setting %s is not read by tidemark", k.Name, key)
		}
	}
	return nil
}

// seed reads a SEED model's CSV, relative to its file; when a directory
// was loaded, within the project (os.Root: no "..", no symbolic link out
// of it).
func (l *loader) seed(e *entry, fail func(int, string, string, ...any) error) error {
	f := e.src
	line := f.Kind.Settings["path"].Line
	p := f.Kind.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(f.File), filepath.FromSlash(p))
	}
	var file *os.File
	var err error
	if l.root != "" {
		rel, rerr := filepath.Rel(l.root, p)
		if rerr != nil || !filepath.IsLocal(rel) {
			return fail(line, "kind", "SEED: path '%s' is outside the project %s", f.Kind.Path, l.root)
		}
		var root *os.Root
		if root, err = os.OpenRoot(l.root); err == nil {
			file, err = root.Open(rel)
			root.Close()
		}
	} else {
		file, err = os.Open(p)
	}
	if err != nil {
		return fail(line, "kind", "SEED: path '%s': %v", f.Kind.Path, cause(err))
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fail(line, "kind", "SEED: path '%s': %v", f.Kind.Path, cause(err))
	}
	if !st.Mode().IsRegular() {
		return fail(line, "kind", "SEED: path '%s' is not a file", f.Kind.Path)
	}
	if st.Size() > models.MaxSeed {
		return fail(line, "kind", "SEED: path '%s' is %d bytes: a seed is at most %d (models.MaxSeed)", f.Kind.Path, st.Size(), models.MaxSeed)
	}
	b, err := io.ReadAll(io.LimitReader(file, models.MaxSeed+1))
	if err != nil {
		return fail(line, "kind", "SEED: path '%s': %v", f.Kind.Path, cause(err))
	}
	if len(b) > models.MaxSeed {
		return fail(line, "kind", "SEED: path '%s' is more than %d bytes: a seed is at most that (models.MaxSeed)", f.Kind.Path, models.MaxSeed)
	}
	if len(b) == 0 {
		return fail(line, "kind", "SEED: path '%s' is empty: a seed needs a header row", f.Kind.Path)
	}
	e.m.Register.Seed, e.m.SeedFile = string(b), p
	return nil
}

// cause is an *os.PathError's own error (the path is named already).
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// validate is models.Definition.Validate on the registration, its errors
// placed in the files.
func validate(e *entry) error {
	err := e.m.Register.Definition().Validate()
	if err == nil {
		return nil
	}
	var fe *models.FieldError
	if !errors.As(err, &fe) {
		return &Error{File: e.m.File, Line: e.m.Line, Msg: err.Error()}
	}
	return e.place(fe)
}

// sqlPos finds "line L, column C" or "(at line L)" in a message about a
// query.
var sqlPos = regexp.MustCompile(`\bline (\d+), column (\d+)|\(at line (\d+)\)`)

// inQuery maps a position "line L, column C" (or "(at line L)") of a
// message about a query that starts on file line first: the file's line,
// and the message saying only the column.
func inQuery(msg string, first int) (int, string) {
	m := sqlPos.FindStringSubmatchIndex(msg)
	if m == nil || first == 0 {
		return first, msg
	}
	if m[2] < 0 { // "(at line L)": no column to keep
		n, _ := strconv.Atoi(msg[m[6]:m[7]])
		return first + n - 1, strings.TrimRight(msg[:m[0]], " ") + msg[m[1]:]
	}
	n, _ := strconv.Atoi(msg[m[2]:m[3]])
	return first + n - 1, msg[:m[0]] + "column " + msg[m[4]:m[5]] + msg[m[1]:]
}

// Place is a refusal of the model's registration placed in the project's
// files as Load places its own: field is the registration's field at
// fault (a models.FieldError's key or a sqlcheck.Error's Field: "sql",
// "time_column", "seed", "audits[2].sql", "audits[0].columns[1]", …) and
// msg the refusal, which may give "line L, column C" of the SQL at fault
// (the model's query, or a custom audit's): the place is then that line
// of the file (the query's, or the AUDIT's), else the property's line
// (an audit's call, a kind setting, the MODEL block).
func (m Model) Place(field, msg string) *Error {
	if m.at == nil {
		return &Error{File: m.File, Line: m.Line, Property: field, Msg: msg}
	}
	var e *Error
	errors.As(m.at.place(&models.FieldError{Field: field, Key: field, Msg: msg, Detail: msg}), &e)
	return e
}

// place is a FieldError of Validate at its place in the files.
func (e *entry) place(fe *models.FieldError) error {
	f := e.src
	key := fe.Key
	base, _, _ := strings.Cut(key, "[")
	base, _, _ = strings.Cut(base, ".")
	at := func(line int, prop, msg string) error {
		if line == 0 {
			line = f.Line
		}
		return &Error{File: f.File, Line: line, Property: prop, Msg: msg}
	}
	switch base {
	case "sql":
		line, msg := inQuery(fe.Detail, f.QueryLine)
		return at(line, "query", msg)
	case "audits":
		var i int
		if _, err := fmt.Sscanf(key, "audits[%d]", &i); err != nil || i >= len(e.audits) {
			return at(f.Lines["audits"], "audits", fe.Msg)
		}
		src := e.audits[i]
		if strings.HasSuffix(key, ".sql") && src.file != "" {
			line, msg := inQuery(fe.Detail, src.queryLine)
			return &Error{File: src.file, Line: line, Property: "audits", Msg: fmt.Sprintf("audit %s (called at %s:%d): %s", src.call.Name, f.File, src.call.Line, msg)}
		}
		return at(src.call.Line, "audits", fmt.Sprintf("audit %s: %s", src.call.Name, fe.Msg))
	case "time_column", "lookback", "batch_size", "batch_concurrency":
		line := f.Kind.Line
		if v, ok := f.Kind.Settings[base]; ok {
			line = v.Line
		}
		return at(line, "kind", fe.Msg)
	case "seed", "kind":
		return at(f.Kind.Line, "kind", fe.Msg)
	case "start", "cron", "interval_unit":
		if o, ok := e.origins[base]; ok {
			return &Error{File: o.file, Line: o.line, Property: o.prop, Msg: fe.Detail}
		}
		return at(f.Line, base, fe.Detail)
	case "name", "model":
		return at(f.Lines["name"], "name", fe.Detail)
	case "grain", "depends_on", "allow_partials":
		return at(f.Lines[base], base, fe.Msg)
	}
	return at(f.Line, base, fe.Msg)
}
