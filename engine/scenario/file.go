// Package scenario loads, validates and runs scenario files: deployment
// histories played on a simulated clock against a real embedded JetStream
// engine with the built-in worker, with expectations checked after steps.
// The file format is specified in SCENARIOS.md.
package scenario

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// InvalidError says why a file is invalid: which file, where, which field.
type InvalidError struct {
	File string
	Path string // e.g. steps[3].promote.plan (steps numbered from 1)
	Msg  string
}

func (e *InvalidError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Path, e.Msg)
}

// ErrInvalid is matched by every *InvalidError.
var ErrInvalid = errors.New("scenario: invalid file")

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(t error) bool { return t == ErrInvalid }

// Model is a model definition (or a version's overrides of one).
type Model struct {
	Name          string
	Cron          string
	IntervalUnit  interval.Unit
	Lookback      int
	Kind          events.Kind
	AllowPartials bool
	Start         time.Time
	DependsOn     []string
}

// Version is a version a step sets, with the model fields it overrides
// already applied.
type Version struct {
	Name  string
	Model Model
}

// Expect holds the expectation keys of a step; nil means not checked.
type Expect struct {
	Outcome     *string
	Codes       []string
	Missing     map[string][]interval.Range
	Advances    map[string]int
	RepairsOpen *int
	Divergences *int
	Incumbent   map[string]string
	// Scheduled is per model the exact merged ranges the step asked the
	// worker to compute.
	Scheduled map[string][]interval.Range
	keys      int
}

// Keys is how many expectation keys the step checks.
func (e *Expect) Keys() int {
	if e == nil {
		return 0
	}
	return e.keys
}

// Step is one step of a scenario.
type Step struct {
	Num  int
	Kind string
	// Env is set by deploy, plan, run_scheduler.
	Env string
	// Versions is set by deploy and plan (model -> version).
	Versions map[string]Version
	// Plan is the plan id of plan, backfill, promote.
	Plan                   string
	MaxTrailingGapAdvances int
	MaxCatchUpAdvances     int
	// Through (backfill), Until (run_scheduler), AdvanceDuringCatchUp (promote).
	Through              time.Time
	Until                time.Time
	AdvanceDuringCatchUp time.Time
	WorkerPaused         bool
	// Generation (run_scheduler) makes the scheduler start from a view read
	// at that env generation, as a lagging scheduler replica would: after a
	// promotion its first advance is fenced (stale_generation), then it
	// re-reads. 0: the current generation.
	Generation uint64
	// Finalize (promote) defaults to true.
	Finalize bool
	// Model, VersionName and Intervals are set by complete and invalidate.
	Model       string
	VersionName string
	Intervals   []interval.Range
	Expect      *Expect
}

// File is a parsed, validated scenario.
type File struct {
	Path   string
	Name   string
	Clock  time.Time
	Models map[string]Model
	// Order lists model names as written.
	Order []string
	Steps []Step
}

// Load reads and validates a scenario file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &InvalidError{File: path, Msg: err.Error()}
	}
	return Parse(path, b)
}

