package modelfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
)

// Model is one model definition of a file, ready to register.
type Model struct {
	// Register is the registration command (without Meta).
	Register commands.RegisterSnapshot
	// Line is where the model starts in the file; VersionLine where its
	// version is (0 when derived).
	Line, VersionLine int
	// Index is the model's place in the file (models[Index]); SQLLine and
	// TimeColumnLine where its sql and time_column are (0: none), for
	// errors found later (sqlcheck, in apply).
	Index, SQLLine, TimeColumnLine int
	// Derived is set when the file gave no version: it is derived from the
	// definition's fingerprint, so any change is a new version.
	Derived bool
}

type modelDoc struct {
	Name          string   `yaml:"name"`
	Version       string   `yaml:"version"`
	Cron          string   `yaml:"cron"`
	IntervalUnit  string   `yaml:"interval_unit"`
	Lookback      *int     `yaml:"lookback"`
	Kind          string   `yaml:"kind"`
	AllowPartials bool     `yaml:"allow_partials"`
	Start         string   `yaml:"start"`
	DependsOn     []string `yaml:"depends_on"`
	SQL           string   `yaml:"sql"`
	TimeColumn    string   `yaml:"time_column"`
	// BatchSize and BatchConcurrency: nil when absent (0 is refused).
	BatchSize        *int `yaml:"batch_size"`
	BatchConcurrency *int `yaml:"batch_concurrency"`
	// Audits is read by DecodeAudits (its items have several shapes).
	Audits []any `yaml:"audits"`
	// Grain: `grain: [id, ts]`, or one column `grain: id`.
	Grain grainDoc `yaml:"grain"`
	// Macros: "" (tidemark's @start_ts, @end_ts) or "sqlmesh".
	Macros string `yaml:"macros"`
	// Freshness: intervals (`freshness: 3`) or a duration (`freshness: 2h`).
	Freshness string `yaml:"freshness"`
	// SeedFile is a seed's CSV file, relative to the model file and within
	// its folder; read into the definition's seed content.
	SeedFile string `yaml:"seed_file"`
}

// grainDoc is a grain as a file writes it: a list of columns, or one
// column as a string.
type grainDoc []string

// UnmarshalYAML reads a list of strings or one string.
func (g *grainDoc) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*g = grainDoc{one}
		return nil
	}
	var list []string
	if err := unmarshal(&list); err != nil {
		return fmt.Errorf("grain: want a column name or a list of them")
	}
	*g = list
	return nil
}

type fileDoc struct {
	Models []modelDoc `yaml:"models"`
}

var posRe = regexp.MustCompile(`^\[(\d+):(\d+)\]\s*(.*)`)

// Load reads and validates a model file.
func Load(path string) ([]Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, b)
}

