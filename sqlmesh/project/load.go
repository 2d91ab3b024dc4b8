package project

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/sqlmesh"
)

// MaxFile bounds a model, audit or config file, in bytes (a model's SQL is
// at most models.MaxSQL; the block and comments around it get as much).
const MaxFile = 2 * models.MaxSQL

// origin is where a setting comes from: a model's property or the config's
// model_defaults.
type origin struct {
	file string
	line int
	prop string // the property as the error names it
}

// setting is a model_defaults value with its origin.
type setting struct {
	value string
	at    origin
}

// loader is one Load's state.
type loader struct {
	ctx  context.Context
	p    *Project
	root string // the project's directory; "" for a single file
	errs []error

	defaults map[string]setting // model_defaults: dialect, start, cron, interval_unit, owner
	start    time.Time          // model_defaults' start, parsed
	audits   map[string]*sqlmesh.AuditDef
	files    []*sqlmesh.Model
}

func (l *loader) fail(err error) { l.errs = append(l.errs, err) }

func (l *loader) note(file string, line int, prop, format string, args ...any) {
	l.p.Notes = append(l.p.Notes, Note{File: file, Line: line, Property: prop, Msg: fmt.Sprintf(format, args...)})
}

// Load reads a SQLMesh project: path is its directory (models/**/*.sql,
// audits/**/*.sql, the seeds its SEED models name, config.yaml or
// config.yml; without a models/ directory every .sql outside audits/ is a
// model) or one model file (alone: no config, no audits/ and no other
// model, so its start is its own and it reads only a seed). Dialect must
// be duckdb; Jinja and Python models are refused. Every problem of every
// file is reported, joined; each is an *Error. Notes come in file and
// line order.
func Load(ctx context.Context, path string) (*Project, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	l := &loader{ctx: ctx, p: &Project{Root: path}, defaults: map[string]setting{}, audits: map[string]*sqlmesh.AuditDef{}}
	if st.IsDir() {
		l.root = path
		l.walk(path)
	} else {
		l.modelFile(path)
	}
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	if len(l.files) == 0 {
		return nil, &Error{File: path, Msg: "no SQLMesh model (a .sql file with a MODEL block) found"}
	}
	l.build()
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	slices.SortStableFunc(l.p.Notes, func(a, b Note) int { // as a reader meets them
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return l.p, nil
}

// walk reads a project directory: the config first, then audits, then
// models, each in lexical order.
func (l *loader) walk(root string) {
	hasModels := false
	if st, err := os.Stat(filepath.Join(root, "models")); err == nil && st.IsDir() {
		hasModels = true
	}
	var configs, audits, models []string
	from := root
	if st, err := os.Lstat(root); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		// The project reached by a link to its directory: WalkDir does
		// not follow a link, but it reads a directory named with a
		// trailing separator.
		from = root + string(filepath.Separator)
	}
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			l.fail(&Error{File: p, Msg: err.Error()})
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 && !strings.HasPrefix(d.Name(), ".") {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				l.note(p, 0, "", "not read: a symbolic link to a directory is not followed (its files are outside the project)")
				return nil
			}
		}
		top, _, nested := strings.Cut(rel, "/")
		ext := strings.ToLower(filepath.Ext(p))
		switch {
		case !nested && (rel == "config.yaml" || rel == "config.yml"):
			configs = append(configs, p)
		case nested && top == "audits" && ext == ".sql":
			audits = append(audits, p)
		case nested && top == "seeds":
			// read when a SEED model names it
		case (top == "models" && nested || !hasModels && top != "audits") && ext == ".sql":
			models = append(models, p)
		case (top == "models" && nested || !hasModels) && ext == ".py":
			l.fail(&Error{File: p, Line: 1, Msg: "Python models are not supported: tidemark reads SQLMesh's SQL models (MODEL block and query)"})
		case ext == ".sql" || ext == ".py" || ext == ".yaml" || ext == ".yml":
			l.note(p, 0, "", "not read: tidemark reads models/, audits/, seeds/ and config.yaml (macros, tests and signals are not supported)")
		}
		return nil
	})
	if err != nil {
		l.fail(&Error{File: root, Msg: err.Error()})
	}
	if len(configs) > 1 {
		l.fail(&Error{File: configs[1], Msg: "both config.yaml and config.yml: keep one"})
	} else if len(configs) == 1 {
		l.config(configs[0])
	}
	for _, p := range audits {
		l.auditFile(p)
	}
	for _, p := range models {
		l.modelFile(p)
	}
}

