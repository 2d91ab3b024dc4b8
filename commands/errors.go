package commands

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// Code classifies a rejected command.
type Code string

// The rejection codes.
const (
	// CodeInvalid: the command is malformed or breaks a rule; fix the field.
	CodeInvalid Code = "invalid"
	// CodeMalformed: the body could not be decoded.
	CodeMalformed Code = "malformed"
	// CodeTooLarge: the body is over MaxBodyBytes.
	CodeTooLarge Code = "too_large"
	// CodeLimit: a count limit was exceeded.
	CodeLimit Code = "limit_exceeded"
	// CodeNotFound: the command names a model, snapshot or plan that does not exist.
	CodeNotFound Code = "not_found"
	// CodeConflict: the state changed under the command too often, or the
	// command contradicts the state (a plan id that already exists).
	CodeConflict Code = "conflict"
	// CodeIdempotencyConflict: the command id was already used for
	// another command (another kind, or another body); nothing was done.
	// A retry must send the same command; a new command needs a new id.
	CodeIdempotencyConflict Code = "idempotency_conflict"
	// CodeStaleGeneration: a scheduler advance read an older environment
	// generation than the current one (a promotion happened since); it is
	// fenced off and appends nothing. Re-read and schedule again.
	CodeStaleGeneration Code = "stale_generation"
	// CodeRateLimited: the connection sent commands faster than allowed;
	// nothing was done. Retry later with the same id.
	CodeRateLimited Code = "rate_limited"
	// CodeUnavailable: the engine could not reach the stream; retry with the same id.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: a bug or an unexpected failure.
	CodeInternal Code = "internal"
)

// Codes are the rejection codes.
var Codes = []Code{CodeInvalid, CodeMalformed, CodeTooLarge, CodeLimit, CodeNotFound, CodeConflict, CodeIdempotencyConflict,
	CodeStaleGeneration, CodeRateLimited, CodeUnavailable, CodeInternal}

// String returns the code as written on the wire.
func (c Code) String() string { return string(c) }

// ErrRejected is matched (errors.Is) by every *Error.
var ErrRejected = errors.New("commands: rejected")

// Error is a typed command rejection naming the offending field.
type Error struct {
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *Error) Is(target error) bool { return target == ErrRejected }

// Errorf builds an *Error.
func Errorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Reply answers every command.
type Reply struct {
	// Accepted is true when the command was carried out (a promotion whose
	// decision was recorded is accepted; the decision says whether it passed).
	Accepted bool `msgpack:"accepted" json:"accepted"`
	// Code and Field classify a rejection; Message explains either outcome.
	Code    Code   `msgpack:"code,omitempty" json:"code,omitempty"`
	Field   string `msgpack:"field,omitempty" json:"field,omitempty"`
	Message string `msgpack:"message,omitempty" json:"message,omitempty"`
	// Seq is the stream sequence of the last event the command appended (or,
	// for a duplicate, had appended).
	Seq uint64 `msgpack:"seq,omitempty" json:"seq,omitempty"`
	// Events is how many events the command appended.
	Events int `msgpack:"events" json:"events"`
	// Duplicate is set when the command id had already been applied.
	Duplicate bool `msgpack:"duplicate,omitempty" json:"duplicate,omitempty"`
	// Decision is set by promote once the decision is recorded.
	Decision *events.PromotionDecided `msgpack:"decision,omitempty" json:"decision,omitempty"`
	// CatchUp is set by a promote that started bounded catch-up: the work
	// listed is computed (run kind catch_up), then a promote of the same
	// plan records the strict retry's decision.
	CatchUp *events.CatchUpRequested `msgpack:"catch_up,omitempty" json:"catch_up,omitempty"`
	// Plan is set by build_plan.
	Plan *events.PlanBuilt `msgpack:"plan,omitempty" json:"plan,omitempty"`
	// Advances is set by advance_scheduler.
	Advances []events.SchedulerAdvanced `msgpack:"advances,omitempty" json:"advances,omitempty"`
	// Repairs is set by open_repairs and status, oldest first.
	Repairs []Repair `msgpack:"repairs,omitempty" json:"repairs,omitempty"`
	// Envs is set by status.
	Envs []EnvStatus `msgpack:"envs,omitempty" json:"envs,omitempty"`
	// Plans is set by status: the plans in flight (built, not accepted)
	// with their backfill progress, by plan id.
	Plans []PlanProgress `msgpack:"plans,omitempty" json:"plans,omitempty"`
	// Retired is set by status: the retired snapshot tables, by table.
	Retired []RetiredTable `msgpack:"retired,omitempty" json:"retired,omitempty"`
	// Rollback is set by rollback: the decision recorded.
	Rollback *events.EnvironmentRolledBack `msgpack:"rollback,omitempty" json:"rollback,omitempty"`
	// Restatement is set by restate: what it invalidated and the work
	// that recomputes it.
	Restatement *events.RestatementRequested `msgpack:"restatement,omitempty" json:"restatement,omitempty"`
	// Restatements is set by status: the restatements in flight (their
	// work not all done, their generation still the environment's), by
	// sequence.
	Restatements []RestateProgress `msgpack:"restatements,omitempty" json:"restatements,omitempty"`
	// Registered is set by register_snapshots: the snapshots it
	// registered, in its order, which are its events (the others of the
	// set were registered already with the same definitions); omitted on
	// a duplicate.
	Registered []string `msgpack:"registered,omitempty" json:"registered,omitempty"`
}

