// Package scenario loads, validates and runs scenario files: deployment
// histories played on a simulated clock against a real embedded JetStream
// engine with the built-in worker, with expectations checked after steps.
// The file format is specified in SCENARIOS.md. Beyond it, a model (or a
// version's overrides) may take the whole kinds `kind: full | view | seed`
// (docs/kinds.md), with `sql` for full and view, `seed` (the CSV content,
// inline; optional in a scenario file: DefaultSeed) for a seed, and
// `macros: sqlmesh`. Without a warehouse the built-in worker records
// whatever ranges it is given, so a scenario shows a whole kind's work
// (from its start) in its `scheduled` expectations.
// Importers: cmd/tidemark (scenario run, demo); the web and replay tests.
package scenario

import (
	"fmt"
	"os"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/modelfile"
	"github.com/tidemark/tidemark/models"
)

// Version is a version a step sets, with the model fields it overrides
// already applied.
type Version struct {
	Name  string
	Model models.Definition // Version unset: Name is the version
}

// Expect holds the expectation keys of a step; nil means not checked.
type Expect struct {
	Outcome     *string
	Codes       []string
	Missing     map[string][]interval.Range
	Advances    map[string]int
	RepairsOpen *int
	Divergences *int
	Incumbent   map[string]string
	// Scheduled is per model the exact merged ranges the step asked the
	// worker to compute.
	Scheduled map[string][]interval.Range
	// VerifyDiffs (verify: {diffs: N}) is the number of rows, summed over
	// the SQL models the step's env serves, that differ between the env's
	// views and a recompute (sqlrun.VerifyEnv); it needs a warehouse.
	VerifyDiffs *int
	keys        int
}

// Keys is how many expectation keys the step checks.
func (e *Expect) Keys() int {
	if e == nil {
		return 0
	}
	return e.keys
}

// Step is one step of a scenario.
type Step struct {
	Num  int
	Kind string
	// Env is set by deploy, plan, run_scheduler.
	Env string
	// Versions is set by deploy and plan (model -> version).
	Versions map[string]Version
	// Plan is the plan id of plan, backfill, promote.
	Plan string
	// Bounds is a plan step's policy (max_trailing_gap_advances,
	// max_catch_up_advances).
	Bounds commands.Bounds
	// Through (backfill), Until (run_scheduler), AdvanceDuringCatchUp (promote).
	Through              time.Time
	Until                time.Time
	AdvanceDuringCatchUp time.Time
	WorkerPaused         bool
	// Generation (run_scheduler) makes the scheduler start from a view read
	// at that env generation, as a lagging scheduler replica would: after a
	// promotion its first advance is fenced (stale_generation), then it
	// re-reads. 0: the current generation.
	Generation uint64
	// Finalize (promote) defaults to true.
	Finalize bool
	// Model, VersionName and Intervals are set by complete and invalidate.
	Model       string
	VersionName string
	Intervals   []interval.Range
	// Audits (complete) are the audit outcomes the completion reports, in
	// the file's order: the audits map, audit name -> {passed, count}.
	Audits []events.AuditOutcome
	Expect *Expect
}

// File is a parsed, validated scenario.
type File struct {
	Path   string
	Name   string
	Clock  time.Time
	Models map[string]models.Definition
	// Order lists model names as written.
	Order []string
	Steps []Step
}

// Load reads and validates a scenario file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &modelfile.Error{File: path, Msg: err.Error()}
	}
	return Parse(path, b)
}

// Parse validates scenario bytes (YAML or JSON); path names the file in
// errors, every one a *modelfile.Error.
func Parse(path string, b []byte) (f *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &modelfile.Error{File: path, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	top, err := modelfile.Read(path, b)
	if err != nil {
		return nil, err
	}
	p := &parser{file: path}
	return p.parseFile(top)
}

type parser struct {
	file string
}

func (p *parser) errf(path, format string, args ...any) error {
	return &modelfile.Error{File: p.file, Path: path, Msg: fmt.Sprintf(format, args...)}
}
