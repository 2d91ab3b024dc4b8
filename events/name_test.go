package events

import (
	"regexp"
	"strings"
	"testing"
)

// ValidName accepts exactly what the documented pattern does.
func TestValidName(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`)
	cases := []string{"", "a", "-a", "_a", "a-", "A9_-z", "a.b", "a b", "é", "a\n", "a$", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"-", "_", "9", "a@b", "a+b", "a/b", "a*", "a>", "\x00", "a\x00"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}))
	}
	for _, s := range cases {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

// FuzzValidName compares ValidName with the pattern on any input.
func FuzzValidName(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`)
	for _, s := range []string{"a", "-a", "a-b_C9", strings.Repeat("x", 128)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
