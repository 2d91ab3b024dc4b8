package msgp

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestUnmarshalHostileLengths: bytes whose header claims far more than
// they hold cost each decode a bounded allocation. (msgpack.Unmarshal's
// pooled decoders kept a buffer a megabyte larger after each such decode:
// 200 of them allocated about 20 GiB.)
func TestUnmarshalHostileLengths(t *testing.T) {
	hostile := []byte("\xdb0000") // str32 of 808 MB, 0 bytes present
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 200; i++ {
		var s string
		if err := Unmarshal(hostile, &s); err == nil {
			t.Fatal("hostile bytes decoded")
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<30 {
		t.Fatalf("200 hostile decodes allocated %d MiB", got>>20)
	}
}

// TestMapHostileKeyLength: a key whose header claims gigabytes is not
// allocated at its claimed length.
func TestMapHostileKeyLength(t *testing.T) {
	hostile := []byte("\x81\xc6\xc6\xc6\xc6\x30short") // map of 1, bin32 key of 3.3 GB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := Map(msgpack.NewDecoder(bytes.NewReader(hostile)), func([]byte) error { return nil })
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a truncated key decoded")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("reading the key allocated %d MiB", got>>20)
	}
}

// TestCheck: complete values of every kind pass; truncations and length
// claims beyond the input fail.
func TestCheck(t *testing.T) {
	type sample struct {
		S  string            `msgpack:"s"`
		B  []byte            `msgpack:"b"`
		I  []int64           `msgpack:"i"`
		F  float64           `msgpack:"f"`
		F4 float32           `msgpack:"f4"`
		U  uint64            `msgpack:"u"`
		M  map[string]string `msgpack:"m"`
		T  time.Time         `msgpack:"t"`
		N  *int              `msgpack:"n"`
		Ok bool              `msgpack:"ok"`
	}
	long := strings.Repeat("x", 70000)
	v := sample{S: long, B: []byte(long[:300]), I: []int64{-1, 1, 200, -200, 70000, -70000, 1 << 40, -1 << 40}, F: 1.5, F4: 2.5, U: 1 << 63,
		M: map[string]string{"a": "b", long[:40]: long[:300]}, T: time.Date(2026, 12, 1, 0, 0, 0, 5, time.UTC), Ok: true}
	list := make([]int, 70000)
	for _, x := range []any{v, list, map[int]int{1: 2}, int8(-100), uint16(60000), msgpack.RawMessage{0xd4, 1, 2}, msgpack.RawMessage{0xd8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		b, err := msgpack.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(b); err != nil {
			t.Fatalf("%T: %v", x, err)
		}
		for cut := len(b) - 1; cut >= 0; cut -= 1 + len(b)/50 {
			if err := Check(b[:cut]); err == nil {
				t.Fatalf("%T cut to %d of %d bytes passes", x, cut, len(b))
			}
		}
	}
	for _, b := range [][]byte{{0xdd, 0x7f, 0xff, 0xff, 0xff, 0xc0}, {0xdf, 0, 0, 1, 0, 1, 2}, {0xdb, 0xff, 0, 0, 0}, {0xc9, 0, 0, 0, 5, 1}, {0xc1}, {}} {
		if err := Check(b); err == nil {
			t.Fatalf("% x passes", b)
		}
	}
}