// read reads a file of the project, at most limit bytes.
func read(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	if len(b) > limit {
		return nil, &Error{File: path, Msg: fmt.Sprintf("is more than %d bytes", limit)}
	}
	return b, nil
}

// jinja refuses a file with Jinja templating: its line, or 0.
func jinja(src []byte) int {
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range []string{"{{", "{%", "{#", "JINJA_QUERY_BEGIN", "JINJA_STATEMENT_BEGIN"} {
			if strings.Contains(line, m) {
				return i + 1
			}
		}
	}
	return 0
}

// config reads config.yaml: model_defaults' start, cron, dialect,
// interval_unit and owner; every other key is a note.
func (l *loader) config(path string) {
	b, err := read(path, MaxFile)
	if err != nil {
		l.fail(err)
		return
	}
	b, err = unjinja(path, b)
	if err != nil {
		l.fail(err)
		return
	}
	top, defaults, err := modelfile.ReadSQLMeshConfig(path, b)
	if err != nil {
		var e *modelfile.Error
		if errors.As(err, &e) {
			err = &Error{File: e.File, Line: e.Line, Property: e.Path, Msg: e.Msg}
		}
		l.fail(err)
		return
	}
	for _, e := range top {
		if e.Key != "model_defaults" {
			l.note(path, e.Line, e.Key, "ignored: tidemark reads only model_defaults (start, cron, dialect, interval_unit, owner)")
		}
	}
	for _, e := range defaults {
		prop := "model_defaults." + e.Key
		switch e.Key {
		case "start", "cron", "dialect", "interval_unit", "owner":
		default:
			l.note(path, e.Line, prop, "ignored: tidemark reads start, cron, dialect, interval_unit and owner of model_defaults")
			continue
		}
		if !e.Scalar {
			l.fail(&Error{File: path, Line: e.Line, Property: prop, Msg: "expected a value, not a list or mapping"})
			continue
		}
		if strings.Contains(e.Value, jinjaMark) {
			l.fail(&Error{File: path, Line: e.Line, Property: prop, Msg: "Jinja ({{ … }}) is not supported in a value tidemark reads: write the value itself"})
			continue
		}
		at := origin{file: path, line: e.Line, prop: prop}
		switch e.Key {
		case "start":
			t, err := sqlmesh.ParseTime(e.Value)
			if err != nil {
				l.fail(&Error{File: path, Line: e.Line, Property: prop, Msg: err.Error() + " (a relative start such as '1 year ago' is not supported: it would change with the clock)"})
				continue
			}
			l.start = t
		case "interval_unit":
			if _, err := interval.ParseUnit(strings.ToLower(e.Value)); err != nil {
				l.fail(&Error{File: path, Line: e.Line, Property: prop, Msg: err.Error()})
				continue
			}
		case "dialect":
			if !duckdb(e.Value) {
				l.fail(&Error{File: path, Line: e.Line, Property: prop, Msg: dialectMsg(e.Value)})
				continue
			}
		}
		l.defaults[e.Key] = setting{value: e.Value, at: at}
	}
}

// jinjaMark stands for a Jinja expression of config.yaml in what the YAML
// reader reads (unjinja).
const jinjaMark = "__tidemark_jinja__"

