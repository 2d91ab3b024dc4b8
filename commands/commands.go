// Package commands defines tidemark's command messages, their validation
// and their codecs: messages only, no NATS (package transport carries them;
// decide, engine, transport, the CLI and the workers import this one).
//
// A command is addressed to subject tidemark.cmd.<user>.<kind>. Its body is msgpack
// (Content-Type application/msgpack, the default) or JSON (Content-Type
// application/json); the reply uses the request's encoding. Unknown fields
// are an error. Every command carries an id, recorded with the events it
// appends (with a digest of what it asks), so a retried command is applied
// once and an id reused for another command is refused.
package commands

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/models"
)

// Meta is carried by every command.
type Meta struct {
	// ID identifies the command; a retry must reuse it. Required: 1 to
	// MaxIDLen letters, digits and . _ - : / @ + = (ids.go); ids starting
	// with InternalPrefix are the engine's own and refused from the wire.
	ID string `msgpack:"id" json:"id"`
	// Actor is who issues the command.
	Actor string `msgpack:"actor,omitempty" json:"actor,omitempty"`
	// At is the command's clock. Zero means the engine's clock. Only an
	// engine on a simulated clock (scenarios, tests) accepts it from a
	// client; policy and projections never read any other clock.
	At time.Time `msgpack:"at,omitempty" json:"at,omitempty"`
	// Correlation groups related commands (a plan id, a run id).
	Correlation string `msgpack:"correlation,omitempty" json:"correlation,omitempty"`
	// AfterSeq is read-your-writes: the cluster member answering (package
	// cluster; every engine serve runs is one) waits until its projection
	// has applied this stream sequence (the highest Seq a reply told the
	// client) before it decides or answers, so that what the client was
	// told exists is seen by any member. 0: no wait. A sequence beyond the
	// stream's last is refused (invalid, field after_seq). Not part of the
	// command's digest: a retry may carry another.
	AfterSeq uint64 `msgpack:"after_seq,omitempty" json:"after_seq,omitempty"`
}

// Command is implemented by every command type.
type Command interface {
	// Kind is the command's name and subject token.
	Kind() string
	// Header returns the command's Meta for reading and filling in.
	Header() *Meta
	// Validate checks the command on its own (no state); it returns an
	// *Error naming the field.
	Validate() error
}

// The command kinds.
const (
	KindRegisterSnapshot    = "register_snapshot"
	KindBuildPlan           = "build_plan"
	KindCompleteIntervals   = "complete_intervals"
	KindInvalidateIntervals = "invalidate_intervals"
	KindAdvanceScheduler    = "advance_scheduler"
	KindPromote             = "promote"
	KindFinalize            = "finalize"
	KindOpenRepairs         = "open_repairs"
	KindFailRun             = "fail_run"
	KindStatus              = "status"
	KindCompleteWork        = "complete_work"
	KindFailWork            = "fail_work"
	KindRetireTables        = "retire_tables"
	KindCheckWork           = "check_work"
	KindCancelPlan          = "cancel_plan"
	KindRollback            = "rollback"
	KindRestate             = "restate"
	KindRegisterSnapshots   = "register_snapshots"
)

// Kinds lists every command kind.
var Kinds = []string{KindRegisterSnapshot, KindBuildPlan, KindCompleteIntervals, KindInvalidateIntervals, KindAdvanceScheduler, KindPromote, KindFinalize, KindOpenRepairs, KindFailRun, KindStatus, KindCompleteWork, KindFailWork, KindRetireTables, KindCheckWork, KindCancelPlan, KindRollback, KindRestate, KindRegisterSnapshots}

