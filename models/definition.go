package models

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// MaxLookback bounds a snapshot's lookback, in intervals of its unit: the
// scheduler steps back that many intervals from a tick, and an unbounded
// count overflows that arithmetic (10,000 five-minute intervals are about 35
// days, 10,000 years stay far inside time.Time).
const MaxLookback = 10_000

// Definition is what a version of a model is: the fields a registration,
// a model file and a scenario file give it.
type Definition struct {
	Model, Version, Cron string
	Unit                 interval.Unit
	Start                time.Time
	Lookback             int
	Kind                 events.Kind
	AllowPartials        bool
	DependsOn            []string
	// SQL is the version's query, when it has one: one SELECT (or WITH)
	// over its upstream models by their model names, computing one
	// interval, which it names as the macros @start_ts and @end_ts
	// (TIMESTAMP values bound as parameters, never spliced into the text).
	// TimeColumn is the column of its rows that falls in the interval.
	// Both or neither: a version without SQL keeps today's behaviour (the
	// engine records intervals a worker computed some other way). Every
	// kind (incremental, forward_only) is computed per interval, so either
	// may carry SQL.
	SQL, TimeColumn string
	// BatchSize is how many intervals of the unit one batch of a backfill
	// computes, as one statement over the batch's range (@start_ts and
	// @end_ts its bounds) in one transaction; 0 (not set): the whole
	// missing range of a step is one batch (SQLMesh's batch_size).
	// BatchConcurrency is how many batches of the model are computed at
	// once; 0 (not set): the warehouse's default (1 on DuckDB, 4 on
	// Postgres).
	BatchSize, BatchConcurrency int
	// Audits are the checks each computed batch is put to (issue 30):
	// at most MaxAudits, names unique.
	Audits []Audit
	// Grain is the version's key: the columns of its query's rows that
	// identify a row (SQLMesh's grain). Optional; `tidemark diff` matches
	// a candidate's and an incumbent's rows on it to report changed
	// values. Plain column names, no repeats, at most MaxGrain, and only
	// with SQL.
	Grain []string
	// Seed is a seed version's CSV content (kind seed, SQLMesh's SEED):
	// a header row, then the rows its table is loaded with; at most
	// MaxSeed bytes of UTF-8. A seed has no SQL.
	Seed string
	// Macros is the macro vocabulary of SQL (and of custom audits' SQL):
	// "" is tidemark's (@start_ts and @end_ts, the interval's bounds as
	// TIMESTAMPs, the end exclusive), MacrosSQLMesh SQLMesh's.
	Macros string
	// Freshness is how far the version's frontier may trail its readiness
	// frontier before it is late (ParseFreshness): a whole number of
	// intervals ("3") or a duration ("2h"); "" one interval of its unit.
	Freshness string
}

// MacrosSQLMesh is Definition.Macros for SQLMesh's macro vocabulary:
// @start_ds, @end_ds, @start_date, @end_date, @start_ts, @end_ts,
// @start_dt, @end_dt, @start_epoch, @end_epoch, @start_millis,
// @end_millis, @execution_ds and @this_model, with SQLMesh's values (the
// end inclusive: the interval's end less one microsecond).
const MacrosSQLMesh = "sqlmesh"

// MaxSeed bounds a seed's CSV content, in bytes: it travels in the
// registration (and its event), under NATS's 1 MiB payload limit.
const MaxSeed = 512 << 10

// MaxGrain bounds a model's grain, in columns.
const MaxGrain = 16

// MaxBatchSize bounds a model's batch_size, in intervals (about 19 years
// of 5-minute intervals: more is no batching at all, which is leaving it
// out).
const MaxBatchSize = 2_000_000

// MaxBatchConcurrency bounds a model's batch_concurrency (each batch in
// flight holds a warehouse connection).
const MaxBatchConcurrency = 64

// ErrInvalid is matched by every *FieldError.
var ErrInvalid = errors.New("models: invalid definition")

// FieldError is a definition's problem. Field names the field as the
// command API does ("model", "start", "depends_on[1]"); Msg is the sentence
// the API replies with, which names the field ("start 2026-12-01T00:30:00Z
// is not aligned to the hour unit"); Detail is the same for a reader whose
// location already names the field ("2026-12-01T00:30:00Z is not aligned to
// the hour unit"). Key is the field as files name it where that differs:
// "name" for the model, "interval_unit" when a schedule's unit rather than
// its cron is at fault.
type FieldError struct {
	Field, Key, Msg, Detail string
}

