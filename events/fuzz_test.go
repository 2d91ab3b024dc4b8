package events

import (
	"errors"
	"testing"
)

// FuzzDecode: any bytes decode to an event or a *DecodeError, never a panic;
// what decodes re-encodes and decodes to the same type.
func FuzzDecode(f *testing.F) {
	ids := NewIDSource()
	for _, p := range samplePayloads() {
		b, err := Encode(New(ids, t0, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		again, err := Encode(ev)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := Decode(again)
		if err != nil || back.Type != ev.Type {
			t.Fatalf("re-decode: %v %v", back.Type, err)
		}
	})
}
