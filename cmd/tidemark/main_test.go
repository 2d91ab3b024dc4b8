package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	if err != nil {
		errb.WriteString(err.Error())
	}
	code := exitCode(err)
	return out.String(), errb.String(), code
}

const strictRace = "../../testdata/scenarios/strict-race.yaml"

func TestScenarioRunJSON(t *testing.T) {
	out, stderr, code := runCLI(t, "scenario", "run", strictRace, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("want 6 step lines and a summary, got %d:\n%s", len(lines), out)
	}
	var promote, summary map[string]any
	if err := json.Unmarshal([]byte(lines[5]), &promote); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[6]), &summary); err != nil {
		t.Fatal(err)
	}
	if promote["kind"] != "promote" || promote["outcome"] != "rejected" || promote["step"] != float64(6) {
		t.Fatalf("promote line: %v", promote)
	}
	models := promote["models"].(map[string]any)["events"].(map[string]any)
	if m := models["missing"].([]any); len(m) != 1 || m[0] != "2026-12-01T10:00:00Z/2026-12-01T11:00:00Z" {
		t.Fatalf("missing: %v", models)
	}
	if summary["summary"] != true || summary["failed"] != float64(0) || summary["expectations"] != float64(7) {
		t.Fatalf("summary: %v", summary)
	}
}

func TestScenarioExitCodes(t *testing.T) {
	b, err := os.ReadFile(strictRace)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.yaml")
	os.WriteFile(wrong, []byte(strings.Replace(string(b), "codes: [missing_intervals]", "codes: [no_gaps]", 1)), 0o644)
	_, stderr, code := runCLI(t, "scenario", "run", wrong)
	if code != 1 || !strings.Contains(stderr, "step 6: codes") {
		t.Fatalf("wrong expectation: exit %d, stderr %q", code, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(string(b), "  - backfill: {plan: p1}", "  - backfill: {plan: p1, speed: 3}", 1)), 0o644)
	out, stderr, code := runCLI(t, "scenario", "run", strictRace, bad)
	if code != 2 || !strings.Contains(stderr, "bad.yaml: step 4.backfill.speed: unknown key") || out != "" {
		t.Fatalf("malformed file: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// Every invalid scenario file exits 2 before anything runs, naming the
// file, the step and the field (testdata/scenarios/invalid: each file's
// "# field:" header).
func TestScenarioInvalidFilesExit2(t *testing.T) {
	files, err := filepath.Glob("../../testdata/scenarios/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`(?m)^# field: (.+)$`).FindSubmatch(b)
			if m == nil {
				t.Fatalf("%s has no '# field:' header", path)
			}
			want := path + ": " + string(m[1]) + ": "
			out, stderr, code := runCLI(t, "scenario", "run", strictRace, path, "--json")
			if code != 2 || out != "" || !strings.Contains(stderr, want) {
				t.Fatalf("exit %d, %d bytes of stdout, stderr %q; want exit 2, no output, %q", code, len(out), stderr, want)
			}
		})
	}
}

// A wrong scheduled expectation exits 1 naming the step and the key; the
// JSON line carries what the step scheduled.
func TestScenarioScheduled(t *testing.T) {
	const file = "../../testdata/scenarios/strict-no-gaps.yaml"
	out, stderr, code := runCLI(t, "scenario", "run", file, "-o", "json")
	if code != 0 || !strings.Contains(out, `"scheduled":{"events":["2026-12-01T06:00:00Z/2026-12-01T10:00:00Z"]}`) {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, stderr, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.yaml")
	os.WriteFile(wrong, []byte(strings.Replace(string(b), `{scheduled: {events: []}}`, `{scheduled: {events: ["2026-12-01T10:00:00Z/2026-12-01T11:00:00Z"]}}`, 1)), 0o644)
	_, stderr, code = runCLI(t, "scenario", "run", wrong)
	if code != 1 || !strings.Contains(stderr, "step 5: scheduled.events: want [2026-12-01T10:00:00Z/2026-12-01T11:00:00Z], got []") {
		t.Fatalf("wrong expectation: exit %d, stderr %q", code, stderr)
	}
}

func TestDemo(t *testing.T) {
	out, stderr, code := runCLI(t, "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"REJECTED [missing_intervals]", "ACCEPTED [no_gaps, trailing_gap_accepted]", "ACCEPTED [caught_up, no_gaps]",
		"missing_intervals: events@v2 misses 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z",
		"catch-up: computed 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z for events",
		"repair issued with the acceptance: events 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z",
		"repair debt closed: events@v2 now covers 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z, 0s of simulated time",
		"fenced: 1 advance",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The side-by-side table: one column per policy, same race.
	rows := map[string][]string{}
	for _, line := range strings.Split(out[strings.Index(out, "== side by side"):], "\n")[2:] {
		if cols := regexp.MustCompile(`\s{3,}`).Split(strings.TrimSpace(line), -1); len(cols) == 4 {
			rows[cols[0]] = cols[1:]
		}
	}
	for label, want := range map[string][]string{
		"decision at 11:07":     {"rejected", "accepted", "accepted"},
		"codes":                 {"missing_intervals", "no_gaps, trailing_gap_accepted", "caught_up, no_gaps"},
		"repair debt at 11:07":  {"0", "1", "0"},
		"repair debt at 12:00":  {"0", "0", "0"},
		"stale advances fenced": {"0", "1", "1"},
		"replay divergences":    {"0", "0", "0"},
	} {
		if strings.Join(rows[label], "|") != strings.Join(want, "|") {
			t.Errorf("side by side %q: got %q, want %q", label, rows[label], want)
		}
	}
	if strings.Contains(out, "rows are not shown: this build has no cgo") {
		return
	}
	// Real rows from prod's views: v1 before, the trailing gap's missing
	// hour, v2 after catch-up; and every verify equal.
	for _, want := range []string{
		"prod.events  08:00 60 rows/7 users | 09:00 60 rows/7 users | 10:00 60 rows/7 users | 11:00 -",
		"prod.events  08:00 30 rows/5 users | 09:00 30 rows/5 users | 10:00 - | 11:00 -",
		"prod.events  08:00 30 rows/5 users | 09:00 30 rows/5 users | 10:00 30 rows/5 users | 11:00 30 rows/5 users",
		"prod.rollup  2026-11-30 1440 views/7 users", "prod.rollup  2026-11-30 720 views/5 users",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if n := strings.Count(out, "verify prod (events, rollup recomputed, compared with prod's views): 0 differing rows"); n != 3 {
		t.Errorf("%d clean verifies, want 3", n)
	}
	for label, want := range map[string][]string{
		"prod.events 10:00 after promote": {"60 rows/7 users", "-", "30 rows/5 users"},
		"verify: differing rows":          {"0", "0", "0"},
	} {
		if strings.Join(rows[label], "|") != strings.Join(want, "|") {
			t.Errorf("side by side %q: got %q, want %q", label, rows[label], want)
		}
	}
}