// New returns an empty command of the given kind.
func New(kind string) (Command, error) {
	switch kind {
	case KindRegisterSnapshot:
		return &RegisterSnapshot{}, nil
	case KindBuildPlan:
		return &BuildPlan{}, nil
	case KindCompleteIntervals:
		return &CompleteIntervals{}, nil
	case KindInvalidateIntervals:
		return &InvalidateIntervals{}, nil
	case KindAdvanceScheduler:
		return &AdvanceScheduler{}, nil
	case KindPromote:
		return &Promote{}, nil
	case KindFinalize:
		return &Finalize{}, nil
	case KindOpenRepairs:
		return &OpenRepairs{}, nil
	case KindFailRun:
		return &FailRun{}, nil
	case KindStatus:
		return &Status{}, nil
	case KindCompleteWork:
		return &CompleteWork{}, nil
	case KindFailWork:
		return &FailWork{}, nil
	case KindRetireTables:
		return &RetireTables{}, nil
	case KindCheckWork:
		return &CheckWork{}, nil
	case KindCancelPlan:
		return &CancelPlan{}, nil
	case KindRollback:
		return &Rollback{}, nil
	case KindRestate:
		return &Restate{}, nil
	case KindRegisterSnapshots:
		return &RegisterSnapshots{}, nil
	}
	return nil, Errorf(CodeInvalid, "kind", "unknown command kind %q", kind)
}

// RegisterSnapshot registers a model version. Version is a user's version
// name: '+' is reserved for derived versions (<version>+<plan>, which the
// engine registers itself). Start must be aligned to the unit (IntervalUnit,
// or the unit derived from Cron).
type RegisterSnapshot struct {
	Meta          `msgpack:",inline"`
	Model         string        `msgpack:"model" json:"model"`
	Version       string        `msgpack:"version" json:"version"`
	Cron          string        `msgpack:"cron" json:"cron"`
	IntervalUnit  interval.Unit `msgpack:"interval_unit,omitempty" json:"interval_unit,omitempty"`
	Start         time.Time     `msgpack:"start" json:"start"`
	Lookback      int           `msgpack:"lookback,omitempty" json:"lookback,omitempty"`
	SnapshotKind  events.Kind   `msgpack:"kind,omitempty" json:"kind,omitempty"`
	AllowPartials bool          `msgpack:"allow_partials,omitempty" json:"allow_partials,omitempty"`
	DependsOn     []string      `msgpack:"depends_on,omitempty" json:"depends_on,omitempty"`
	// SQL and TimeColumn are the version's query and the column of its rows
	// in an interval (models.Definition): both or neither.
	SQL        string `msgpack:"sql,omitempty" json:"sql,omitempty"`
	TimeColumn string `msgpack:"time_column,omitempty" json:"time_column,omitempty"`
	// BatchSize and BatchConcurrency are the version's batching
	// (models.Definition): omitted, 0, not set.
	BatchSize        int `msgpack:"batch_size,omitempty" json:"batch_size,omitempty"`
	BatchConcurrency int `msgpack:"batch_concurrency,omitempty" json:"batch_concurrency,omitempty"`
	// Audits are the version's audits (models.Definition), at most
	// models.MaxAudits; omitted: none.
	Audits []models.Audit `msgpack:"audits,omitempty" json:"audits,omitempty"`
	// Grain is the version's key columns (models.Definition); omitted:
	// none.
	Grain []string `msgpack:"grain,omitempty" json:"grain,omitempty"`
	// Seed is a seed version's CSV content and Macros its SQL's macro
	// vocabulary (models.Definition); omitted: none, tidemark's.
	Seed   string `msgpack:"seed,omitempty" json:"seed,omitempty"`
	Macros string `msgpack:"macros,omitempty" json:"macros,omitempty"`
	// Freshness is the version's lateness bound (models.Definition):
	// omitted, one interval of its unit.
	Freshness string `msgpack:"freshness,omitempty" json:"freshness,omitempty"`
}