// Parse validates model-file bytes; path names the file in errors.
func Parse(path string, b []byte) ([]Model, error) {
	file, err := parser.ParseBytes(b, 0)
	if err != nil {
		return nil, yamlError(path, err)
	}
	var doc fileDoc
	if err := yaml.UnmarshalWithOptions(b, &doc, yaml.Strict()); err != nil {
		return nil, yamlError(path, err)
	}
	line := func(p string) int {
		yp, err := yaml.PathString(p)
		if err != nil {
			return 0
		}
		n, err := yp.FilterFile(file)
		if err != nil || n == nil {
			return 0
		}
		return lineOf(n)
	}
	// lineNear is the line of field path p, or of the nearest enclosing
	// field the file has (an audit's "columns" lives under its kind's key).
	lineNear := func(p string) int {
		for p != "" {
			if l := line("$." + p); l != 0 {
				return l
			}
			i := max(strings.LastIndexByte(p, '.'), strings.LastIndexByte(p, '['))
			if i < 0 {
				break
			}
			p = p[:i]
		}
		return 0
	}
	if len(doc.Models) == 0 {
		return nil, &Error{File: path, Line: line("$.models"), Path: "models", Msg: "at least one model is required"}
	}
	names := map[string]int{}
	for i, m := range doc.Models {
		if prev, dup := names[m.Name]; dup && m.Name != "" {
			return nil, &Error{File: path, Line: line(fmt.Sprintf("$.models[%d].name", i)), Path: fmt.Sprintf("models[%d].name", i), Msg: fmt.Sprintf("model %q is already defined at models[%d]", m.Name, prev)}
		}
		names[m.Name] = i
	}
	var out []Model
	for i, m := range doc.Models {
		at := func(field, format string, args ...any) error {
			l := lineNear(fmt.Sprintf("models[%d].%s", i, field))
			if l == 0 { // a missing field: the model's line
				l = line(fmt.Sprintf("$.models[%d]", i))
			}
			return &Error{File: path, Line: l, Path: fmt.Sprintf("models[%d].%s", i, field), Msg: fmt.Sprintf(format, args...)}
		}
		if m.Name == "" {
			return nil, &Error{File: path, Line: line(fmt.Sprintf("$.models[%d]", i)), Path: fmt.Sprintf("models[%d].name", i), Msg: "name is required"}
		}
		if m.Cron == "" {
			return nil, at("cron", "cron is required")
		}
		unit := interval.Unit("")
		if m.IntervalUnit != "" {
			u, err := interval.ParseUnit(m.IntervalUnit)
			if err != nil {
				return nil, at("interval_unit", "%v", err)
			}
			unit = u
		}
		if m.Start == "" {
			return nil, at("start", "start is required (RFC 3339, e.g. 2026-12-01T00:00:00Z)")
		}
		start, err := time.Parse(time.RFC3339, m.Start)
		if err != nil {
			return nil, at("start", "%q is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)", m.Start)
		}
		lookback := 0
		if m.Lookback != nil {
			lookback = *m.Lookback
		}
		for j, d := range m.DependsOn {
			if _, ok := names[d]; !ok {
				return nil, at(fmt.Sprintf("depends_on[%d]", j), "unknown model %q: define it in this file", d)
			}
		}
		var batchSize, batchConc int
		if m.BatchSize != nil {
			if *m.BatchSize < 1 {
				return nil, at("batch_size", "batch_size %d: must be >= 1 (omit it for the whole missing range in one batch)", *m.BatchSize)
			}
			batchSize = *m.BatchSize
		}
		if m.BatchConcurrency != nil {
			if *m.BatchConcurrency < 1 {
				return nil, at("batch_concurrency", "batch_concurrency %d: must be >= 1 (omit it for the warehouse's default)", *m.BatchConcurrency)
			}
			batchConc = *m.BatchConcurrency
		}
		var audits []models.Audit
		if m.Audits != nil {
			a, err := DecodeAudits(Node{file: path, path: fmt.Sprintf("models[%d].audits", i), v: m.Audits})
			if err != nil {
				if e, ok := err.(*Error); ok && e.Line == 0 {
					e.Line = lineNear(e.Path)
				}
				return nil, err
			}
			audits = a
		}
		var seed string
		if m.SeedFile != "" {
			if seed, err = readSeed(path, m.SeedFile); err != nil {
				return nil, at("seed_file", "%v", err)
			}
		}
		def := models.Definition{Model: m.Name, Version: m.Version, Cron: m.Cron, Unit: unit, Start: start.UTC(),
			Lookback: lookback, Kind: events.Kind(m.Kind), AllowPartials: m.AllowPartials, DependsOn: m.DependsOn,
			SQL: m.SQL, TimeColumn: m.TimeColumn, BatchSize: batchSize, BatchConcurrency: batchConc, Audits: audits, Grain: m.Grain,
			Seed: seed, Macros: m.Macros, Freshness: m.Freshness}
		if err := def.Validate(); err != nil {
			fe := err.(*models.FieldError)
			key := fe.Key
			if key == "seed" {
				key = "seed_file" // a model file gives a seed's content by its file
			}
			return nil, at(key, "%s", fe.Detail)
		}
		kind := def.Kind
		if kind == "" {
			kind = events.Incremental
		}
		sched, _ := interval.NewSchedule(m.Cron, unit, m.AllowPartials) // valid: Validate built it
		reg := commands.RegisterSnapshot{Model: m.Name, Version: m.Version, Cron: m.Cron, IntervalUnit: unit, Start: start.UTC(),
			Lookback: lookback, SnapshotKind: kind, AllowPartials: m.AllowPartials, DependsOn: m.DependsOn,
			SQL: m.SQL, TimeColumn: m.TimeColumn, BatchSize: batchSize, BatchConcurrency: batchConc, Audits: audits, Grain: m.Grain,
			Seed: seed, Macros: m.Macros, Freshness: m.Freshness}
		mod := Model{Register: reg, Line: line(fmt.Sprintf("$.models[%d]", i)), Index: i,
			SQLLine: line(fmt.Sprintf("$.models[%d].sql", i)), TimeColumnLine: line(fmt.Sprintf("$.models[%d].time_column", i))}
		if m.Version == "" {
			mod.Register.Version = contentVersion(reg, sched)
			mod.Derived = true
		} else {
			mod.VersionLine = line(fmt.Sprintf("$.models[%d].version", i))
		}
		out = append(out, mod)
	}
	deps := map[string][]string{}
	byName := map[string]Model{}
	for _, m := range out {
		deps[m.Register.Model] = m.Register.DependsOn
		byName[m.Register.Model] = m
	}
	sorted := make([]Model, 0, len(out))
	for _, n := range models.TopoSort(deps) {
		sorted = append(sorted, byName[n])
	}
	return sorted, nil
}