// unjinja prepares config.yaml for the YAML reader: SQLMesh renders the
// file with Jinja first, so a config commonly holds {{ env_var(…) }} in
// keys tidemark does not read (a gateway's credentials). Each {{ … }} on
// one line becomes jinjaMark (a value of model_defaults tidemark reads
// holding it is refused), each {# … #} blanks; a Jinja statement ({% %})
// or an expression spanning lines, which could change the YAML's shape,
// is refused at its line. Lines keep their numbers.
func unjinja(path string, b []byte) ([]byte, error) {
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		if strings.Contains(line, "{%") {
			return nil, &Error{File: path, Line: i + 1, Msg: "Jinja statements ({% … %}) are not supported in config.yaml: tidemark reads it without templating"}
		}
		for _, d := range [...]struct{ open, close, with string }{{"{#", "#}", ""}, {"{{", "}}", jinjaMark}} {
			for n := 0; n < 1000; n++ {
				j := strings.Index(line, d.open)
				if j < 0 {
					break
				}
				k := strings.Index(line[j+2:], d.close)
				if k < 0 {
					return nil, &Error{File: path, Line: i + 1, Msg: fmt.Sprintf("a Jinja %s … %s spanning lines is not supported in config.yaml", d.open, d.close)}
				}
				with := d.with
				if with == "" {
					with = strings.Repeat(" ", k+4)
				}
				line = line[:j] + with + line[j+2+k+2:]
			}
		}
		lines[i] = line
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// duckdb says whether a dialect is DuckDB's (SQLMesh writes it duckdb,
// possibly with settings after a comma).
func duckdb(d string) bool {
	name, _, _ := strings.Cut(d, ",")
	return strings.EqualFold(strings.TrimSpace(name), "duckdb")
}

func dialectMsg(d string) string {
	return fmt.Sprintf("dialect %s is not supported: tidemark runs SQLMesh models in DuckDB (dialect duckdb)", d)
}

// auditFile reads an audits/*.sql file.
func (l *loader) auditFile(path string) {
	b, err := read(path, MaxFile)
	if err != nil {
		l.fail(err)
		return
	}
	if line := jinja(b); line > 0 {
		l.fail(&Error{File: path, Line: line, Property: "query", Msg: "Jinja is not supported: tidemark reads SQLMesh's SQL audits without templating"})
		return
	}
	defs, err := sqlmesh.ParseAudit(path, b)
	if err != nil {
		l.fail(fromSQLMesh(err))
		return
	}
	for _, a := range defs {
		key := strings.ToLower(a.Name)
		if prev, dup := l.audits[key]; dup {
			l.fail(&Error{File: path, Line: a.Line, Property: "name", Msg: fmt.Sprintf("audit %s is already defined at %s:%d", a.Name, prev.File, prev.Line)})
			continue
		}
		if a.Dialect != "" && !duckdb(a.Dialect) {
			l.fail(&Error{File: path, Line: a.Line, Property: "dialect", Msg: dialectMsg(a.Dialect)})
			continue
		}
		if a.Standalone {
			l.note(path, a.Line, "standalone", "audit %s: standalone audits are not run by tidemark (only a model's audits are)", a.Name)
			continue
		}
		for _, u := range a.Unknown {
			l.note(path, u.Line, u.Name, "audit %s: not read by tidemark", a.Name)
		}
		l.audits[key] = a
	}
}

// modelFile reads a model file.
func (l *loader) modelFile(path string) {
	if strings.EqualFold(filepath.Ext(path), ".py") {
		l.fail(&Error{File: path, Line: 1, Msg: "Python models are not supported: tidemark reads SQLMesh's SQL models (MODEL block and query)"})
		return
	}
	b, err := read(path, MaxFile)
	if err != nil {
		l.fail(err)
		return
	}
	if line := jinja(b); line > 0 {
		l.fail(&Error{File: path, Line: line, Property: "query", Msg: "Jinja is not supported: tidemark reads SQLMesh's SQL models without templating ({{ }}, {% %}, JINJA_QUERY_BEGIN)"})
		return
	}
	m, err := sqlmesh.ParseModel(path, b)
	if err != nil {
		l.fail(fromSQLMesh(err))
		return
	}
	l.files = append(l.files, m)
}