// Bounds is a promotion policy as a plan is built with it (DESIGN.md's
// policies): both 0 is strict; MaxTrailingGapAdvances > 0 admits a
// trailing gap made by at most that many scheduler advances, tracked as
// repair debt; MaxCatchUpAdvances > 0 backfills a suffix of at most that
// many advances before one strict retry. The one place the two bounds
// are carried from a client (the CLI's flags, a scenario's plan step, a
// build_plan) to the decision (events.Policy, with the rules' version).
type Bounds struct {
	MaxTrailingGapAdvances int `msgpack:"max_trailing_gap_advances,omitempty" json:"max_trailing_gap_advances,omitempty"`
	MaxCatchUpAdvances     int `msgpack:"max_catch_up_advances,omitempty" json:"max_catch_up_advances,omitempty"`
}

// Validate checks the bounds: each >= 0, naming the field.
func (b Bounds) Validate() error {
	if b.MaxTrailingGapAdvances < 0 {
		return Errorf(CodeInvalid, "max_trailing_gap_advances", "must be >= 0")
	}
	if b.MaxCatchUpAdvances < 0 {
		return Errorf(CodeInvalid, "max_catch_up_advances", "must be >= 0")
	}
	return nil
}

// Policy is the recorded policy of these bounds under the rules' version.
func (b Bounds) Policy(version int) events.Policy {
	return events.Policy{Version: version, MaxTrailingGapAdvances: b.MaxTrailingGapAdvances, MaxCatchUpAdvances: b.MaxCatchUpAdvances}
}

// BuildPlan builds a plan at the command's clock.
type BuildPlan struct {
	Meta `msgpack:",inline"`
	Plan string `msgpack:"plan" json:"plan"`
	Env  string `msgpack:"env" json:"env"`
	// Versions maps model to the version the plan sets (a registered
	// version, derived ones included); at least one. A plan whose versions
	// all equal the incumbents is valid.
	Versions map[string]string `msgpack:"versions" json:"versions"`
	// Bounds is the promotion policy the plan is built with (its keys
	// inline: max_trailing_gap_advances, max_catch_up_advances).
	Bounds `msgpack:",inline"`
	// Changed, with Versions empty, sets every changed model: each model
	// whose latest version registered by a user (no '+') is not the
	// version the env serves (nor the base of the derived one it serves),
	// models the env does not serve yet included. Nothing changed: the
	// reply says so and nothing is appended.
	Changed bool `msgpack:"changed,omitempty" json:"changed,omitempty"`
}

// CompleteIntervals records computed intervals of a snapshot.
type CompleteIntervals struct {
	Meta    `msgpack:",inline"`
	Model   string           `msgpack:"model" json:"model"`
	Version string           `msgpack:"version" json:"version"`
	Ranges  []interval.Range `msgpack:"ranges" json:"ranges"`
	RunKind events.RunKind   `msgpack:"run_kind,omitempty" json:"run_kind,omitempty"`
	RunID   string           `msgpack:"run_id,omitempty" json:"run_id,omitempty"`
	// Work names the work item computed (work-<seq>-<run kind>). When set,
	// the engine refuses the report unless that item exists and has a step
	// for the snapshot containing every range; RunKind, when set, must be
	// the item's (empty: the item's).
	Work string `msgpack:"work,omitempty" json:"work,omitempty"`
	// Rows is how many rows computing the ranges wrote (0 when unknown):
	// recorded in the event for progress, checked only to be >= 0.
	Rows int64 `msgpack:"rows,omitempty" json:"rows,omitempty"`
	// Audits are the outcomes of the snapshot's audits over the ranges
	// (issue 30): each names an audit the snapshot declares, once. Left
	// out of the command's digest like Rows: a batch computed again may
	// audit otherwise and is the same completion.
	Audits []events.AuditOutcome `msgpack:"audits,omitempty" json:"audits,omitempty"`
}

// CompleteWork is complete_intervals as a worker sends it: Work is
// required, so the report is checked against the item. docs/auth.conf
// lets the worker role send complete_work and fail_work, never
// complete_intervals or fail_run: a worker records only the work the
// engine gave out.
type CompleteWork struct {
	CompleteIntervals `msgpack:",inline"`
}

// FailWork is fail_run as a worker sends it: Work is required and checked.
type FailWork struct {
	FailRun `msgpack:",inline"`
}