// RestateProgress is a restatement in flight: its request and the
// progress of its work per model (ModelProgress, run kind restate), in
// its order.
type RestateProgress struct {
	Env   string `msgpack:"env" json:"env"`
	Model string `msgpack:"model" json:"model"`
	// Snapshot is the restated model's incumbent.
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	// Run is the run id of its work; Seq the sequence of its
	// RestatementRequested.
	Run    string          `msgpack:"run" json:"run"`
	Seq    uint64          `msgpack:"seq" json:"seq"`
	Models []ModelProgress `msgpack:"models" json:"models"`
}

// RetiredTable is a snapshot table the janitor retired (its TableRetired
// event): its coverage is cleared and the warehouse drops it.
type RetiredTable struct {
	Table     string   `msgpack:"table" json:"table"`
	Snapshots []string `msgpack:"snapshots" json:"snapshots"`
	// Seq is the sequence of the TableRetired event; JudgedAt its clock.
	Seq      uint64    `msgpack:"seq" json:"seq"`
	JudgedAt time.Time `msgpack:"judged_at" json:"judged_at"`
	Reason   string    `msgpack:"reason" json:"reason"`
}

// PlanProgress is a plan in flight and how much of its backfill set (fixed
// at build) its candidates' tables cover, summed over candidates as time.
type PlanProgress struct {
	Plan string `msgpack:"plan" json:"plan"`
	Env  string `msgpack:"env" json:"env"`
	// BackfillMS is the backfill set's length, DoneMS the part covered.
	BackfillMS int64 `msgpack:"backfill_ms" json:"backfill_ms"`
	DoneMS     int64 `msgpack:"done_ms" json:"done_ms"`
	// Cancelled: the plan was cancelled (cancel_plan); its work is not
	// computed any more.
	Cancelled bool `msgpack:"cancelled,omitempty" json:"cancelled,omitempty"`
	// Failures are, per candidate whose plan work failed, the latest
	// failure of it (a final one first), in candidate order.
	Failures []RunFailure `msgpack:"failures,omitempty" json:"failures,omitempty"`
	// Models is the progress of the plan's own work per model: its
	// backfill, then its latest catch-up once one was requested, each in
	// candidate order; only models the work has something to compute
	// for.
	Models []ModelProgress `msgpack:"models,omitempty" json:"models,omitempty"`
	// Audits are the candidates' audits whose latest result failed on a
	// range of the window their promotion judges now (a blocking one
	// rejects it audit_failed), in candidate order; omitted when none.
	Audits []AuditStatus `msgpack:"audits,omitempty" json:"audits,omitempty"`
}

