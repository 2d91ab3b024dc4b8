package events

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/tidemark/tidemark/events/interval"
)

// SchemaVersion is the envelope and payload schema this build writes and the
// newest it reads.
const SchemaVersion = 1

// Type names an event type on the wire.
type Type string

// The event types.
const (
	TypeSnapshotRegistered    Type = "SnapshotRegistered"
	TypePlanBuilt             Type = "PlanBuilt"
	TypeIntervalsCompleted    Type = "IntervalsCompleted"
	TypeIntervalsInvalidated  Type = "IntervalsInvalidated"
	TypeSchedulerAdvanced     Type = "SchedulerAdvanced"
	TypePromotionDecided      Type = "PromotionDecided"
	TypeEnvironmentFinalized  Type = "EnvironmentFinalized"
	TypeCatchUpRequested      Type = "CatchUpRequested"
	TypeRepairCompleted       Type = "RepairCompleted"
	TypeRunFailed             Type = "RunFailed"
	TypeTableRetired          Type = "TableRetired"
	TypePlanCancelled         Type = "PlanCancelled"
	TypeEnvironmentRolledBack Type = "EnvironmentRolledBack"
	TypeRestatementRequested  Type = "RestatementRequested"
)

// Envelope is the metadata every event carries.
type Envelope struct {
	// ID is a ULID, monotonic within the writing process.
	ID string `msgpack:"id" json:"id"`
	// Type selects the payload type.
	Type Type `msgpack:"type" json:"type"`
	// Schema is the schema version the event was written with.
	Schema int `msgpack:"schema" json:"schema"`
	// OccurredAt is when the fact happened, on the engine's clock (simulated
	// in scenarios). Never the time of a replay.
	OccurredAt time.Time `msgpack:"at" json:"at"`
	// Causation is the id of the command that caused the event.
	Causation string `msgpack:"causation,omitempty" json:"causation,omitempty"`
	// Correlation groups the events of one workflow (a plan id, a run id).
	Correlation string `msgpack:"correlation,omitempty" json:"correlation,omitempty"`
	// Actor is who issued the command ("scheduler", "worker:<id>", a user).
	Actor string `msgpack:"actor,omitempty" json:"actor,omitempty"`
	// Digest is the causing command's digest (commands.Digest: what it
	// asked, whatever its id): a command id found again with another
	// digest is another command, refused as an idempotency conflict.
	// Empty on events written before digests.
	Digest string `msgpack:"digest,omitempty" json:"digest,omitempty"`
}

// Event is an envelope with its decoded payload.
type Event struct {
	Envelope
	Payload Payload
}

// Payload is implemented by every event payload type.
type Payload interface {
	// EventType is the payload's Type.
	EventType() Type
	// Subject is the aggregate subject the event is stored under.
	Subject() string
}

// Subject prefixes.
const (
	// StreamName is the one JetStream stream that holds every event.
	StreamName = "TIDEMARK"
	// SubjectPrefix starts every event subject.
	SubjectPrefix = "tidemark.evt."
	// SubjectAll matches every event subject.
	SubjectAll = "tidemark.evt.>"
)

// SnapshotSubject is the aggregate subject of a snapshot:
// tidemark.evt.snap.<model>.<version>, the model's name one subject token
// (SubjectToken: a schema-qualified model's dot becomes ':').
func SnapshotSubject(model, version string) string {
	return SubjectPrefix + "snap." + SubjectToken(model) + "." + version
}

// SubjectToken is a model's name as one subject token: a schema-qualified
// name's '.' (which would split the token) becomes ':', which no name
// contains, so "sushi.orders" (token sushi:orders) never meets model
// "sushi" with another token after it. Other names are unchanged.
func SubjectToken(model string) string { return strings.ReplaceAll(model, ".", ":") }

// PlanSubject is the aggregate subject of a plan.
func PlanSubject(plan string) string { return SubjectPrefix + "plan." + plan }

// EnvSubject is the aggregate subject of an environment.
func EnvSubject(env string) string { return SubjectPrefix + "env." + env }

// SnapshotID is the identity of a model version: "model@version".
func SnapshotID(model, version string) string { return model + "@" + version }

// ValidName reports whether s can name a model, plan or environment: letters,
// digits, '_' and '-', at most 128 characters, not starting with '-' (it
// becomes a subject token): `^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`, checked
// byte by byte (the regexp cost every command 2 µs; TestValidName compares
// both).
//
// A model's name may also be schema-qualified (ValidModelName).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidModelName reports whether s can name a model: a name (ValidName),
// or a schema-qualified one, "<schema>.<model>", with exactly one '.'
// between two names (SQLMesh's schema.model). Versions, plans and
// environments take no dot.
func ValidModelName(s string) bool {
	schema, model, qualified := strings.Cut(s, ".")
	if !qualified {
		return ValidName(s)
	}
	return ValidName(schema) && ValidName(model)
}