// CheckWork asks, before a worker computes a step, whether complete_work
// with the same fields would be recorded now. It appends nothing: it is
// accepted, or refused as that complete_work would be (stale plan work,
// whose plan the environment has moved past, is invalid on run_id: the
// step's table is production's now; a retired table; a snapshot or range
// the item does not ask for). A worker asks first so that a step it may
// no longer compute is given up unwritten. Decided on the writer, like a
// command; its id is not recorded.
type CheckWork struct {
	CompleteWork `msgpack:",inline"`
}

// InvalidateIntervals removes intervals from a snapshot's coverage.
type InvalidateIntervals struct {
	Meta    `msgpack:",inline"`
	Model   string           `msgpack:"model" json:"model"`
	Version string           `msgpack:"version" json:"version"`
	Ranges  []interval.Range `msgpack:"ranges" json:"ranges"`
	Reason  string           `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// AdvanceScheduler runs one scheduler tick for an environment at the
// command's clock: every missing ready interval of its incumbents is
// scheduled.
//
// Generation is the environment generation the scheduler read its
// incumbents at (required, >= 1). An advance for an older generation is
// rejected with stale_generation and appends nothing: promotion fences the
// demoted snapshot's scheduler.
type AdvanceScheduler struct {
	Meta       `msgpack:",inline"`
	Env        string `msgpack:"env" json:"env"`
	Generation uint64 `msgpack:"generation" json:"generation"`
}

// Promote evaluates a plan's promotion and records the decision.
type Promote struct {
	Meta `msgpack:",inline"`
	Plan string `msgpack:"plan" json:"plan"`
}

// Finalize finalizes the environment of a promoted plan.
type Finalize struct {
	Meta `msgpack:",inline"`
	Plan string `msgpack:"plan" json:"plan"`
}

// OpenRepairs asks for the repair debt still owed: one record per candidate
// promoted with a trailing gap the scheduler has not filled yet. It is a
// query: it appends nothing and its id may be empty.
type OpenRepairs struct {
	Meta `msgpack:",inline"`
	// Env limits the answer to one environment (all when empty).
	Env string `msgpack:"env,omitempty" json:"env,omitempty"`
}

// FailRun records that a worker's run failed (a RunFailed event); the
// ranges stay missing.
type FailRun struct {
	Meta       `msgpack:",inline"`
	Model      string           `msgpack:"model" json:"model"`
	Version    string           `msgpack:"version" json:"version"`
	Ranges     []interval.Range `msgpack:"ranges" json:"ranges"`
	RunKind    events.RunKind   `msgpack:"run_kind" json:"run_kind"`
	RunID      string           `msgpack:"run_id,omitempty" json:"run_id,omitempty"`
	Worker     string           `msgpack:"worker,omitempty" json:"worker,omitempty"`
	ExitStatus int              `msgpack:"exit_status" json:"exit_status"`
	Error      string           `msgpack:"error" json:"error"`
	StderrTail string           `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	Attempt    int              `msgpack:"attempt" json:"attempt"`
	Final      bool             `msgpack:"final,omitempty" json:"final,omitempty"`
	// Work names the work item whose step failed (see CompleteIntervals).
	Work string `msgpack:"work,omitempty" json:"work,omitempty"`
}

// Status asks for every environment's incumbents, frontiers and open
// repair debt. A query.
type Status struct {
	Meta `msgpack:",inline"`
	// Env limits the answer to one environment (all when empty).
	Env string `msgpack:"env,omitempty" json:"env,omitempty"`
}

// ReadOnly implements Query.
func (*Status) ReadOnly() {}

// Query is implemented by commands that only read.
type Query interface {
	Command
	// ReadOnly marks the command as a query.
	ReadOnly()
}

// ReadOnly implements Query.
func (*OpenRepairs) ReadOnly() {}