// ModelProgress is one model's step of a plan's work item (its backfill
// or its catch-up), or of a restatement's, as the completions naming the
// item recorded it: the
// batches and intervals asked and done, the rows written, and the pace
// from when the work became due to its latest completion (event times:
// the same state gives the same figures). A batch is done when the
// completions cover it.
type ModelProgress struct {
	Model    string         `msgpack:"model" json:"model"`
	Snapshot string         `msgpack:"snapshot" json:"snapshot"`
	RunKind  events.RunKind `msgpack:"run_kind" json:"run_kind"`
	// Batches is how many batches the step is cut into (interval.Batches
	// by the snapshot's unit and batch_size), BatchesDone those done.
	Batches     int `msgpack:"batches" json:"batches"`
	BatchesDone int `msgpack:"batches_done" json:"batches_done"`
	// Intervals counts the step's intervals of the snapshot's unit,
	// IntervalsDone those recorded done.
	Intervals     int `msgpack:"intervals" json:"intervals"`
	IntervalsDone int `msgpack:"intervals_done" json:"intervals_done"`
	// Rows sums the rows the completions reported.
	Rows int64 `msgpack:"rows" json:"rows"`
	// DueAt is when the work became due; LastDoneAt is the time of the
	// step's latest completion (zero: none yet).
	DueAt      time.Time `msgpack:"due_at" json:"due_at"`
	LastDoneAt time.Time `msgpack:"last_done_at,omitempty" json:"last_done_at,omitzero"`
	// RowsPerSecond and IntervalsPerSecond are Rows and IntervalsDone
	// over LastDoneAt − DueAt (0 until something is done).
	RowsPerSecond      float64 `msgpack:"rows_per_second" json:"rows_per_second"`
	IntervalsPerSecond float64 `msgpack:"intervals_per_second" json:"intervals_per_second"`
	// ETAMS is the time the rest of the step takes at that pace, from
	// LastDoneAt, in milliseconds: the intervals left over
	// IntervalsPerSecond (0 when all are done); nil while it is unknown
	// (nothing done yet).
	ETAMS *int64 `msgpack:"eta_ms,omitempty" json:"eta_ms,omitempty"`
}

// ETA is ETAMS as a duration; ok is false while it is unknown.
func (m ModelProgress) ETA() (d time.Duration, ok bool) {
	if m.ETAMS == nil {
		return 0, false
	}
	return time.Duration(*m.ETAMS) * time.Millisecond, true
}

// Failed is the plan's first failure its worker gave up on, or nil.
func (p PlanProgress) Failed() *RunFailure {
	for i := range p.Failures {
		if p.Failures[i].Final {
			return &p.Failures[i]
		}
	}
	return nil
}

// Complete reports whether the whole backfill set is covered.
func (p PlanProgress) Complete() bool { return p.DoneMS >= p.BackfillMS }

// EnvStatus is an environment as the projections show it.
type EnvStatus struct {
	Env        string        `msgpack:"env" json:"env"`
	Generation uint64        `msgpack:"generation" json:"generation"`
	Finalized  string        `msgpack:"finalized,omitempty" json:"finalized,omitempty"`
	Models     []ModelStatus `msgpack:"models" json:"models"`
}

// ModelStatus is one model's incumbent in an environment.
type ModelStatus struct {
	Model    string `msgpack:"model" json:"model"`
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	// Frontier is the end of the incumbent's coverage (zero: none).
	Frontier time.Time `msgpack:"frontier" json:"frontier,omitzero"`
	// Missing is what the incumbent misses before its frontier.
	Missing  []interval.Range `msgpack:"missing" json:"missing"`
	LastTick time.Time        `msgpack:"last_tick,omitempty" json:"last_tick,omitzero"`
	// OpenRepairs counts open repair debts of the model in the env.
	OpenRepairs int `msgpack:"open_repairs" json:"open_repairs"`
	// Failures counts failed runs of the incumbent.
	Failures int `msgpack:"failures" json:"failures"`
	// LastFailure is the incumbent's most recent failed run; nil when
	// none.
	LastFailure *RunFailure `msgpack:"last_failure,omitempty" json:"last_failure,omitempty"`
	// Audits are the incumbent's audits whose latest result failed on
	// some of its ranges (issue 30); omitted when none.
	Audits []AuditStatus `msgpack:"audits,omitempty" json:"audits,omitempty"`
	// Ready is the incumbent's readiness frontier at the query's clock
	// (zero: nothing ready yet).
	Ready time.Time `msgpack:"ready,omitempty" json:"ready,omitzero"`
	// Late: the frontier trails Ready by more than the incumbent's
	// freshness bound (issue 32). LateCause is why, when known (one of
	// the LateCause constants), and LateReason the same in words.
	Late       bool      `msgpack:"late,omitempty" json:"late,omitempty"`
	LateCause  LateCause `msgpack:"late_cause,omitempty" json:"late_cause,omitempty"`
	LateReason string    `msgpack:"late_reason,omitempty" json:"late_reason,omitempty"`
}

