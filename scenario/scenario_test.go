package scenario

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/work"
)

func run(t *testing.T, f *File) *Result {
	t.Helper()
	res, err := Run(t.Context(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestStrictRace(t *testing.T) {
	f, err := Load(filepath.Join(scenarioDir, "strict-race.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, f)
	if res.Failed != 0 || res.Expectations != 7 {
		t.Fatalf("failed %d of %d expectations: %v", res.Failed, res.Expectations, res.Failures)
	}
	last := res.Steps[len(res.Steps)-1]
	if last.Outcome != "rejected" || len(last.Models["events"].Missing) != 1 {
		t.Fatalf("promote step: %+v", last)
	}
}

// scenarioDir holds the project's scenario files: copies of the shared
// contract examples and one file per rule of the promotion policies.
const scenarioDir = "../testdata/scenarios"

// Every scenario file passes, and checks something.
func TestScenarioFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			res, err := Run(t.Context(), f, Options{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != 0 || res.Expectations == 0 {
				t.Fatalf("failed %d of %d: %v", res.Failed, res.Expectations, res.Failures)
			}
			replayed(t, dir)
		})
	}
}

// The shared contract examples are copied into testdata so a fresh clone
// runs them; where the shared folder is present, the copies must match it.
func TestSharedScenarioCopies(t *testing.T) {
	shared, err := filepath.Glob("../../shared/scenarios/*.yaml")
	if err != nil || len(shared) == 0 {
		t.Skip("no ../shared/scenarios next to the repository")
	}
	for _, path := range shared {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(scenarioDir, filepath.Base(path)))
		if err != nil {
			t.Fatalf("%s is not copied into %s: %v", filepath.Base(path), scenarioDir, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the shared contract copy %s", filepath.Join(scenarioDir, filepath.Base(path)), path)
		}
	}
}

func TestWrongExpectationNamesStepAndKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(scenarioDir, "strict-race.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "outcome: rejected", "outcome: accepted", 1)
	f, err := Parse("wrong.yaml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, f)
	if res.Failed != 1 || res.Failures[0].Step != 6 || res.Failures[0].Key != "outcome" || res.Failures[0].Got != "rejected" {
		t.Fatalf("failures: %+v", res.Failures)
	}
}

const base = `
name: x
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
steps:
  - deploy: {env: prod, versions: {events: v1}}
`

// A scenario's model may be schema-qualified; its steps name it as it is.
func TestQualifiedModelFile(t *testing.T) {
	f, err := Parse("q.yaml", []byte(strings.NewReplacer("name: events", "name: sushi.events", "{events: v1}", "{sushi.events: v1}").Replace(base)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Models["sushi.events"]; !ok {
		t.Fatalf("models %v", f.Order)
	}
}

func TestInvalidFiles(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"not yaml", "name: [", "not valid YAML"},
		{"missing name", strings.Replace(base, "name: x\n", "", 1), "name: is required"},
		{"bad cron", strings.Replace(base, `"@hourly"`, `"* * * * *"`, 1), "models[0].cron"},
		{"unaligned start", strings.Replace(base, "start: 2026-12-01T00:00:00Z", "start: 2026-12-01T00:30:00Z", 1), "models[0].start"},
		{"unknown model key", strings.Replace(base, "    cron:", "    colour: red\n    cron:", 1), `models[0].colour: unknown key "colour"`},
		{"unknown step", base + "  - dance: {}\n", `step 2.dance: unknown step "dance"`},
		{"unknown step key", base + "  - run_scheduler: {env: prod, until: 2026-12-01T07:00:00Z, speed: 2}\n", `step 2.run_scheduler.speed: unknown key`},
		{"unknown expect key", base + "    expect: {outcom: accepted}\n", `step 1.expect.outcom: unknown key`},
		{"bad outcome", base + "    expect: {outcome: maybe}\n", `step 1.expect.outcome`},
		{"unknown plan", base + "  - promote: {plan: p9}\n", `step 2.promote.plan: unknown plan "p9"`},
		{"until in the past", base + "  - run_scheduler: {env: prod, until: 2026-12-01T05:00:00Z}\n", "step 2.run_scheduler.until"},
		{"complete not ended", base + "  - complete: {model: events, version: v1, intervals: [\"2026-12-01T06:00:00Z/2026-12-01T07:00:00Z\"]}\n", "step 2.complete.intervals[0]: 2026-12-01T06:00:00Z/2026-12-01T07:00:00Z has not ended"},
		{"complete unaligned", base + "  - complete: {model: events, version: v1, intervals: [\"2026-12-01T01:30:00Z/2026-12-01T02:00:00Z\"]}\n", "not aligned to the hour unit"},
		{"unknown version", base + "  - invalidate: {model: events, version: v7, intervals: [\"2026-12-01T01:00:00Z/2026-12-01T02:00:00Z\"]}\n", `step 2.invalidate.version`},
		{"two step keys", base + "  - {replay: {}, backfill: {plan: p1}}\n", "step 2: a step has exactly one of"},
		{"unknown model in versions", base + "  - plan: {id: p1, env: prod, versions: {nope: v2}}\n", `step 2.plan.versions.nope: unknown model`},
		{"bad range", base + "  - promote: {plan: deploy-1}\n", `unknown plan`},
		{"model of two dots", strings.NewReplacer("name: events", "name: a.b.c", "{events: v1}", "{a.b.c: v1}").Replace(base), `models[0].name: "a.b.c": use letters, digits, '_' and '-', or schema.model`},
		{"dotted env", strings.Replace(base, "env: prod", "env: pr.od", 1), `step 1.deploy.env: "pr.od"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.text))
			var ie *modelfile.Error
			if !errors.As(err, &ie) || !errors.Is(err, modelfile.ErrInvalid) {
				t.Fatalf("want *modelfile.Error, got %v", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bad.yaml: ") {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// invalidDir holds invalid scenario files. Each starts with the field its
// error names ("# field: step 2.plan.versions") and a part of the message
// ("# error: ..."); loading it fails with exactly that, and runs nothing.
const invalidDir = scenarioDir + "/invalid"

func TestInvalidScenarioFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(invalidDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			field, msg := invalidHeader(t, path)
			_, err := Load(path)
			var ie *modelfile.Error
			if !errors.As(err, &ie) || !errors.Is(err, modelfile.ErrInvalid) {
				t.Fatalf("want *modelfile.Error, got %v", err)
			}
			if ie.File != path || ie.Path != field || !strings.Contains(ie.Msg, msg) {
				t.Fatalf("got %q, want %s: %s: ...%s...", err, path, field, msg)
			}
		})
	}
}

// invalidHeader reads the "# field:" and "# error:" lines of an invalid file.
func invalidHeader(t *testing.T, path string) (field, msg string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "# field: "); ok {
			field = v
		}
		if v, ok := strings.CutPrefix(line, "# error: "); ok {
			msg = v
		}
	}
	if field == "" || msg == "" {
		t.Fatalf("%s: no '# field:' and '# error:' header", path)
	}
	return field, msg
}

func TestJSONFile(t *testing.T) {
	js := `{"name":"json","clock":"2026-12-01T06:00:00Z",
"models":[{"name":"events","cron":"@hourly","start":"2026-12-01T00:00:00Z"}],
"steps":[{"deploy":{"env":"prod","versions":{"events":"v1"}},"expect":{"outcome":"accepted","incumbent":{"events":"v1"}}},
{"run_scheduler":{"env":"prod","until":"2026-12-01T08:00:00Z","worker":"paused"}},
{"plan":{"id":"p1","env":"prod","versions":{"events":"v2"}}},
{"backfill":{"plan":"p1"}},
{"promote":{"plan":"p1"},"expect":{"outcome":"accepted","codes":["no_gaps"],"incumbent":{"events":"v2"}}},
{"invalidate":{"model":"events","version":"v2","intervals":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}},
{"complete":{"model":"events","version":"v2","intervals":["2026-12-01T01:00:00Z/2026-12-01T02:00:00Z"]}},
{"replay":{},"expect":{"divergences":0}}]}`
	f, err := Parse("x.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, f)
	if res.Failed != 0 || res.Expectations != 6 {
		t.Fatalf("failed %d of %d: %v", res.Failed, res.Expectations, res.Failures)
	}
}

// replayed reopens a scenario's stream: the projections the engine loads
// (from its checkpoint) equal a fold of the whole stream, and every
// recorded decision re-evaluates to the same result.
func replayed(t *testing.T, dir string) {
	t.Helper()
	e, recs := reopen(t, dir)
	if divs := replay.Verify(recs); len(divs) != 0 {
		t.Fatalf("re-evaluation diverges: %v", divs)
	}
	folded := replay.Fold(recs)
	sameWork(t, workOf(recs), folded)
	rebuilt, err := json.Marshal(folded)
	if err != nil {
		t.Fatal(err)
	}
	var live []byte
	e.Projection().Read(func(st *projections.State) { live, err = json.Marshal(st) })
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.CheckpointSeq == 0 || st.Folded != 0 {
		t.Errorf("reopened without its checkpoint: %+v", st)
	}
	if string(live) != string(rebuilt) {
		t.Fatalf("projections from the checkpoint differ from a replay:\n live    %s\n rebuilt %s", live, rebuilt)
	}
}

// reopen opens an engine on a scenario's data dir (closed when the test
// ends) and reads every event of its stream.
func reopen(t *testing.T, dir string) (*engine.Engine, []events.Record) {
	t.Helper()
	e := jstest.Engine(t, engine.Config{}, jstest.Node(t, natsnode.Config{DataDir: dir}))
	recs, err := jstest.ReadLog(t.Context(), e.Log().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	return e, recs
}

// A wrong scheduled expectation fails, naming the step and the key.
func TestWrongScheduledExpectation(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(scenarioDir, "strict-no-gaps.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const right = `scheduled: {events: ["2026-12-01T06:00:00Z/2026-12-01T10:00:00Z"]}`
	if !strings.Contains(string(b), right) {
		t.Fatalf("strict-no-gaps.yaml does not expect %s", right)
	}
	bad := strings.Replace(string(b), right, `scheduled: {events: ["2026-12-01T06:00:00Z/2026-12-01T09:00:00Z"]}`, 1)
	f, err := Parse("wrong.yaml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, f)
	if res.Failed != 1 || res.Failures[0].Step != 2 || res.Failures[0].Key != "scheduled.events" ||
		res.Failures[0].Got != "[2026-12-01T06:00:00Z/2026-12-01T10:00:00Z]" {
		t.Fatalf("failures: %+v", res.Failures)
	}
}

// sameWork: the work items the projection keeps (what a worker's report
// is checked against) are exactly those work.Of derives from the
// stream, with the same run kind and, per snapshot, the same ranges.
func sameWork(t *testing.T, items []work.Item, st *projections.State) {
	t.Helper()
	if len(items) != len(st.Work) {
		t.Errorf("work.Of derives %d items, the projection keeps %d", len(items), len(st.Work))
	}
	for _, it := range items {
		w, ok := st.Work[it.ID]
		if !ok || w.RunKind != it.RunKind {
			t.Errorf("item %s (%s): the projection has %+v", it.ID, it.RunKind, w)
			continue
		}
		steps := map[string]interval.Set{}
		for _, s := range it.Steps {
			steps[s.Snapshot] = steps[s.Snapshot].AddSet(interval.NewSet(s.Ranges...))
		}
		if len(steps) != len(w.Steps) {
			t.Errorf("item %s: steps %v, the projection's %v", it.ID, steps, w.Steps)
		}
		for sn, set := range steps {
			if !set.Equal(w.Steps[sn]) {
				t.Errorf("item %s, %s: %v, the projection's %v", it.ID, sn, set, w.Steps[sn])
			}
		}
	}
}