// Parse validates scenario bytes (YAML or JSON); path names the file in
// errors.
func Parse(path string, b []byte) (f *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &InvalidError{File: path, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	var raw any
	if err := yaml.UnmarshalWithOptions(b, &raw, yaml.UseOrderedMap()); err != nil {
		return nil, &InvalidError{File: path, Msg: "not valid YAML or JSON: " + yaml.FormatError(err, false, true)}
	}
	p := &parser{file: path}
	return p.parseFile(raw)
}

type parser struct {
	file string
}

func (p *parser) errf(path, format string, args ...any) error {
	return &InvalidError{File: p.file, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// obj is an ordered YAML mapping.
type obj struct {
	path string
	keys []string
	vals map[string]any
}

func (p *parser) object(path string, v any) (*obj, error) {
	o := &obj{path: path, vals: map[string]any{}}
	switch m := v.(type) {
	case yaml.MapSlice:
		for _, it := range m {
			k := fmt.Sprint(it.Key)
			if _, dup := o.vals[k]; dup {
				return nil, p.errf(join(path, k), "duplicate key")
			}
			o.keys = append(o.keys, k)
			o.vals[k] = it.Value
		}
	case map[string]any:
		for k, val := range m {
			o.keys = append(o.keys, k)
			o.vals[k] = val
		}
		sort.Strings(o.keys)
	case nil:
	default:
		return nil, p.errf(path, "want a mapping, got %s", describe(v))
	}
	return o, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("the string %q", v)
	case []any:
		return "a list"
	case yaml.MapSlice, map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

// only fails on keys outside allowed, naming them.
func (p *parser) only(o *obj, allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var unknown []string
	for _, k := range o.keys {
		if !ok[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return p.errf(join(o.path, unknown[0]), "unknown key %q (allowed: %s)", unknown[0], strings.Join(allowed, ", "))
	}
	return nil
}

func (p *parser) str(o *obj, key string, required bool) (string, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		if required {
			return "", p.errf(join(o.path, key), "is required")
		}
		return "", nil
	}
	switch s := v.(type) {
	case string:
		if required && strings.TrimSpace(s) == "" {
			return "", p.errf(join(o.path, key), "must not be empty")
		}
		return s, nil
	case uint64, int64, int, float64, bool:
		return fmt.Sprint(s), nil
	}
	return "", p.errf(join(o.path, key), "want a string, got %s", describe(v))
}

func (p *parser) timeAt(path string, v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case string:
		tt, err := time.Parse(time.RFC3339, strings.TrimSpace(t))
		if err != nil {
			return time.Time{}, p.errf(path, "want an RFC 3339 time (2026-12-01T00:00:00Z), got %q", t)
		}
		return tt.UTC(), nil
	}
	return time.Time{}, p.errf(path, "want an RFC 3339 time, got %s", describe(v))
}

func (p *parser) tm(o *obj, key string, required bool) (time.Time, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		if required {
			return time.Time{}, p.errf(join(o.path, key), "is required")
		}
		return time.Time{}, nil
	}
	return p.timeAt(join(o.path, key), v)
}

func (p *parser) intAt(path string, v any) (int, error) {
	switch n := v.(type) {
	case uint64:
		if n > 1<<31 {
			return 0, p.errf(path, "%d is too large", n)
		}
		return int(n), nil
	case int64:
		if n < 0 {
			return 0, p.errf(path, "must be >= 0, got %d", n)
		}
		if n > 1<<31 {
			return 0, p.errf(path, "%d is too large", n)
		}
		return int(n), nil
	case int:
		if n < 0 {
			return 0, p.errf(path, "must be >= 0, got %d", n)
		}
		return n, nil
	case float64:
		if n != float64(int(n)) || n < 0 {
			return 0, p.errf(path, "want a whole number >= 0, got %v", n)
		}
		return int(n), nil
	}
	return 0, p.errf(path, "want a whole number, got %s", describe(v))
}

func (p *parser) integer(o *obj, key string) (int, bool, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	n, err := p.intAt(join(o.path, key), v)
	return n, true, err
}

func (p *parser) boolean(o *obj, key string, def bool) (bool, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, p.errf(join(o.path, key), "want true or false, got %s", describe(v))
	}
	return b, nil
}

func (p *parser) list(path string, v any) ([]any, error) {
	switch l := v.(type) {
	case []any:
		return l, nil
	case nil:
		return nil, nil
	}
	return nil, p.errf(path, "want a list, got %s", describe(v))
}

func (p *parser) strList(o *obj, key string) ([]string, error) {
	l, err := p.list(join(o.path, key), o.vals[key])
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, p.errf(fmt.Sprintf("%s[%d]", join(o.path, key), i), "want a string, got %s", describe(v))
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) ranges(path string, v any) ([]interval.Range, error) {
	l, err := p.list(path, v)
	if err != nil {
		return nil, err
	}
	out := make([]interval.Range, 0, len(l))
	for i, it := range l {
		s, ok := it.(string)
		if !ok {
			return nil, p.errf(fmt.Sprintf("%s[%d]", path, i), "want START/END, got %s", describe(it))
		}
		r, err := interval.ParseRange(s)
		if err != nil {
			return nil, p.errf(fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
		out = append(out, r)
	}
	return out, nil
}