func (e *FieldError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// named is a FieldError whose Msg is "<field> <detail>".
func named(field, format string, args ...any) *FieldError {
	d := fmt.Sprintf(format, args...)
	return &FieldError{Field: field, Key: field, Msg: field + " " + d, Detail: d}
}

// Validate is the one check of a definition (registrations, model files and
// scenario files all call it). An empty Version is not checked: files
// derive one, and a registration requires it itself.
func (d Definition) Validate() error {
	if err := CheckModelName("model", d.Model); err != nil {
		err.Key = "name"
		return err
	}
	if d.Version != "" {
		if err := CheckVersion(d.Version); err != nil {
			return err
		}
	}
	if d.Unit != "" && !d.Unit.Valid() {
		_, err := interval.ParseUnit(string(d.Unit))
		return &FieldError{Field: "interval_unit", Key: "interval_unit", Msg: err.Error(), Detail: err.Error()}
	}
	sched, err := interval.NewSchedule(d.Cron, d.Unit, d.AllowPartials)
	if err != nil {
		key := "cron"
		if d.Unit != "" && strings.Contains(err.Error(), "interval unit") {
			key = "interval_unit"
		}
		return &FieldError{Field: "cron", Key: key, Msg: err.Error(), Detail: err.Error()}
	}
	if d.Start.IsZero() {
		return named("start", "is required")
	}
	start := d.Start.UTC().Format(time.RFC3339)
	if !events.InRange(d.Start) {
		return named("start", "%s is outside the supported range %s .. %s", start,
			events.MinTime.Format(time.RFC3339), events.MaxTime.Format(time.RFC3339))
	}
	if !sched.Unit().Aligned(d.Start) {
		return named("start", "%s is not aligned to the %s unit", start, sched.Unit())
	}
	if d.Lookback < 0 {
		m := "lookback must be >= 0"
		return &FieldError{Field: "lookback", Key: "lookback", Msg: m, Detail: m}
	}
	if d.Lookback > MaxLookback {
		m := fmt.Sprintf("lookback %d: at most %d intervals", d.Lookback, MaxLookback)
		return &FieldError{Field: "lookback", Key: "lookback", Msg: m, Detail: m}
	}
	switch d.Kind {
	case "", events.Incremental, events.ForwardOnly, events.Full, events.View, events.Seed:
	default:
		return named("kind", "%q: want incremental, forward_only, full, view or seed", d.Kind)
	}
	switch d.Macros {
	case "", MacrosSQLMesh:
	default:
		return named("macros", "%q: want %q or nothing (tidemark's @start_ts and @end_ts)", d.Macros, MacrosSQLMesh)
	}
	if err := d.checkKind(); err != nil {
		return err
	}
	if _, err := ParseFreshness(d.Freshness); err != nil {
		return named("freshness", "%v", err)
	}
	if d.SQL != "" || d.TimeColumn != "" {
		if d.SQL == "" {
			return named("sql", "is required when time_column is set")
		}
		if d.TimeColumn == "" && !d.Kind.Whole() {
			return named("time_column", "is required when sql is set")
		}
		if err := checkSQLMacros(d.SQL, d.macros()...); err != nil {
			return named("sql", "%v", err)
		}
		if d.TimeColumn != "" {
			if err := checkTimeColumn(d.TimeColumn); err != nil {
				return named("time_column", "%v", err)
			}
		}
	}
	if d.BatchSize < 0 || d.BatchSize > MaxBatchSize {
		m := fmt.Sprintf("batch_size %d: want 1 .. %d intervals (omitted: the whole missing range in one batch)", d.BatchSize, MaxBatchSize)
		return &FieldError{Field: "batch_size", Key: "batch_size", Msg: m, Detail: m}
	}
	if d.BatchConcurrency < 0 || d.BatchConcurrency > MaxBatchConcurrency {
		m := fmt.Sprintf("batch_concurrency %d: want 1 .. %d (omitted: the warehouse's default)", d.BatchConcurrency, MaxBatchConcurrency)
		return &FieldError{Field: "batch_concurrency", Key: "batch_concurrency", Msg: m, Detail: m}
	}
	if err := checkAudits(d.Audits, d.auditMacros()); err != nil {
		return err
	}
	if len(d.Grain) > 0 && d.SQL == "" && d.Seed == "" {
		return named("grain", "needs sql (or a seed): a grain names columns of the version's rows")
	}
	if len(d.Grain) > MaxGrain {
		return named("grain", "has %d columns: at most %d", len(d.Grain), MaxGrain)
	}
	for i, g := range d.Grain {
		field := fmt.Sprintf("grain[%d]", i)
		if err := checkTimeColumn(g); err != nil {
			return named(field, "%v", err)
		}
		for j := range i {
			if d.Grain[j] == g {
				return named(field, "%q repeats grain[%d]", g, j)
			}
		}
	}
	for i, dep := range d.DependsOn {
		field := fmt.Sprintf("depends_on[%d]", i)
		if err := checkModelRef(field, dep); err != nil {
			return err
		}
		if dep == d.Model {
			m := "a model cannot depend on itself"
			return &FieldError{Field: field, Key: field, Msg: m, Detail: m}
		}
	}
	return nil
}

// checkKind checks what a whole kind (full, view, seed: computed whole,
// never interval by interval) allows: no time column, lookback or
// batch_size (their work always spans from the start, in one batch); SQL
// for full and view, a seed's content (and no SQL) for seed; a seed's
// content for no other kind.
func (d Definition) checkKind() error {
	if d.Kind == events.Seed {
		if d.Seed == "" {
			return named("seed", "is required for a seed: its CSV content")
		}
		if d.SQL != "" {
			return named("sql", "is not allowed for a seed: its rows are its CSV content")
		}
		if len(d.Seed) > MaxSeed {
			return named("seed", "is %d bytes: at most %d", len(d.Seed), MaxSeed)
		}
		if !utf8.ValidString(d.Seed) {
			return named("seed", "is not valid UTF-8")
		}
		if i := strings.IndexByte(d.Seed, 0); i >= 0 {
			return named("seed", "has a NUL byte at %s", where(d.Seed, i))
		}
	} else if d.Seed != "" {
		return named("seed", "is only for kind seed (kind is %q)", d.kindName())
	}
	if !d.Kind.Whole() {
		return nil
	}
	if (d.Kind == events.Full || d.Kind == events.View) && d.SQL == "" {
		return named("sql", "is required for a %s model", d.Kind)
	}
	why := "a " + string(d.Kind) + " model is computed whole at each tick"
	if d.TimeColumn != "" {
		return named("time_column", "is not allowed: %s, not interval by interval", why)
	}
	if d.Lookback != 0 {
		m := fmt.Sprintf("lookback %d is not allowed: %s, so there is nothing to look back over", d.Lookback, why)
		return &FieldError{Field: "lookback", Key: "lookback", Msg: m, Detail: m}
	}
	if d.BatchSize != 0 {
		m := fmt.Sprintf("batch_size %d is not allowed: %s, in one batch", d.BatchSize, why)
		return &FieldError{Field: "batch_size", Key: "batch_size", Msg: m, Detail: m}
	}
	return nil
}

func (d Definition) kindName() events.Kind {
	if d.Kind == "" {
		return events.Incremental
	}
	return d.Kind
}

// macros are the macros d's SQL may use.
func (d Definition) macros() []string {
	if d.Macros == MacrosSQLMesh {
		return SQLMeshMacros
	}
	return []string{MacroStartTS, MacroEndTS}
}

// auditMacros are the macros d's custom audits' SQL may use: d's own
// and @this_model.
func (d Definition) auditMacros() []string {
	if d.Macros == MacrosSQLMesh {
		return SQLMeshMacros // @this_model among them
	}
	return []string{MacroThisModel, MacroStartTS, MacroEndTS}
}

// checkModelRef checks a model a definition names (depends_on): a model's
// name, maybe schema-qualified (events.ValidModelName).
func checkModelRef(field, v string) *FieldError {
	if v == "" {
		return named(field, "is required")
	}
	if !events.ValidModelName(v) {
		return named(field, "%q: use letters, digits, '_' and '-' (at most 128), or schema.model", v)
	}
	return nil
}

// CheckVersion checks a version a user defines: '+' is reserved for derived
// versions (<version>+<plan>).
func CheckVersion(v string) *FieldError {
	if strings.Contains(v, "+") {
		return named("version", "%q: '+' is reserved for derived versions (<version>+<plan>); use letters, digits, '_' and '-'", v)
	}
	if !events.ValidUserVersion(v) {
		return named("version", "%q: use letters, digits, '_' and '-' (at most 128)", v)
	}
	return nil
}
