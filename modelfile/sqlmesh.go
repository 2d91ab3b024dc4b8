package modelfile

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
)

// ConfigEntry is one key of a SQLMesh project's config file: its name,
// its value as written when it is a scalar (Scalar set), and its line.
type ConfigEntry struct {
	Key    string
	Value  string
	Scalar bool
	Line   int
}

// ReadSQLMeshConfig reads a SQLMesh project's config.yaml: its top-level
// keys in file order, and the entries of its model_defaults mapping
// (scalars as written, quotes removed). It checks only the shape: a
// mapping at the top and under model_defaults, no key twice; what the
// values mean is the caller's to say. path names the file in errors.
func ReadSQLMeshConfig(path string, b []byte) (top, defaults []ConfigEntry, err error) {
	defer func() {
		if r := recover(); r != nil {
			top, defaults, err = nil, nil, &Error{File: path, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	f, err := parser.ParseBytes(b, 0)
	if err != nil {
		return nil, nil, yamlError(path, err)
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, nil, nil
	}
	if len(f.Docs) > 1 {
		return nil, nil, &Error{File: path, Line: lineOf(f.Docs[1]), Msg: "one YAML document expected"}
	}
	body := f.Docs[0].Body
	vals, err := mappingValues(path, "", body)
	if err != nil {
		return nil, nil, err
	}
	top, err = entries(path, "", vals)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range top {
		if e.Key != "model_defaults" {
			continue
		}
		dv, err := mappingValues(path, "model_defaults", vals[i].Value)
		if err != nil {
			return nil, nil, err
		}
		if defaults, err = entries(path, "model_defaults.", dv); err != nil {
			return nil, nil, err
		}
	}
	return top, defaults, nil
}

// mappingValues are the entries of a mapping node (nothing is none).
func mappingValues(path, field string, n ast.Node) ([]*ast.MappingValueNode, error) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, nil
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, nil
	case *ast.NullNode, nil:
		return nil, nil
	}
	return nil, &Error{File: path, Line: lineOf(n), Path: field, Msg: "want a mapping"}
}

// entries reads a mapping's entries, refusing a key given twice.
func entries(path, prefix string, vals []*ast.MappingValueNode) ([]ConfigEntry, error) {
	var out []ConfigEntry
	seen := map[string]int{}
	for _, mv := range vals {
		e := ConfigEntry{Key: mv.Key.GetToken().Value, Line: lineOf(mv.Key)}
		if first, dup := seen[e.Key]; dup {
			return nil, &Error{File: path, Line: e.Line, Path: prefix + e.Key, Msg: fmt.Sprintf("duplicate key (first on line %d)", first)}
		}
		seen[e.Key] = e.Line
		if s, ok := mv.Value.(ast.ScalarNode); ok && mv.Value.Type() != ast.NullType {
			e.Value, e.Scalar = s.GetToken().Value, true
		}
		out = append(out, e)
	}
	return out, nil
}

// ContentVersion is the version a file derives for a registration that
// gives none (contentVersion, which Parse uses): models.ContentVersion of
// its normalized definition (its schedule's cron and unit, its kind
// defaulted), every field that enters the fingerprint included. r's
// schedule should be valid (Validate); if not, its cron and unit are
// taken as given.
func ContentVersion(r commands.RegisterSnapshot) string {
	sched, err := interval.NewSchedule(r.Cron, r.IntervalUnit, r.AllowPartials)
	if err != nil {
		kind := r.SnapshotKind
		if kind == "" {
			kind = events.Incremental
		}
		return models.ContentVersion(events.SnapshotRegistered{Model: r.Model, Cron: r.Cron, Unit: r.IntervalUnit, Start: r.Start,
			Lookback: r.Lookback, Kind: kind, AllowPartials: r.AllowPartials, DependsOn: r.DependsOn, SQL: r.SQL, TimeColumn: r.TimeColumn,
			BatchSize: r.BatchSize, BatchConcurrency: r.BatchConcurrency, Audits: r.Audits, Grain: r.Grain, Seed: r.Seed, Macros: r.Macros})
	}
	return contentVersion(r, sched)
}