// Kind implements Command.
func (*RegisterSnapshot) Kind() string    { return KindRegisterSnapshot }
func (*BuildPlan) Kind() string           { return KindBuildPlan }
func (*CompleteIntervals) Kind() string   { return KindCompleteIntervals }
func (*InvalidateIntervals) Kind() string { return KindInvalidateIntervals }
func (*AdvanceScheduler) Kind() string    { return KindAdvanceScheduler }
func (*Promote) Kind() string             { return KindPromote }
func (*Finalize) Kind() string            { return KindFinalize }
func (*OpenRepairs) Kind() string         { return KindOpenRepairs }
func (*FailRun) Kind() string             { return KindFailRun }
func (*Status) Kind() string              { return KindStatus }
func (*CompleteWork) Kind() string        { return KindCompleteWork }
func (*CheckWork) Kind() string           { return KindCheckWork }
func (*FailWork) Kind() string            { return KindFailWork }
func (*RetireTables) Kind() string        { return KindRetireTables }

// Header implements Command.
func (c *RegisterSnapshot) Header() *Meta    { return &c.Meta }
func (c *BuildPlan) Header() *Meta           { return &c.Meta }
func (c *CompleteIntervals) Header() *Meta   { return &c.Meta }
func (c *InvalidateIntervals) Header() *Meta { return &c.Meta }
func (c *AdvanceScheduler) Header() *Meta    { return &c.Meta }
func (c *Promote) Header() *Meta             { return &c.Meta }
func (c *Finalize) Header() *Meta            { return &c.Meta }
func (c *OpenRepairs) Header() *Meta         { return &c.Meta }
func (c *FailRun) Header() *Meta             { return &c.Meta }
func (c *Status) Header() *Meta              { return &c.Meta }
func (c *RetireTables) Header() *Meta        { return &c.Meta }

// Limits on input.
const (
	// MaxBodyBytes is the largest command body accepted.
	MaxBodyBytes = 1 << 20
	// MaxRanges is the most ranges one completion or invalidation may carry.
	MaxRanges = 10_000
	// MaxPlanModels is the most versions one plan may set.
	MaxPlanModels = 1_000
	// MaxIDLen bounds command ids (they become Nats-Msg-Id headers).
	MaxIDLen = 128
)

func (m *Meta) validate() error {
	if err := validateID(m.ID); err != nil {
		return err
	}
	return m.validateAt()
}

// validateAt bounds the command's clock, when it carries one.
func (m *Meta) validateAt() error {
	if m.At.IsZero() {
		return nil
	}
	return inRange("at", m.At)
}

// inRange refuses a time outside [events.MinTime, events.MaxTime].
func inRange(field string, t time.Time) error {
	if !events.InRange(t) {
		return Errorf(CodeInvalid, field, "%s %s is outside the supported range %s .. %s", field, t.UTC().Format(time.RFC3339),
			events.MinTime.Format(time.RFC3339), events.MaxTime.Format(time.RFC3339))
	}
	return nil
}

func name(field, v string) error {
	if v == "" {
		return Errorf(CodeInvalid, field, "%s is required", field)
	}
	if !events.ValidName(v) {
		return Errorf(CodeInvalid, field, "%s %q: use letters, digits, '_' and '-' (at most 128)", field, v)
	}
	return nil
}

// modelName validates a model a command names: a name, or a
// schema-qualified one (events.ValidModelName).
func modelName(field, v string) error {
	if v == "" {
		return Errorf(CodeInvalid, field, "%s is required", field)
	}
	if !events.ValidModelName(v) {
		return Errorf(CodeInvalid, field, "%s %q: use letters, digits, '_' and '-' (at most 128), or schema.model", field, v)
	}
	return nil
}

// warehouseName validates a name being defined that becomes a warehouse
// identifier (an environment's schema): models.CheckWarehouseName.
func warehouseName(field, v string) error {
	if fe := models.CheckWarehouseName(field, v); fe != nil {
		return Errorf(CodeInvalid, field, "%s", fe.Msg)
	}
	return nil
}

