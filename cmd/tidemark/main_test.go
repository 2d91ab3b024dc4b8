package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/warehouse"
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
	if _, err := warehouse.Open(t.Context(), filepath.Join(t.TempDir(), "w.duckdb"), warehouse.Options{}); errors.Is(err, warehouse.ErrNoCgo) {
		// Without cgo there is no DuckDB: the demo's SQL models cannot
		// run, and it says so.
		if code != 2 || !strings.Contains(stderr, "this build has no cgo, so no DuckDB") || out != "" {
			t.Fatalf("without cgo: exit %d, stderr %q, out %q", code, stderr, out)
		}
		t.Skip("the demo needs cgo (DuckDB)")
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	aw := "audit_warning, "
	for _, want := range []string{
		"REJECTED [" + aw + "missing_intervals]", "ACCEPTED [" + aw + "no_gaps, trailing_gap_accepted]", "ACCEPTED [" + aw + "caught_up, no_gaps]",
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
		"codes":                 {aw + "missing_intervals", aw + "no_gaps, trailing_gap_accepted", aw + "caught_up, no_gaps"},
		"repair debt at 11:07":  {"0", "1", "0"},
		"repair debt at 12:00":  {"0", "0", "0"},
		"stale advances fenced": {"0", "1", "1"},
		"replay divergences":    {"0", "0", "0"},
	} {
		if strings.Join(rows[label], "|") != strings.Join(want, "|") {
			t.Errorf("side by side %q: got %q, want %q", label, rows[label], want)
		}
	}
	// Each policy's run shows, before its promotion, the audits of the
	// candidate's backfill (one non-blocking failure, a warning on the
	// decision) and the plan's diff: in full under the first policy, its
	// counts under the others.
	policies := strings.Split(out, "\n== policy: ")[1:]
	if len(policies) != 3 {
		t.Fatalf("%d policy sections, want 3:\n%s", len(policies), out)
	}
	v1Audits := "audits of events@v1 over 2026-11-30T00:00:00Z/2026-12-01T06:00:00Z (1 batch): number_of_rows passed (1800 rows); full_hours passed"
	v2Audits := "audits of events@v2 over 2026-11-30T00:00:00Z/2026-12-01T10:00:00Z (1 batch): number_of_rows passed (1020 rows); full_hours FAILED (non-blocking: a warning, 34 rows)"
	warning := "audit_warning: model events: events@v2's non-blocking audit full_hours failed on 2026-11-30T00:00:00Z/"
	for i, sec := range policies {
		diff := "diff p1 before promoting, as under strict: events 1020 rows against 2040, 884 changed; rollup 1 row against 1, 1 changed"
		if i == 0 {
			diff = "diff p1 before promoting (what `tidemark diff p1` prints):\n" +
				"         plan p1 (env prod)\n" +
				"         events: events@v2 against events@v1 over 2026-11-30T00:00:00Z/2026-12-01T10:00:00Z\n" +
				"           DIFFERS: 1020 rows in the candidate, 2040 in the incumbent; 884 only in the candidate, 1904 only in the incumbent\n" +
				"           grain (ts): 884 rows changed; by column: user_id 884\n" +
				"             ts=2026-11-30T00:02:00Z: user_id 2 → 1\n"
		}
		promote := strings.Index(sec, "  11:07  promote p1: ")
		last := -1
		for _, want := range []string{v1Audits, v2Audits, diff, warning} {
			at := strings.Index(sec, want)
			if at < 0 {
				t.Errorf("policy %d: output lacks %q:\n%s", i, want, sec)
				continue
			}
			if at < last || (want != warning && at > promote) {
				t.Errorf("policy %d: %q out of order (at %d, promote at %d):\n%s", i, want, at, promote, sec)
			}
			last = at
		}
	}
	for _, want := range []string{
		"first failing row of full_hours: hour=2026-11-30T00:00:00Z page_views=30",
		"rollup: rollup@v1+p1 against rollup@v1 over 2026-11-30T00:00:00Z/2026-12-01T00:00:00Z",
		"grain (day): 1 row changed; by column: views 1, users 1",
		"day=2026-11-30T00:00:00Z: views 1440 → 720; users 7 → 5",
		// catch-up: the hour it computes is audited too, before the decision.
		"audits of events@v2 over 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z (1 batch): number_of_rows passed (30 rows); full_hours FAILED (non-blocking: a warning, 1 row)\n  11:07  promote p1: ACCEPTED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
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
