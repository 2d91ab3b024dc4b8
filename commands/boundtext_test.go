package commands

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// BoundText cuts at a UTF-8 boundary and marks the cut; an invalid byte
// early in the text does not make it drop everything after that byte.
func TestBoundText(t *testing.T) {
	if got := BoundText("short", 64); got != "short" {
		t.Fatalf("a short text: %q", got)
	}
	long := strings.Repeat("é", 100) // 2 bytes a rune
	for n := 17; n < 40; n++ {
		got := BoundText(long, n)
		if len(got) > n || !utf8.ValidString(got) || !strings.HasSuffix(got, " …(cut)") {
			t.Fatalf("BoundText(é×100, %d) = %q (%d bytes)", n, got, len(got))
		}
	}
	bad := "x\xff" + strings.Repeat("y", 200)
	if got := BoundText(bad, 100); len(got) < 90 {
		t.Fatalf("a text with an invalid byte at 1 was cut to %q", got)
	}
}