// version validates a reference to a version: a user's version or a
// derived one (<base>+<plan>).
func version(field, v string) error {
	if v == "" {
		return Errorf(CodeInvalid, field, "%s is required", field)
	}
	if !events.ValidVersion(v) {
		return Errorf(CodeInvalid, field, "%s %q: use letters, digits, '_' and '-' (at most 128), or a derived version <version>+<plan>", field, v)
	}
	return nil
}

// snapshotRef validates the meta and the model/version pair a command names.
func snapshotRef(m *Meta, model, v string) error {
	if err := m.validate(); err != nil {
		return err
	}
	if err := modelName("model", model); err != nil {
		return err
	}
	return version("version", v)
}

// Definition is the version the registration defines.
func (c *RegisterSnapshot) Definition() models.Definition {
	return models.Definition{Model: c.Model, Version: c.Version, Cron: c.Cron, Unit: c.IntervalUnit, Start: c.Start,
		Lookback: c.Lookback, Kind: c.SnapshotKind, AllowPartials: c.AllowPartials, DependsOn: c.DependsOn,
		SQL: c.SQL, TimeColumn: c.TimeColumn, BatchSize: c.BatchSize, BatchConcurrency: c.BatchConcurrency, Audits: c.Audits, Grain: c.Grain,
		Seed: c.Seed, Macros: c.Macros, Freshness: c.Freshness}
}

// Validate implements Command: the meta, then the definition
// (models.Definition.Validate), which must name its version.
func (c *RegisterSnapshot) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if err := c.Definition().Validate(); err != nil {
		fe := err.(*models.FieldError)
		return Errorf(CodeInvalid, fe.Field, "%s", fe.Msg)
	}
	if c.Version == "" {
		return Errorf(CodeInvalid, "version", "version is required")
	}
	return nil
}

// Validate implements Command.
func (c *BuildPlan) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if err := name("plan", c.Plan); err != nil {
		return err
	}
	if err := warehouseName("env", c.Env); err != nil {
		return err
	}
	if c.Changed && len(c.Versions) > 0 {
		return Errorf(CodeInvalid, "changed", "sets every changed model: leave versions empty (or set versions without changed)")
	}
	if len(c.Versions) == 0 && !c.Changed {
		return Errorf(CodeInvalid, "versions", "a plan must set at least one version (or changed: every model whose latest registered version the env does not serve)")
	}
	if len(c.Versions) > MaxPlanModels {
		return Errorf(CodeLimit, "versions", "a plan may set at most %d models, got %d", MaxPlanModels, len(c.Versions))
	}
	for m, v := range c.Versions {
		if err := modelName("versions", m); err != nil {
			return err
		}
		if fe := models.CheckViewSchema("versions", c.Env, m); fe != nil {
			return Errorf(CodeInvalid, "versions."+m, "%s", fe.Msg)
		}
		if err := version("versions."+m, v); err != nil {
			return err
		}
	}
	if err := c.Bounds.Validate(); err != nil {
		return err
	}
	return nil
}

func validateRanges(rs []interval.Range) error {
	if len(rs) == 0 {
		return Errorf(CodeInvalid, "ranges", "at least one range is required")
	}
	if len(rs) > MaxRanges {
		return Errorf(CodeLimit, "ranges", "at most %d ranges per command, got %d", MaxRanges, len(rs))
	}
	for i, r := range rs {
		if r.Start.IsZero() || r.End.IsZero() {
			return Errorf(CodeInvalid, fmt.Sprintf("ranges[%d]", i), "range needs a start and an end")
		}
		if !events.InRange(r.Start) || !events.InRange(r.End) {
			return Errorf(CodeInvalid, fmt.Sprintf("ranges[%d]", i), "range %s is outside the supported range %s .. %s", r,
				events.MinTime.Format(time.RFC3339), events.MaxTime.Format(time.RFC3339))
		}
		if !r.Start.Before(r.End) {
			return Errorf(CodeInvalid, fmt.Sprintf("ranges[%d]", i), "range %s: end is not after start", r)
		}
	}
	return nil
}