// ValidUserVersion reports whether a user may define a version named s: a
// plain name, as ValidName. '+' is reserved for derived versions.
func ValidUserVersion(s string) bool { return ValidName(s) }

// ValidVersion reports whether s can name a stored or referenced version:
// a plain name (ValidUserVersion), or a derived version "<base>+<plan>"
// with exactly one '+' between two plain names (at most 257 characters).
func ValidVersion(s string) bool {
	base, plan, derived := strings.Cut(s, "+")
	if !derived {
		return ValidName(s)
	}
	return ValidName(base) && ValidName(plan)
}

// Kind is how a snapshot's table relates to its incumbent's.
type Kind string

// The snapshot kinds.
const (
	// Incremental versions get a new table and must be backfilled.
	Incremental Kind = "incremental"
	// ForwardOnly versions reuse the incumbent's table and its coverage.
	ForwardOnly Kind = "forward_only"
	// Full versions own a table recomputed whole at each cron tick
	// (SQLMesh's FULL): their work always spans from their start, so
	// their coverage is "computed as of tick T" (docs/kinds.md).
	Full Kind = "full"
	// View versions are a view over their upstream snapshots (SQLMesh's
	// VIEW): their work creates the view, writing no rows.
	View Kind = "view"
	// Seed versions own a table loaded from a CSV file's content
	// (SQLMesh's SEED), which their definition carries.
	Seed Kind = "seed"
)

// Whole reports whether a version of kind k is computed whole rather than
// interval by interval (full, view, seed): its work spans from its start
// to the end of what is ready, in one batch, and replaces what its table
// (or view) held.
func (k Kind) Whole() bool { return k == Full || k == View || k == Seed }

// RunKind says why intervals were computed.
type RunKind string

// The run kinds.
const (
	RunBackfill  RunKind = "backfill"
	RunScheduled RunKind = "scheduled"
	RunCatchUp   RunKind = "catch_up"
	// RunRepair computes the gap an acceptance left (repair debt), issued
	// with the decision.
	RunRepair RunKind = "repair"
	// RunRestate recomputes what a restatement invalidated (restate): a
	// model's ranges and its downstream models' overlapping intervals,
	// issued with the request.
	RunRestate RunKind = "restate"
	RunManual  RunKind = "manual"
)

// RunKinds are the defined run kinds.
var RunKinds = []RunKind{RunBackfill, RunScheduled, RunCatchUp, RunRepair, RunRestate, RunManual}

// PlanRunID is the run id of a plan's work of kind k (backfill, catch_up,
// repair): "<kind>:<plan>".
func PlanRunID(k RunKind, plan string) string { return string(k) + ":" + plan }

// RestateRunID is the run id of a restatement's work: "restate:<command
// id>" (the restate command that requested it).
func RestateRunID(command string) string { return string(RunRestate) + ":" + command }

// PlanOfRunID is the plan a backfill or catch-up run id names (PlanRunID)
// and that run's kind; ok is false for any other id.
func PlanOfRunID(id string) (k RunKind, plan string, ok bool) {
	for _, k := range []RunKind{RunBackfill, RunCatchUp} {
		if plan, ok := strings.CutPrefix(id, string(k)+":"); ok {
			return k, plan, true
		}
	}
	return "", "", false
}

// Valid reports whether k is a defined run kind.
func (k RunKind) Valid() bool { return slices.Contains(RunKinds, k) }

