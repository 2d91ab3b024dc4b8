package events

import (
	"errors"
	"testing"
	"time"
)

// DecodeAt tells an event that is not a tidemark one: undecodable, or
// well-formed on a subject not its own.
func TestDecodeAtForeign(t *testing.T) {
	ev := New(NewIDSource(), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), EnvironmentFinalized{Env: "prod", Plan: "p1", Generation: 1})
	b, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeAt(EnvSubject("prod"), b); err != nil {
		t.Fatalf("own subject: %v", err)
	}
	if _, err := DecodeAt(EnvSubject("qa"), b); !errors.Is(err, ErrForeign) {
		t.Fatalf("another subject: %v", err)
	}
	var de *DecodeError
	if _, err := DecodeAt(EnvSubject("prod"), []byte(`{"accepted":true}`)); !errors.As(err, &de) {
		t.Fatalf("garbage: %v", err)
	}
}
