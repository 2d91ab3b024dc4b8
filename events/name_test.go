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

// ValidModelName takes a name or one schema-qualified name; ValidName and
// ValidVersion still take no dot.
func TestValidModelName(t *testing.T) {
	for s, want := range map[string]bool{
		"orders": true, "sushi.orders": true, "a.b": true, "_a.b-c": true,
		"a.b.c": false, ".a": false, "a.": false, ".": false, "": false, "a..b": false,
		"-a.b": false, "a.-b": false, "a b.c": false, "a.b c": false, "a:b": false,
		strings.Repeat("a", 128) + ".b": true, strings.Repeat("a", 129) + ".b": false,
	} {
		if got := ValidModelName(s); got != want {
			t.Errorf("ValidModelName(%q) = %v, want %v", s, got, want)
		}
	}
	if ValidName("a.b") || ValidVersion("a.b") || ValidVersion("v1+a.b") {
		t.Error("a dot is for model names only")
	}
}

// A schema-qualified model's subject keeps its name one token: sushi.orders
// never shares a subject, nor a subject filter's token, with a model named
// sushi, and a model without a dot keeps the subject it had.
func TestQualifiedModelSubject(t *testing.T) {
	if got := SnapshotSubject("events", "v1"); got != "tidemark.evt.snap.events.v1" {
		t.Fatalf("an unqualified model's subject changed: %s", got)
	}
	q := SnapshotSubject("sushi.orders", "v1")
	if q != "tidemark.evt.snap.sushi:orders.v1" {
		t.Fatalf("SnapshotSubject(sushi.orders, v1) = %s", q)
	}
	if got := (IntervalsCompleted{Snapshot: "sushi.orders@v1+p1"}).Subject(); got != "tidemark.evt.snap.sushi:orders.v1+p1" {
		t.Fatalf("a dotted snapshot id's subject: %s", got)
	}
	// Model "sushi"'s subjects are snap.sushi.<version>: three tokens after
	// the prefix's, whatever the version (a version has no dot); none of
	// them is q, and q is not under the filter of model sushi's subjects.
	tokens := strings.Split(strings.TrimPrefix(q, SubjectPrefix), ".")
	if len(tokens) != 3 || tokens[1] != "sushi:orders" {
		t.Fatalf("%s splits into %q: the model's name must be one token", q, tokens)
	}
	for _, v := range []string{"orders", "v1", "orders+v1"} {
		if s := SnapshotSubject("sushi", v); s == q || strings.HasPrefix(q, SnapshotSubject("sushi", "")) {
			t.Fatalf("model sushi (version %s) meets sushi.orders: %s, %s", v, s, q)
		}
	}
	if ValidName("sushi:orders") || ValidModelName("sushi:orders") {
		t.Fatal("the encoded token must not be a name of its own")
	}
}