// SnapshotRegistered records a model version's definition.
type SnapshotRegistered struct {
	Snapshot    string        `msgpack:"snapshot" json:"snapshot"`
	Model       string        `msgpack:"model" json:"model"`
	Version     string        `msgpack:"version" json:"version"`
	Fingerprint string        `msgpack:"fingerprint" json:"fingerprint"`
	Cron        string        `msgpack:"cron" json:"cron"`
	Unit        interval.Unit `msgpack:"unit" json:"unit"`
	Start       time.Time     `msgpack:"start" json:"start"`
	Lookback    int           `msgpack:"lookback" json:"lookback"`
	Kind        Kind          `msgpack:"kind" json:"kind"`
	// AllowPartials lets the last interval be partial.
	AllowPartials bool `msgpack:"allow_partials" json:"allow_partials"`
	// DependsOn names the upstream models.
	DependsOn []string `msgpack:"depends_on" json:"depends_on"`
	// Upstream lists upstream snapshot ids when they were fixed at
	// registration (derived versions); a plan resolves the rest.
	Upstream []string `msgpack:"upstream,omitempty" json:"upstream,omitempty"`
	// Table is the physical table the snapshot writes; coverage belongs to a
	// table. A forward-only version shares its incumbent's table.
	Table string `msgpack:"table" json:"table"`
	// SQL is the version's query (a SELECT over its upstream models, using
	// the macros @start_ts and @end_ts for the interval) and TimeColumn the
	// column of its rows in the interval; both empty for a version without
	// SQL (omitted, so such events encode as before SQL existed).
	SQL        string `msgpack:"sql,omitempty" json:"sql,omitempty"`
	TimeColumn string `msgpack:"time_column,omitempty" json:"time_column,omitempty"`
	// BatchSize is how many intervals one batch of the version's
	// computation spans (one statement, one transaction each); 0: the
	// whole range of a step in one batch. BatchConcurrency is how many
	// batches of it a worker computes at once; 0: the warehouse's
	// default. Omitted when 0, so events of versions without them encode
	// as before they existed.
	BatchSize        int `msgpack:"batch_size,omitempty" json:"batch_size,omitempty"`
	BatchConcurrency int `msgpack:"batch_concurrency,omitempty" json:"batch_concurrency,omitempty"`
	// Audits are the checks every computed batch of the version is put
	// to (issue 30); omitted when none, so events of versions without
	// audits encode as before they existed. A derived version keeps its
	// base's.
	Audits []Audit `msgpack:"audits,omitempty" json:"audits,omitempty"`
	// Grain names the columns that identify a row of the version's
	// query (its key), which diff matches changed rows on; omitted when
	// not set, so events of versions without it encode as before.
	Grain []string `msgpack:"grain,omitempty" json:"grain,omitempty"`
	// Seed is a seed version's CSV content (kind seed), loaded into its
	// table; omitted for every other kind.
	Seed string `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// Macros names the macro vocabulary of the version's SQL: omitted,
	// tidemark's (@start_ts and @end_ts, the interval's bounds as
	// TIMESTAMPs); "sqlmesh", SQLMesh's (models.MacrosSQLMesh).
	Macros string `msgpack:"macros,omitempty" json:"macros,omitempty"`
	// Freshness is how far the version's frontier may trail its readiness
	// frontier before it is late: a whole number of intervals ("3") or a
	// duration ("2h") (models.ParseFreshness); omitted, one interval.
	Freshness string `msgpack:"freshness,omitempty" json:"freshness,omitempty"`
}

// Policy is the promotion policy a plan was built with.
type Policy struct {
	// Version of the policy rules; re-evaluation runs this version.
	Version                int `msgpack:"version" json:"version"`
	MaxTrailingGapAdvances int `msgpack:"max_trailing_gap_advances" json:"max_trailing_gap_advances"`
	MaxCatchUpAdvances     int `msgpack:"max_catch_up_advances" json:"max_catch_up_advances"`
}

// Name is "strict", "trailing_gap", "catch_up" or "catch_up+trailing_gap".
func (p Policy) Name() string {
	switch {
	case p.MaxTrailingGapAdvances == 0 && p.MaxCatchUpAdvances == 0:
		return "strict"
	case p.MaxCatchUpAdvances == 0:
		return "trailing_gap"
	case p.MaxTrailingGapAdvances == 0:
		return "catch_up"
	}
	return "catch_up+trailing_gap"
}

// Candidate is one model a plan replaces, with what was captured at build.
type Candidate struct {
	Model string `msgpack:"model" json:"model"`
	// Snapshot is the candidate snapshot id.
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	// Table is the candidate's table.
	Table string `msgpack:"table" json:"table"`
	// Derived is set for a downstream model the plan did not set.
	Derived bool `msgpack:"derived" json:"derived"`
	// Upstream lists the snapshots the candidate reads from in this plan.
	Upstream []string `msgpack:"upstream" json:"upstream"`
	// Incumbent is the snapshot serving the model at build ("" if none).
	Incumbent string `msgpack:"incumbent" json:"incumbent"`
	// IncumbentFrontier is the incumbent's frontier at build (zero if none).
	IncumbentFrontier time.Time `msgpack:"incumbent_frontier" json:"incumbent_frontier"`
	// IncumbentCron and IncumbentUnit are the incumbent's schedule at build.
	IncumbentCron          string        `msgpack:"incumbent_cron" json:"incumbent_cron"`
	IncumbentUnit          interval.Unit `msgpack:"incumbent_unit" json:"incumbent_unit"`
	IncumbentAllowPartials bool          `msgpack:"incumbent_allow_partials" json:"incumbent_allow_partials"`
	// Backfill is the set fixed at build: what the candidate's table missed up
	// to the captured frontier (a whole kind's: the whole object from its
	// start; docs/kinds.md).
	Backfill []interval.Range `msgpack:"backfill" json:"backfill"`
}

// PlanBuilt records a plan and everything its promotion check will compare.
type PlanBuilt struct {
	Plan    string    `msgpack:"plan" json:"plan"`
	Env     string    `msgpack:"env" json:"env"`
	BuiltAt time.Time `msgpack:"built_at" json:"built_at"`
	// Start and End bound the plan's backfill.
	Start time.Time `msgpack:"start" json:"start"`
	End   time.Time `msgpack:"end" json:"end"`
	// Generation is the environment's generation at build.
	Generation uint64      `msgpack:"generation" json:"generation"`
	Policy     Policy      `msgpack:"policy" json:"policy"`
	Candidates []Candidate `msgpack:"candidates" json:"candidates"`
}

// IntervalsCompleted merges ranges into a table's coverage.
type IntervalsCompleted struct {
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	RunKind  RunKind          `msgpack:"run_kind" json:"run_kind"`
	RunID    string           `msgpack:"run_id,omitempty" json:"run_id,omitempty"`
	// Work is the work item the completion reports (work-<seq>-<run
	// kind>), when it names one: a batch of that item is done.
	Work string `msgpack:"work,omitempty" json:"work,omitempty"`
	// Rows is how many rows the computation wrote, as its worker reports
	// it (0: none, or not reported).
	Rows int64 `msgpack:"rows,omitempty" json:"rows,omitempty"`
}

// IntervalsInvalidated removes ranges from a table's coverage.
type IntervalsInvalidated struct {
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	Reason   string           `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// SchedulerAdvanced records that a cron tick made intervals of an env's
// incumbent ready.
type SchedulerAdvanced struct {
	Env      string    `msgpack:"env" json:"env"`
	Model    string    `msgpack:"model" json:"model"`
	Snapshot string    `msgpack:"snapshot" json:"snapshot"`
	Tick     time.Time `msgpack:"tick" json:"tick"`
	// Frontier is the readiness frontier the tick produced.
	Frontier time.Time `msgpack:"frontier" json:"frontier"`
	// Ranges is the work the tick scheduled (missing ready intervals; a
	// whole kind's: the whole object from its start, docs/kinds.md).
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Repairs is the part of Ranges that is open repair debt: a worker
	// computes it first.
	Repairs []interval.Range `msgpack:"repairs,omitempty" json:"repairs,omitempty"`
	// Generation is the env generation the scheduler read.
	Generation uint64 `msgpack:"generation" json:"generation"`
}

// Outcome is a promotion decision's verdict.
type Outcome string

// The outcomes.
const (
	Accepted Outcome = "accepted"
	Rejected Outcome = "rejected"
)

// ModelFinding is what a decision found for one candidate model.
type ModelFinding struct {
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Codes    []string         `msgpack:"codes" json:"codes"`
	Missing  []interval.Range `msgpack:"missing" json:"missing"`
	Advances int              `msgpack:"advances" json:"advances"`
}

// Finding is one structured explanation of a decision: what was found for
// which model, with the ranges and advance count it concerns and one human
// sentence. Findings are derived by the policy, so re-evaluation
// reproduces them exactly.
type Finding struct {
	Code     string `msgpack:"code" json:"code"`
	Model    string `msgpack:"model,omitempty" json:"model,omitempty"`
	Snapshot string `msgpack:"snapshot,omitempty" json:"snapshot,omitempty"`
	// Related names another snapshot the finding concerns (the downstream
	// child of an overlap, the incumbent of a gap).
	Related  string           `msgpack:"related,omitempty" json:"related,omitempty"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	Advances int              `msgpack:"advances" json:"advances"`
	Message  string           `msgpack:"message" json:"message"`
	// Audit names the audit an audit_failed or audit_warning finding is
	// about, and Count the violating rows of the failing results still
	// latest on its ranges, summed; both omitted otherwise (findings
	// without them encode as before).
	Audit string `msgpack:"audit,omitempty" json:"audit,omitempty"`
	Count int64  `msgpack:"count,omitempty" json:"count,omitempty"`
}

// PromotionDecided records a promotion decision and what it was based on.
type PromotionDecided struct {
	Plan    string  `msgpack:"plan" json:"plan"`
	Env     string  `msgpack:"env" json:"env"`
	Outcome Outcome `msgpack:"outcome" json:"outcome"`
	// Codes is the union of every candidate's codes and warnings (sorted).
	Codes  []string                `msgpack:"codes" json:"codes"`
	Models map[string]ModelFinding `msgpack:"models" json:"models"`
	// EvaluatedAtSeq is the stream sequence of the view the policy read.
	EvaluatedAtSeq uint64 `msgpack:"evaluated_at_seq" json:"evaluated_at_seq"`
	// EvaluatedAt is the clock the policy evaluated at.
	EvaluatedAt time.Time `msgpack:"evaluated_at" json:"evaluated_at"`
	Policy      Policy    `msgpack:"policy" json:"policy"`
	// Generation is the env generation after the decision (bumped on accept).
	Generation uint64 `msgpack:"generation" json:"generation"`
	// Findings explain the decision, one per code and model.
	Findings []Finding `msgpack:"findings" json:"findings"`
	// CatchUpSeq is the stream sequence of the CatchUpRequested this
	// decision is the strict retry of (0 when there was no catch-up).
	CatchUpSeq uint64 `msgpack:"catch_up_seq,omitempty" json:"catch_up_seq,omitempty"`
	// Repairs is the repair work an acceptance with a gap issues at once,
	// in dependency order: per candidate accepted with a gap, the whole
	// intervals of its table that cover the gap. Empty otherwise.
	Repairs []RepairWork `msgpack:"repairs,omitempty" json:"repairs,omitempty"`
}

// RepairWork is the work that closes one candidate's repair debt (a whole
// kind's: the whole object from its start; docs/kinds.md).
type RepairWork struct {
	Model    string           `msgpack:"model" json:"model"`
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
}

// CatchUpWork is what bounded catch-up computes for one candidate before
// the strict retry.
type CatchUpWork struct {
	Model    string `msgpack:"model" json:"model"`
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	Table    string `msgpack:"table" json:"table"`
	// Ranges is the candidate's missing suffix to backfill (a whole kind's:
	// the whole object from its start; docs/kinds.md).
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Recompute is complete coverage overlapping an upstream candidate's
	// suffix: it is invalidated with the request and computed again after
	// the upstream suffix.
	Recompute []interval.Range `msgpack:"recompute" json:"recompute"`
	// Advances counts the scheduler advances that produced Ranges.
	Advances int `msgpack:"advances" json:"advances"`
	// IncumbentFrontier is the incumbent's frontier when catch-up was
	// requested: a retry that finds it moved knows another advance happened.
	IncumbentFrontier time.Time `msgpack:"incumbent_frontier" json:"incumbent_frontier"`
}

// CatchUpRequested records that a promotion under bounded catch-up found
// only a suffix missing within the bound: the listed work is computed (run
// kind catch_up, in the listed order) and the strict check is retried once.
// It is appended in one atomic batch with the IntervalsInvalidated events
// of its Recompute ranges.
type CatchUpRequested struct {
	Plan string `msgpack:"plan" json:"plan"`
	Env  string `msgpack:"env" json:"env"`
	// EvaluatedAtSeq and EvaluatedAt are the view and clock of the check.
	EvaluatedAtSeq uint64    `msgpack:"evaluated_at_seq" json:"evaluated_at_seq"`
	EvaluatedAt    time.Time `msgpack:"evaluated_at" json:"evaluated_at"`
	Policy         Policy    `msgpack:"policy" json:"policy"`
	// Work is per candidate with anything to compute, in dependency order.
	Work     []CatchUpWork `msgpack:"work" json:"work"`
	Findings []Finding     `msgpack:"findings" json:"findings"`
}

// RepairCompleted records that a repair debt closed: the table now covers
// every range the accepted gap left missing. It is appended in one atomic
// batch with the completion that closed it.
type RepairCompleted struct {
	Env      string           `msgpack:"env" json:"env"`
	Plan     string           `msgpack:"plan" json:"plan"`
	Model    string           `msgpack:"model" json:"model"`
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	// OpenedAt and OpenSeq locate the decision that opened the debt.
	OpenedAt time.Time `msgpack:"opened_at" json:"opened_at"`
	OpenSeq  uint64    `msgpack:"open_seq" json:"open_seq"`
	// ClosedAt is the clock of the completion that closed it.
	ClosedAt time.Time `msgpack:"closed_at" json:"closed_at"`
	// LatencyMS is ClosedAt - OpenedAt in milliseconds.
	LatencyMS int64 `msgpack:"latency_ms" json:"latency_ms"`
}

// EnvironmentFinalized marks a promoted plan's environment as finalized.
type EnvironmentFinalized struct {
	Env        string `msgpack:"env" json:"env"`
	Plan       string `msgpack:"plan" json:"plan"`
	Generation uint64 `msgpack:"generation" json:"generation"`
}

// RunFailed records that a worker's run of a model's command failed: its
// ranges stay missing. Final is set when the worker gave up (no more
// attempts); otherwise the work is redelivered after a backoff.
type RunFailed struct {
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	RunKind  RunKind          `msgpack:"run_kind" json:"run_kind"`
	RunID    string           `msgpack:"run_id,omitempty" json:"run_id,omitempty"`
	// Worker names the worker process.
	Worker string `msgpack:"worker,omitempty" json:"worker,omitempty"`
	// ExitStatus is the command's exit status (-1: killed or not started).
	ExitStatus int `msgpack:"exit_status" json:"exit_status"`
	// Error says what went wrong ("exit status 3", "timed out after 1h").
	Error string `msgpack:"error" json:"error"`
	// StderrTail is the end of the command's standard error.
	StderrTail string `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	// Attempt counts deliveries of the work, from 1.
	Attempt int  `msgpack:"attempt" json:"attempt"`
	Final   bool `msgpack:"final" json:"final"`
	// Work is the work item the failure reports (fail_work), when it
	// names one.
	Work string `msgpack:"work,omitempty" json:"work,omitempty"`
}

// PlanCancelled records that a plan's outstanding work was ended
// (cancel_plan): its backfill and catch-up work is computed no more, and
// completions of it are refused. The plan stays: its promotion is
// evaluated as any plan's, so what its candidates miss is reported.
// Subject: the plan's.
type PlanCancelled struct {
	Plan string `msgpack:"plan" json:"plan"`
	Env  string `msgpack:"env" json:"env"`
	// Reason says why, for humans; omitted when empty.
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// RestateWork is what a restatement recomputes of one model of the
// environment: whole intervals of its snapshot's unit.
type RestateWork struct {
	Model    string `msgpack:"model" json:"model"`
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	Table    string `msgpack:"table" json:"table"`
	// Ranges is what the work computes: the part of the model's affected
	// intervals its table covered (Invalidated) and the part that was
	// ready and missing (it would be computed from the data the
	// restatement replaces otherwise).
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Invalidated is the part of the model's affected intervals the table
	// covered: it is removed from the table's coverage by an
	// IntervalsInvalidated appended with the request. Ranges holds all of
	// it but for an interval of the snapshot's unit that has not ended (a
	// forward-only version coarser than its table's coverage): that one
	// is the scheduler's, once ready.
	Invalidated []interval.Range `msgpack:"invalidated" json:"invalidated"`
}

// RestatementRequested records a restatement (restate): the ranges of a
// model in an environment, and every interval of the env's transitively
// downstream models that overlaps them (each mapped to its own unit), are
// invalidated and recomputed with each incumbent's own logic, as work of
// run kind restate, in the listed (dependency) order. It is appended in
// one atomic batch with the IntervalsInvalidated events of each table's
// covered part. Subject: the environment's.
type RestatementRequested struct {
	Env   string `msgpack:"env" json:"env"`
	Model string `msgpack:"model" json:"model"`
	// Snapshot is the model's incumbent the restatement read.
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	// Ranges are the ranges asked for, widened to whole intervals of the
	// model's unit and clipped to its start.
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Generation is the environment generation the restatement read; its
	// work is no longer recorded once the generation moved on.
	Generation uint64 `msgpack:"generation" json:"generation"`
	// EvaluatedAtSeq is the stream sequence of the view the restatement
	// was decided on (with the event's time, its clock): replay decides
	// it again there.
	EvaluatedAtSeq uint64 `msgpack:"evaluated_at_seq" json:"evaluated_at_seq"`
	// Run is the run id of the work: "restate:<command id>".
	Run string `msgpack:"run" json:"run"`
	// Work is per model with anything to compute, the model first, then
	// its downstream models in dependency order.
	Work []RestateWork `msgpack:"work" json:"work"`
	// Reason says why, for humans; omitted when empty.
	Reason string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// TableRetired records that a snapshot table was retired: at the view of
// sequence JudgedAtSeq and the clock JudgedAt, no environment's incumbent
// and no open plan used it, and its last use ended (ReleasedAt, the
// accepted decision at ReleasedSeq) more than the grace period before.
// Its coverage is cleared (a later plan that uses the table backfills it
// again) and the warehouse drops the table (work/sqlrun.Janitor). Subject:
// the snapshot that owns the table (the table id is that snapshot's id).
type TableRetired struct {
	// Table is the tidemark table id (e.g. "events@v1").
	Table string `msgpack:"table" json:"table"`
	// Snapshots are the snapshots that wrote the table, sorted: its owner
	// and the forward-only versions bound to it.
	Snapshots []string `msgpack:"snapshots" json:"snapshots"`
	// Reason says why the table was retirable, for humans.
	Reason string `msgpack:"reason" json:"reason"`
	// JudgedAtSeq is the stream sequence of the view the rule read;
	// JudgedAt the clock it was judged at.
	JudgedAtSeq uint64    `msgpack:"judged_at_seq" json:"judged_at_seq"`
	JudgedAt    time.Time `msgpack:"judged_at" json:"judged_at"`
	// ReleasedSeq and ReleasedAt locate the accepted promotion that ended
	// the table's last use.
	ReleasedSeq uint64    `msgpack:"released_seq" json:"released_seq"`
	ReleasedAt  time.Time `msgpack:"released_at" json:"released_at"`
	// GraceMS is the grace period applied, in milliseconds.
	GraceMS int64 `msgpack:"grace_ms" json:"grace_ms"`
	// RetainMS is the retention applied, in milliseconds (an incumbent's
	// table is kept that long after its demotion, for rollbacks); omitted
	// on retirements judged before retention existed.
	RetainMS int64 `msgpack:"retain_ms,omitempty" json:"retain_ms,omitempty"`
	// Coverage is the table's coverage the event clears.
	Coverage []interval.Range `msgpack:"coverage" json:"coverage"`
}

// EnvironmentRolledBack records a rollback decision (the rollback
// command): the environment's incumbents become those it had at
// ToGeneration, in one view swap, and its generation moves to Generation
// (FromGeneration + 1), which fences the demoted snapshots' scheduler and
// closes the plans built against FromGeneration (their promotion is
// conflicting_plan). Nothing is recomputed: the scheduler fills the
// restored incumbents' missing ready intervals as usual. Subject: the
// environment's. Replay re-evaluates it at EvaluatedAtSeq.
type EnvironmentRolledBack struct {
	Env string `msgpack:"env" json:"env"`
	// FromGeneration is the generation rolled back (the env's at the
	// decision); ToGeneration the generation whose incumbents are restored.
	FromGeneration uint64 `msgpack:"from_generation" json:"from_generation"`
	ToGeneration   uint64 `msgpack:"to_generation" json:"to_generation"`
	// Generation is the env generation after the rollback.
	Generation uint64 `msgpack:"generation" json:"generation"`
	// Models lists, by model name, every model whose incumbent changes.
	Models []RolledBackModel `msgpack:"models" json:"models"`
	// Repairs is the open repair debt of the demoted snapshots in the env,
	// which the rollback closes (the env no longer serves those tables;
	// the scheduler fills every missing ready interval of the restored
	// incumbents), oldest first; omitted when none.
	Repairs []RolledBackRepair `msgpack:"repairs,omitempty" json:"repairs,omitempty"`
	// EvaluatedAtSeq is the stream sequence of the view decided on;
	// EvaluatedAt the command's clock.
	EvaluatedAtSeq uint64    `msgpack:"evaluated_at_seq" json:"evaluated_at_seq"`
	EvaluatedAt    time.Time `msgpack:"evaluated_at" json:"evaluated_at"`
}

// RolledBackModel is one model a rollback changes: the snapshot it
// restores (the incumbent at the target generation, with its table) and
// the one it demotes.
type RolledBackModel struct {
	Model    string `msgpack:"model" json:"model"`
	Restored string `msgpack:"restored" json:"restored"`
	Table    string `msgpack:"table" json:"table"`
	Demoted  string `msgpack:"demoted" json:"demoted"`
}

// RolledBackRepair names an open repair debt a rollback closes: the
// debt opened by Plan's acceptance at OpenSeq for Snapshot.
type RolledBackRepair struct {
	Plan     string `msgpack:"plan" json:"plan"`
	Model    string `msgpack:"model" json:"model"`
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	OpenSeq  uint64 `msgpack:"open_seq" json:"open_seq"`
}

// EventType implements Payload.
func (SnapshotRegistered) EventType() Type    { return TypeSnapshotRegistered }
func (PlanBuilt) EventType() Type             { return TypePlanBuilt }
func (IntervalsCompleted) EventType() Type    { return TypeIntervalsCompleted }
func (IntervalsInvalidated) EventType() Type  { return TypeIntervalsInvalidated }
func (SchedulerAdvanced) EventType() Type     { return TypeSchedulerAdvanced }
func (PromotionDecided) EventType() Type      { return TypePromotionDecided }
func (EnvironmentFinalized) EventType() Type  { return TypeEnvironmentFinalized }
func (CatchUpRequested) EventType() Type      { return TypeCatchUpRequested }
func (RepairCompleted) EventType() Type       { return TypeRepairCompleted }
func (RunFailed) EventType() Type             { return TypeRunFailed }
func (TableRetired) EventType() Type          { return TypeTableRetired }
func (PlanCancelled) EventType() Type         { return TypePlanCancelled }
func (EnvironmentRolledBack) EventType() Type { return TypeEnvironmentRolledBack }
func (RestatementRequested) EventType() Type  { return TypeRestatementRequested }

// Subject implements Payload.
func (p SnapshotRegistered) Subject() string { return SnapshotSubject(p.Model, p.Version) }
func (p PlanBuilt) Subject() string          { return PlanSubject(p.Plan) }
func (p IntervalsCompleted) Subject() string { return snapSubject(p.Snapshot) }
func (p IntervalsInvalidated) Subject() string {
	return snapSubject(p.Snapshot)
}
func (p SchedulerAdvanced) Subject() string     { return EnvSubject(p.Env) }
func (p PromotionDecided) Subject() string      { return PlanSubject(p.Plan) }
func (p EnvironmentFinalized) Subject() string  { return EnvSubject(p.Env) }
func (p CatchUpRequested) Subject() string      { return PlanSubject(p.Plan) }
func (p RepairCompleted) Subject() string       { return EnvSubject(p.Env) }
func (p RunFailed) Subject() string             { return snapSubject(p.Snapshot) }
func (p TableRetired) Subject() string          { return snapSubject(p.Table) }
func (p PlanCancelled) Subject() string         { return PlanSubject(p.Plan) }
func (p EnvironmentRolledBack) Subject() string { return EnvSubject(p.Env) }
func (p RestatementRequested) Subject() string  { return EnvSubject(p.Env) }

func snapSubject(id string) string {
	m, v, _ := ParseSnapshotID(id)
	return SnapshotSubject(m, v)
}

func utc(t *time.Time) {
	if !t.IsZero() {
		*t = t.UTC()
	} else {
		*t = time.Time{}
	}
}

func (p *SnapshotRegistered) normalize() { utc(&p.Start) }
func (p *PlanBuilt) normalize() {
	utc(&p.BuiltAt)
	utc(&p.Start)
	utc(&p.End)
	for i := range p.Candidates {
		utc(&p.Candidates[i].IncumbentFrontier)
	}
}
func (p *SchedulerAdvanced) normalize() { utc(&p.Tick); utc(&p.Frontier) }
func (p *PromotionDecided) normalize()  { utc(&p.EvaluatedAt) }
func (p *CatchUpRequested) normalize() {
	utc(&p.EvaluatedAt)
	for i := range p.Work {
		utc(&p.Work[i].IncumbentFrontier)
	}
}
func (p *RepairCompleted) normalize()       { utc(&p.OpenedAt); utc(&p.ClosedAt) }
func (p *TableRetired) normalize()          { utc(&p.JudgedAt); utc(&p.ReleasedAt) }
func (p *EnvironmentRolledBack) normalize() { utc(&p.EvaluatedAt) }

// IDSource hands out ULIDs that are monotonic within the process even when
// the clock it is given stands still or goes back.
type IDSource struct {
	mu      sync.Mutex
	last    uint64
	entropy *ulid.MonotonicEntropy
}

// NewIDSource returns an IDSource seeded from crypto/rand.
func NewIDSource() *IDSource {
	return &IDSource{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// New returns a ULID for an event that occurred at t.
func (s *IDSource) New(t time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := ulid.Timestamp(t)
	if ms < s.last {
		ms = s.last
	}
	id, err := ulid.New(ms, s.entropy)
	if err != nil {
		// Entropy overflow within one millisecond: move to the next one.
		ms++
		id = ulid.MustNew(ms, s.entropy)
	}
	s.last = ms
	return id.String()
}

// New builds an event with a fresh id, the current schema version and the
// given occurrence time.
func New(ids *IDSource, at time.Time, p Payload) Event {
	return Event{
		Envelope: Envelope{ID: ids.New(at), Type: p.EventType(), Schema: SchemaVersion, OccurredAt: at.UTC()},
		Payload:  p,
	}
}

// String is a short human description of an event.
func (e Event) String() string { return fmt.Sprintf("%s %s %s", e.Type, e.ID, e.Payload.Subject()) }

// Record is one stored event with its stream position, as a reader of the
// log sees it.
type Record struct {
	Seq     uint64
	Subject string
	Event   Event
	// Err is set when the bytes could not be decoded.
	Err error
	// Index and Count place an event stored in a group message (several
	// commands' events coalesced into one stored message, one fsync:
	// docs/events.md): it is event Index (0-based) of Count stored at
	// Seq. Both are 0 for an event stored in a message of its own. An
	// event's address is (Seq, Index).
	Index, Count int
}

// ErrForeign marks a well-formed event stored on a subject other than its
// own: the engine never writes one.
var ErrForeign = errors.New("events: event on a foreign subject")

// DecodeAt decodes a message stored on subject: the event, or an error
// when it is not a tidemark event (an *DecodeError, or ErrForeign when a
// well-formed event is not on its own subject).
func DecodeAt(subject string, data []byte) (Event, error) {
	ev, err := Decode(data)
	if err != nil {
		return ev, err
	}
	if want := ev.Payload.Subject(); want != subject {
		return ev, fmt.Errorf("%w: a %s belongs on %s", ErrForeign, ev.Type, want)
	}
	return ev, nil
}

// ParseSnapshotID splits "model@version".
func ParseSnapshotID(id string) (model, version string, ok bool) {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '@' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}

// Expect is the condition an append is made under: the log stores the
// events only if it still is as the deciding view saw it.
type Expect struct {
	// LastSeq, when set, requires the whole log's last sequence to equal
	// *LastSeq: nothing at all changed since the view was read.
	LastSeq *uint64
	// Subjects requires, per subject, the sequence of that subject's last
	// event (0: the subject has none). Every subject listed must be one the
	// append writes.
	Subjects map[string]uint64
}

// ExpectStream is the condition that nothing was appended after seq.
func ExpectStream(seq uint64) Expect { return Expect{LastSeq: &seq} }

// ExpectSubjects is the condition that none of subjects changed since the
// view whose per-subject sequences are last.
func ExpectSubjects(last map[string]uint64, subjects ...string) Expect {
	e := Expect{Subjects: make(map[string]uint64, len(subjects))}
	for _, s := range subjects {
		e.Subjects[s] = last[s]
	}
	return e
}
