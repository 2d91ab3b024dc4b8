package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplyAtomic: a model file whose models depend on each other in a
// cycle registers none of them (exit 2, naming the file's line of the
// one that closes the cycle); the fixed file then registers all, and
// re-applying it registers nothing.
func TestApplyAtomic(t *testing.T) {
	s := startServe(t)
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour).Format(time.RFC3339)
	file := filepath.Join(t.TempDir(), "models.yaml")
	write := func(rawDeps string) {
		body := "models:\n" +
			"  - name: raw\n    version: v1\n    cron: \"@hourly\"\n    start: " + start + "\n" + rawDeps +
			"  - name: events\n    version: v1\n    cron: \"@hourly\"\n    start: " + start + "\n    depends_on: [raw]\n" +
			"  - name: rollup\n    version: v1\n    cron: \"@daily\"\n    start: " + start + "\n    depends_on: [events]\n"
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("    depends_on: [rollup]\n")
	out, stderr, code := runCLI(t, "apply", "-f", file, "--nats-url", s.nats)
	if code != exitUsage || !strings.Contains(stderr, "dependency cycle") || !strings.Contains(stderr, "nothing was registered") || !strings.Contains(stderr, file+":") {
		t.Fatalf("apply of a cycle: exit %d %s %s", code, out, stderr)
	}
	for _, m := range []string{"raw", "events", "rollup"} {
		if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", m+"=v1", "--nats-url", s.nats); code != exitNotFound {
			t.Fatalf("%s@v1 after the refused apply: plan exit %d %s", m, code, stderr)
		}
	}
	write("")
	out, stderr, code = runCLI(t, "apply", "-f", file, "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "3 model(s), 3 registered, 0 unchanged") || !strings.Contains(out, "registered raw@v1 (seq ") {
		t.Fatalf("apply of the fixed file: exit %d %s %s", code, out, stderr)
	}
	out, stderr, code = runCLI(t, "apply", "-f", file, "--nats-url", s.nats)
	if code != 0 || !strings.Contains(out, "3 model(s), 0 registered, 3 unchanged") {
		t.Fatalf("apply again: exit %d %s %s", code, out, stderr)
	}
	// A version registered with another definition refuses the whole
	// file, naming the model's line; nothing else of it is registered.
	os.WriteFile(file, []byte("models:\n"+
		"  - name: fresh\n    version: v1\n    cron: \"@hourly\"\n    start: "+start+"\n"+
		"  - name: raw\n    version: v1\n    cron: \"@daily\"\n    start: "+start+"\n"), 0o644)
	out, stderr, code = runCLI(t, "apply", "-f", file, "--nats-url", s.nats)
	if code != exitFailed || !strings.Contains(stderr, file+":7: version: raw@v1 is already registered with a different definition") {
		t.Fatalf("apply of a changed version: exit %d %s %s", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "fresh=v1", "--nats-url", s.nats); code != exitNotFound {
		t.Fatalf("fresh@v1 after the refused apply: plan exit %d %s", code, stderr)
	}
}
