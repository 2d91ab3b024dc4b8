package msgp

import (
	"runtime"
	"testing"
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