// LateCause is why a model is late, when known.
type LateCause string

// The causes of lateness status names.
const (
	// LateFailed: the incumbent's last run failed.
	LateFailed LateCause = "failed"
	// LateUpstream: a model it depends on is late.
	LateUpstream LateCause = "upstream_late"
	// LateNoWorker: the server sees no live worker heartbeat.
	LateNoWorker LateCause = "no_worker"
)

// AuditStatus is an audit of a snapshot whose latest result failed on
// some ranges, as status shows it.
type AuditStatus struct {
	Model    string `msgpack:"model" json:"model"`
	Snapshot string `msgpack:"snapshot" json:"snapshot"`
	Audit    string `msgpack:"audit" json:"audit"`
	// Blocking: a candidate with this failure in its check window is
	// rejected audit_failed (else it warns audit_warning).
	Blocking bool `msgpack:"blocking" json:"blocking"`
	// Ranges are the failed ranges (for a plan's candidate: those within
	// the window its promotion judges now).
	Ranges []interval.Range `msgpack:"ranges" json:"ranges"`
	// Count sums the violating rows of the failing results still latest
	// on Ranges (each over its whole batch); Error is why the latest of
	// them could not run ("" when it ran).
	Count int64  `msgpack:"count" json:"count"`
	Error string `msgpack:"error,omitempty" json:"error,omitempty"`
}

// RunFailure is a failed run as status shows it (its RunFailed event),
// its error text cut to MaxFailureText bytes.
type RunFailure struct {
	Model    string         `msgpack:"model" json:"model"`
	Snapshot string         `msgpack:"snapshot" json:"snapshot"`
	RunKind  events.RunKind `msgpack:"run_kind" json:"run_kind"`
	Error    string         `msgpack:"error" json:"error"`
	Attempt  int            `msgpack:"attempt" json:"attempt"`
	// Final: the work was given up (no more attempts).
	Final bool `msgpack:"final" json:"final"`
	// Seq is the sequence of the RunFailed event.
	Seq uint64 `msgpack:"seq" json:"seq"`
}

// MaxFailureText bounds the error text status shows of a failed run.
const MaxFailureText = 1024

// MaxErrorText bounds the error text a RunFailed records: the engine
// cuts a longer fail_run error.
const MaxErrorText = 4096

// BoundText cuts s to at most n bytes (n > 16), at a UTF-8 boundary,
// marking the cut.
func BoundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = " …(cut)"
	s = s[:n-len(cut)]
	// Drop the bytes of a rune the cut split (only those: an invalid byte
	// earlier in s is kept, not a reason to drop everything after it).
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + cut
}

// Repair is one open repair debt: the ranges a candidate promoted with a
// trailing gap still misses.
type Repair struct {
	Env      string           `msgpack:"env" json:"env"`
	Plan     string           `msgpack:"plan" json:"plan"`
	Model    string           `msgpack:"model" json:"model"`
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	// Missing is what the table still misses of Ranges now.
	Missing  []interval.Range `msgpack:"missing" json:"missing"`
	OpenedAt time.Time        `msgpack:"opened_at" json:"opened_at"`
	OpenSeq  uint64           `msgpack:"open_seq" json:"open_seq"`
	// OpenForMS is how long the debt has been open at the query's clock.
	OpenForMS int64 `msgpack:"open_for_ms" json:"open_for_ms"`
}

// Err returns the rejection as an *Error, or nil if the command was accepted.
func (r Reply) Err() error {
	if r.Accepted {
		return nil
	}
	return &Error{Code: r.Code, Field: r.Field, Message: r.Message}
}

// Rejection turns an error into a rejected Reply.
func Rejection(err error) Reply {
	var ce *Error
	if errors.As(err, &ce) {
		return Reply{Code: ce.Code, Field: ce.Field, Message: ce.Message}
	}
	return Reply{Code: CodeInternal, Message: err.Error()}
}
