package commands

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidemark/tidemark/internal/msgp"
)

// Duplicate keys. encoding/json and msgpack both let the last of two equal
// keys win, so {"version":"v1",…,"version":"v2"} would be read as v2 by
// the engine and as v1 by whatever looked at the body first (a proxy, a
// log, an audit). A body that names a key twice, in any object or map, is
// refused as malformed on that key.

// duplicateJSONKey reports the first key that appears twice in one object
// of body, as a path (the key; "versions.m" inside an object; "list[2].k"
// inside an array); found is false when there is none. Keys compare as
// encoding/json decodes them (escapes resolved, invalid UTF-8 replaced).
// body should be one valid JSON value (encoding/json has read it), so
// only strings and brackets need reading; on anything else it stops
// without panicking.
func duplicateJSONKey(body []byte) (path string, found bool) {
	type frame struct {
		obj       bool
		expectKey bool
		n         int    // array: index of the current item
		last      string // object: the key read last
		keys      map[string]struct{}
		via       string // how the parent names this value
	}
	var stack []frame
	pathOf := func(last string) string {
		var b strings.Builder
		for _, f := range stack[1:] {
			if f.via != "" && f.via[0] != '[' && b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.via)
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(last)
		return b.String()
	}
	via := func() string {
		if len(stack) == 0 {
			return ""
		}
		p := stack[len(stack)-1]
		if p.obj {
			return p.last
		}
		return "[" + strconv.Itoa(p.n) + "]"
	}
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, frame{obj: true, expectKey: true, via: via()})
		case '[':
			stack = append(stack, frame{via: via()})
		case '}', ']':
			if len(stack) == 0 {
				return "", false
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) == 0 {
				return "", false
			}
			if top := &stack[len(stack)-1]; top.obj {
				top.expectKey = true
			} else {
				top.n++
			}
		case '"':
			j := i + 1
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(body) {
				return "", false
			}
			if len(stack) == 0 {
				i = j
				continue
			}
			if top := &stack[len(stack)-1]; top.obj && top.expectKey {
				key := jsonKey(body[i : j+1])
				if _, dup := top.keys[key]; dup {
					return pathOf(key), true
				}
				if top.keys == nil {
					top.keys = map[string]struct{}{}
				}
				top.keys[key] = struct{}{}
				top.last, top.expectKey = key, false
			}
			i = j
		}
	}
	return "", false
}

// jsonKey is the string a quoted JSON key decodes to.
func jsonKey(quoted []byte) string {
	raw := quoted[1 : len(quoted)-1]
	plain := utf8.Valid(raw)
	for _, c := range raw {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(raw)
	}
	var s string
	_ = json.Unmarshal(quoted, &s)
	return s
}

// checkKeys refuses a JSON or msgpack body that names a key twice in one
// object or map (msgpack bodies must have passed msgp.Check).
func checkKeys(body []byte, isJSON bool) error {
	var path string
	var found bool
	if isJSON {
		path, found = duplicateJSONKey(body)
	} else {
		var err error
		if path, found, err = msgp.DuplicateKey(body); err != nil {
			return Errorf(CodeMalformed, "", "invalid msgpack: %v", err)
		}
	}
	if found {
		return Errorf(CodeMalformed, path, "key %q appears twice: a key may be given once", path)
	}
	return nil
}