// contentVersion names a definition by its fingerprint (models.ContentVersion).
func contentVersion(r commands.RegisterSnapshot, sched interval.Schedule) string {
	kind := r.SnapshotKind
	if kind == "" {
		kind = events.Incremental
	}
	return models.ContentVersion(events.SnapshotRegistered{Model: r.Model, Cron: sched.Cron(), Unit: sched.Unit(), Start: r.Start,
		Lookback: r.Lookback, Kind: kind, AllowPartials: r.AllowPartials, DependsOn: r.DependsOn, SQL: r.SQL, TimeColumn: r.TimeColumn,
		BatchSize: r.BatchSize, BatchConcurrency: r.BatchConcurrency, Audits: r.Audits, Grain: r.Grain, Seed: r.Seed, Macros: r.Macros, Freshness: r.Freshness})
}

// readSeed reads a seed's CSV file, rel, relative to the folder of the
// model file at path: it must stay within that folder (no absolute path,
// no "..", no symbolic link out of it: os.Root) and hold at most
// models.MaxSeed bytes.
func readSeed(path, rel string) (string, error) {
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%q: want a path relative to the model file, within its folder", rel)
	}
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return "", fmt.Errorf("%q: %v", rel, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return "", fmt.Errorf("%q: %v", rel, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, models.MaxSeed+1))
	if err != nil {
		return "", fmt.Errorf("%q: %v", rel, err)
	}
	if len(b) > models.MaxSeed {
		return "", fmt.Errorf("%q is more than %d bytes: a seed holds at most that", rel, models.MaxSeed)
	}
	return string(b), nil
}

func lineOf(n ast.Node) int {
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}

func yamlError(path string, err error) error {
	msg := yaml.FormatError(err, false, false)
	if m := posRe.FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		text := m[3]
		if i := indexNewline(text); i >= 0 {
			text = text[:i]
		}
		return &Error{File: path, Line: l, Msg: text}
	}
	return &Error{File: path, Msg: msg}
}

func indexNewline(s string) int {
	for i, c := range s {
		if c == '\n' {
			return i
		}
	}
	return -1
}