// Validate implements Command.
func (c *CompleteIntervals) Validate() error {
	if err := snapshotRef(&c.Meta, c.Model, c.Version); err != nil {
		return err
	}
	if c.RunKind != "" && !c.RunKind.Valid() {
		return Errorf(CodeInvalid, "run_kind", "run_kind %q: want backfill, scheduled, catch_up, repair, restate or manual", c.RunKind)
	}
	if err := checkWork(c.Work, c.RunKind); err != nil {
		return err
	}
	if c.Rows < 0 {
		return Errorf(CodeInvalid, "rows", "rows %d: want the number of rows written, >= 0", c.Rows)
	}
	if err := validateRanges(c.Ranges); err != nil {
		return err
	}
	return validateOutcomes(c.Audits)
}

// validateOutcomes checks a completion's audit outcomes on their own:
// bounded, each naming an audit once, counts >= 0. Whether the snapshot
// declares each audit is the decision's to say (it reads the snapshot).
func validateOutcomes(os []events.AuditOutcome) error {
	if len(os) > events.MaxAudits {
		return Errorf(CodeLimit, "audits", "at most %d audit outcomes per completion, got %d", events.MaxAudits, len(os))
	}
	seen := make(map[string]int, len(os))
	for i, o := range os {
		f := fmt.Sprintf("audits[%d]", i)
		if o.Audit == "" {
			return Errorf(CodeInvalid, f+".audit", "%s.audit is required: the name of the audit the outcome is of", f)
		}
		if len(o.Audit) > 128 {
			return Errorf(CodeInvalid, f+".audit", "%s.audit is %d bytes: at most 128", f, len(o.Audit))
		}
		if j, dup := seen[o.Audit]; dup {
			return Errorf(CodeInvalid, f+".audit", "%s.audit %q: audits[%d] reports it already (one outcome per audit)", f, o.Audit, j)
		}
		seen[o.Audit] = i
		if o.Count < 0 {
			return Errorf(CodeInvalid, f+".count", "%s.count %d: want the number of rows, >= 0", f, o.Count)
		}
		if len(o.Error) > events.MaxAuditError {
			return Errorf(CodeLimit, f+".error", "%s.error is %d bytes: at most %d", f, len(o.Error), events.MaxAuditError)
		}
		if len(o.Columns) > events.MaxAuditColumns {
			return Errorf(CodeLimit, f+".columns", "%s.columns: %d columns, at most %d", f, len(o.Columns), events.MaxAuditColumns)
		}
		for j, c := range o.Columns {
			if len(c) > events.MaxAuditValue {
				return Errorf(CodeLimit, fmt.Sprintf("%s.columns[%d]", f, j), "%s.columns[%d] is %d bytes: at most %d", f, j, len(c), events.MaxAuditValue)
			}
		}
		if len(o.Sample) > events.MaxAuditSampleRows {
			return Errorf(CodeLimit, f+".sample", "%s.sample: %d rows, at most %d", f, len(o.Sample), events.MaxAuditSampleRows)
		}
		for j, row := range o.Sample {
			rf := fmt.Sprintf("%s.sample[%d]", f, j)
			if len(row) != len(o.Columns) {
				return Errorf(CodeInvalid, rf, "%s has %d values for %d columns", rf, len(row), len(o.Columns))
			}
			for k, v := range row {
				if len(v) > events.MaxAuditValue {
					return Errorf(CodeLimit, fmt.Sprintf("%s[%d]", rf, k), "%s[%d] is %d bytes: at most %d (cut sampled values)", rf, k, len(v), events.MaxAuditValue)
				}
			}
		}
	}
	return nil
}

// checkWork validates a report's work item id against its run kind.
func checkWork(work string, kind events.RunKind) error {
	if work == "" {
		return nil
	}
	_, wk, ok := events.ParseWorkID(work)
	if !ok {
		return Errorf(CodeInvalid, "work", "work %q: want a work item id, work-<event seq>-<run kind>", work)
	}
	if kind != "" && kind != wk {
		return Errorf(CodeInvalid, "run_kind", "run_kind %q: work item %s is %s work", kind, work, wk)
	}
	return nil
}

