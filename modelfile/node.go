package modelfile

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/tidemark/tidemark/events/interval"
)

// Node is a value read from a YAML or JSON file, at a field path of it.
type Node struct {
	file string
	path string
	v    any
}

// Read reads YAML or JSON bytes into their top node; path names the file in
// errors.
func Read(path string, b []byte) (n Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = Node{}, &Error{File: path, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	var raw any
	if err := yaml.UnmarshalWithOptions(b, &raw, yaml.UseOrderedMap()); err != nil {
		return Node{}, &Error{File: path, Msg: "not valid YAML or JSON: " + yaml.FormatError(err, false, true)}
	}
	return Node{file: path, v: raw}, nil
}

// Path is the node's field path ("" for the top).
func (n Node) Path() string { return n.path }

// At is the same value named by another field path.
func (n Node) At(path string) Node { return Node{file: n.file, path: path, v: n.v} }

// Errorf is an *Error at the node's path.
func (n Node) Errorf(format string, args ...any) error {
	return &Error{File: n.file, Path: n.path, Msg: fmt.Sprintf(format, args...)}
}

func (n Node) errAt(path, format string, args ...any) error {
	return &Error{File: n.file, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Map is a mapping node: its keys in file order.
type Map struct {
	n    Node
	keys []string
	vals map[string]any
}

// Map reads the node as a mapping (nothing reads as an empty one);
// duplicate keys are refused.
func (n Node) Map() (*Map, error) {
	o := &Map{n: n, vals: map[string]any{}}
	switch m := n.v.(type) {
	case yaml.MapSlice:
		for _, it := range m {
			k := fmt.Sprint(it.Key)
			if _, dup := o.vals[k]; dup {
				return nil, n.errAt(join(n.path, k), "duplicate key")
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
		return nil, n.Errorf("want a mapping, got %s", describe(n.v))
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

// Path is the mapping's field path.
func (o *Map) Path() string { return o.n.path }

// Keys are the mapping's keys in file order.
func (o *Map) Keys() []string { return o.keys }

// Has says whether key is present (even with no value).
func (o *Map) Has(key string) bool {
	_, ok := o.vals[key]
	return ok
}

// Get is the value at key (a nothing node when absent).
func (o *Map) Get(key string) Node {
	return Node{file: o.n.file, path: join(o.n.path, key), v: o.vals[key]}
}

// Errorf is an *Error at the path of key.
func (o *Map) Errorf(key, format string, args ...any) error {
	return o.Get(key).Errorf(format, args...)
}

// Only fails on keys outside allowed, naming the first.
func (o *Map) Only(allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, k := range o.keys {
		if !ok[k] {
			return o.Errorf(k, "unknown key %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Str reads key as a string (numbers and booleans as written); required
// refuses an absent or blank one.
func (o *Map) Str(key string, required bool) (string, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		if required {
			return "", o.Errorf(key, "is required")
		}
		return "", nil
	}
	switch s := v.(type) {
	case string:
		if required && strings.TrimSpace(s) == "" {
			return "", o.Errorf(key, "must not be empty")
		}
		return s, nil
	case uint64, int64, int, float64, bool:
		return fmt.Sprint(s), nil
	}
	return "", o.Errorf(key, "want a string, got %s", describe(v))
}

// Text is the node's value when it is a string.
func (n Node) Text() (string, bool) {
	s, ok := n.v.(string)
	return s, ok
}

// Time reads the node as an RFC 3339 time, in UTC.
func (n Node) Time() (time.Time, error) {
	switch t := n.v.(type) {
	case time.Time:
		return t.UTC(), nil
	case string:
		tt, err := time.Parse(time.RFC3339, strings.TrimSpace(t))
		if err != nil {
			return time.Time{}, n.Errorf("want an RFC 3339 time (2026-12-01T00:00:00Z), got %q", t)
		}
		return tt.UTC(), nil
	}
	return time.Time{}, n.Errorf("want an RFC 3339 time, got %s", describe(n.v))
}

// Time reads key as a time; absent is the zero time unless required.
func (o *Map) Time(key string, required bool) (time.Time, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		if required {
			return time.Time{}, o.Errorf(key, "is required")
		}
		return time.Time{}, nil
	}
	return o.Get(key).Time()
}

// Int reads the node as a whole number >= 0 (at most 2^31).
func (n Node) Int() (int, error) {
	switch v := n.v.(type) {
	case uint64:
		if v > 1<<31 {
			return 0, n.Errorf("%d is too large", v)
		}
		return int(v), nil
	case int64:
		if v < 0 {
			return 0, n.Errorf("must be >= 0, got %d", v)
		}
		if v > 1<<31 {
			return 0, n.Errorf("%d is too large", v)
		}
		return int(v), nil
	case int:
		if v < 0 {
			return 0, n.Errorf("must be >= 0, got %d", v)
		}
		return v, nil
	case float64:
		if v != float64(int(v)) || v < 0 {
			return 0, n.Errorf("want a whole number >= 0, got %v", v)
		}
		return int(v), nil
	}
	return 0, n.Errorf("want a whole number, got %s", describe(n.v))
}

// Int reads key as a whole number; ok says whether it was given.
func (o *Map) Int(key string) (n int, ok bool, err error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	n, err = o.Get(key).Int()
	return n, true, err
}

// Bool reads key as true or false; absent is def.
func (o *Map) Bool(key string, def bool) (bool, error) {
	v, ok := o.vals[key]
	if !ok || v == nil {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, o.Errorf(key, "want true or false, got %s", describe(v))
	}
	return b, nil
}

// List reads the node as a list (nothing reads as an empty one); item i is
// at path "<path>[i]".
func (n Node) List() ([]Node, error) {
	var l []any
	switch v := n.v.(type) {
	case []any:
		l = v
	case nil:
		return nil, nil
	default:
		return nil, n.Errorf("want a list, got %s", describe(n.v))
	}
	out := make([]Node, len(l))
	for i, v := range l {
		out[i] = Node{file: n.file, path: fmt.Sprintf("%s[%d]", n.path, i), v: v}
	}
	return out, nil
}

// StrList reads key as a list of strings.
func (o *Map) StrList(key string) ([]string, error) {
	l, err := o.Get(key).List()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for _, it := range l {
		s, ok := it.v.(string)
		if !ok {
			return nil, it.Errorf("want a string, got %s", describe(it.v))
		}
		out = append(out, s)
	}
	return out, nil
}

// Ranges reads the node as a list of START/END interval ranges.
func (n Node) Ranges() ([]interval.Range, error) {
	l, err := n.List()
	if err != nil {
		return nil, err
	}
	out := make([]interval.Range, 0, len(l))
	for _, it := range l {
		s, ok := it.v.(string)
		if !ok {
			return nil, it.Errorf("want START/END, got %s", describe(it.v))
		}
		r, err := interval.ParseRange(s)
		if err != nil {
			return nil, it.Errorf("%v", err)
		}
		out = append(out, r)
	}
	return out, nil
}
