package msgp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// enc encodes values in order: a map header is written with mapOf.
func enc(t *testing.T, vs ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	e := msgpack.NewEncoder(&b)
	for _, v := range vs {
		var err error
		switch v := v.(type) {
		case mapOf:
			err = e.EncodeMapLen(int(v))
		case arrayOf:
			err = e.EncodeArrayLen(int(v))
		case binOf:
			err = e.EncodeBytes(v)
		default:
			err = e.Encode(v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

type (
	mapOf   int
	arrayOf int
	binOf   []byte
)

func TestDuplicateKey(t *testing.T) {
	many := []any{mapOf(40)}
	for i := 0; i < 39; i++ {
		many = append(many, strings.Repeat("k", i+1), i)
	}
	many = append(many, "kkk", 1)
	cases := []struct {
		name string
		body []byte
		want string
		dup  bool
	}{
		{"distinct", enc(t, mapOf(2), "a", 1, "b", 2), "", false},
		{"top level", enc(t, mapOf(3), "a", 1, "b", 2, "a", 3), "a", true},
		{"nested map", enc(t, mapOf(2), "id", "x", "versions", mapOf(2), "m", "v1", "m", "v2"), "versions.m", true},
		{"same key in two maps", enc(t, mapOf(2), "a", mapOf(1), "x", 1, "b", mapOf(1), "x", 2), "", false},
		{"inside an array", enc(t, mapOf(1), "list", arrayOf(2), mapOf(1), "x", 1, mapOf(2), "y", 1, "y", 2), "list[1].y", true},
		{"after a nested map", enc(t, mapOf(3), "a", mapOf(2), "x", 1, "y", 2, "b", 1, "a", 2), "a", true},
		{"str and bin", enc(t, mapOf(2), "a", 1, binOf("a"), 2), "a", true},
		{"nil and empty", enc(t, mapOf(2), nil, 1, "", 2), "", true},
		{"many keys", enc(t, many...), "kkk", true},
		{"not a map", enc(t, arrayOf(2), 1, 2), "", false},
		{"scalar", enc(t, "x"), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Check(c.body); err != nil {
				t.Fatal(err)
			}
			got, dup, err := DuplicateKey(c.body)
			if err != nil || got != c.want || dup != c.dup {
				t.Fatalf("got %q %v, %v; want %q %v", got, dup, err, c.want, c.dup)
			}
		})
	}
	deep := bytes.Repeat([]byte{0x91}, MaxDepth+1)
	deep = append(deep, 0x01)
	if _, _, err := DuplicateKey(deep); err != ErrTooDeep {
		t.Fatalf("deep: %v", err)
	}
	if _, _, err := DuplicateKey(deep[1:]); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
}

func TestDuplicateKeyAllocs(t *testing.T) {
	body := enc(t, mapOf(4), "id", "c1", "model", "events", "ranges", arrayOf(2), arrayOf(2), 1, 2, arrayOf(2), 3, 4, "run_kind", "scheduled")
	if n := testing.AllocsPerRun(100, func() { _, _, _ = DuplicateKey(body) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