// needWork is the rejection of a worker's report without a work item.
func needWork(kind string) error {
	return Errorf(CodeInvalid, "work", "work is required: a worker's %s names the work item it computed (work-<event seq>-<run kind>)", kind)
}

// Validate implements Command.
func (c *CompleteWork) Validate() error { return c.validateAs(KindCompleteWork) }

// Validate implements Command.
func (c *CheckWork) Validate() error { return c.validateAs(KindCheckWork) }

// validateAs checks a worker's report (or question) of kind: a
// completion that names its work item.
func (c *CompleteWork) validateAs(kind string) error {
	if err := c.CompleteIntervals.Validate(); err != nil {
		return err
	}
	if c.Work == "" {
		return needWork(kind)
	}
	return nil
}

// Validate implements Command.
func (c *FailWork) Validate() error {
	if err := c.FailRun.Validate(); err != nil {
		return err
	}
	if c.Work == "" {
		return needWork(KindFailWork)
	}
	return nil
}

// Validate implements Command.
func (c *InvalidateIntervals) Validate() error {
	if err := snapshotRef(&c.Meta, c.Model, c.Version); err != nil {
		return err
	}
	return validateRanges(c.Ranges)
}

// Validate implements Command.
func (c *AdvanceScheduler) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	if err := name("env", c.Env); err != nil {
		return err
	}
	if c.Generation == 0 {
		return Errorf(CodeInvalid, "generation", "generation is required: the environment generation the scheduler read (>= 1)")
	}
	return nil
}

// Validate implements Command.
func (c *Promote) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	return name("plan", c.Plan)
}

// Validate implements Command.
func (c *Finalize) Validate() error {
	if err := c.Meta.validate(); err != nil {
		return err
	}
	return name("plan", c.Plan)
}

// Validate implements Command.
func (c *OpenRepairs) Validate() error {
	if c.ID != "" {
		if err := validateID(c.ID); err != nil {
			return err
		}
	}
	if err := c.validateAt(); err != nil {
		return err
	}
	if c.Env != "" {
		return name("env", c.Env)
	}
	return nil
}

// Validate implements Command.
func (c *Status) Validate() error { return (&OpenRepairs{Meta: c.Meta, Env: c.Env}).Validate() }

// MaxStderrTail bounds the stderr a failure report carries.
const MaxStderrTail = 4096

// Validate implements Command.
func (c *FailRun) Validate() error {
	if err := snapshotRef(&c.Meta, c.Model, c.Version); err != nil {
		return err
	}
	if !c.RunKind.Valid() {
		return Errorf(CodeInvalid, "run_kind", "run_kind %q: want backfill, scheduled, catch_up, repair, restate or manual", c.RunKind)
	}
	if err := checkWork(c.Work, c.RunKind); err != nil {
		return err
	}
	if c.Error == "" {
		return Errorf(CodeInvalid, "error", "error is required: say what failed")
	}
	if len(c.StderrTail) > MaxStderrTail {
		return Errorf(CodeLimit, "stderr_tail", "at most %d bytes of stderr, got %d", MaxStderrTail, len(c.StderrTail))
	}
	if c.Attempt < 1 {
		return Errorf(CodeInvalid, "attempt", "attempt counts deliveries from 1")
	}
	return validateRanges(c.Ranges)
}

// SubjectPrefix starts every command subject: tidemark.cmd.<kind>.
const SubjectPrefix = "tidemark.cmd"

// Subject is the request subject of a command kind.
func Subject(kind string) string { return SubjectPrefix + "." + kind }

// Handler carries out validated commands. The engine implements it; so
// does transport.Client, over NATS.
type Handler interface {
	Handle(ctx context.Context, cmd Command) Reply
}

// NewID returns a fresh command id (a ULID).
func NewID() string { return ulid.MustNew(ulid.Now(), rand.Reader).String() }
