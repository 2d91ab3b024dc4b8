package events

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tidemark/tidemark/internal/msgp"
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
		sameAsReflective(t, b)
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

// sameAsReflective: the hand-written decoders of the envelope, of
// IntervalsCompleted, of AuditRecorded and of EnvironmentRolledBack (and
// its elements) read a map (or nil) as the reflective decoder does,
// and refuse anything else (the reflective decoder would read an array
// by position).
func sameAsReflective(t *testing.T, b []byte) {
	t.Helper()
	if len(b) == 0 || (!msgp.IsMap(b[0]) && b[0] != 0xc0) {
		for name, v := range map[string]any{"envelope": &wire{}, "intervals_completed": &IntervalsCompleted{}, "audit_recorded": &AuditRecorded{}, "environment_rolled_back": &EnvironmentRolledBack{},
			"rolled_back_model": &RolledBackModel{}, "rolled_back_repair": &RolledBackRepair{}} {
			if err := unmarshal(b, v); err == nil {
				t.Fatalf("%s: hand-written decoder read % x, not a map", name, b)
			}
		}
		return
	}
	compare := func(name string, fast, plain any) {
		ferr, perr := unmarshal(b, fast), unmarshal(b, plain)
		if (ferr == nil) != (perr == nil) {
			t.Fatalf("%s: hand-written decoder says %v, reflective %v", name, ferr, perr)
		}
		if ferr == nil && !reflect.DeepEqual(reflect.ValueOf(fast).Elem().Interface(), reflect.ValueOf(plain).Elem().Convert(reflect.TypeOf(fast).Elem()).Interface()) {
			t.Fatalf("%s: hand-written decoder gave %+v, reflective %+v", name, fast, plain)
		}
	}
	compare("envelope", &wire{}, &wirePlain{})
	compare("intervals_completed", &IntervalsCompleted{}, &completedPlain{})
	compare("audit_recorded", &AuditRecorded{}, &recordedPlain{})
	compare("environment_rolled_back", &EnvironmentRolledBack{}, &rolledBackPlain{})
	compare("rolled_back_model", &RolledBackModel{}, &modelPlain{})
	compare("rolled_back_repair", &RolledBackRepair{}, &repairPlain{})
}

func unmarshal(b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("panic")
		}
	}()
	return msgp.Unmarshal(b, v)
}
