package events

import (
	"github.com/tidemark/tidemark/events/interval"
)

// TypeAuditRecorded names AuditRecorded on the wire.
const TypeAuditRecorded Type = "AuditRecorded"

// Audit is one audit a model version declares (issue 30): a check over
// each computed batch's rows of the version's table. It is defined here,
// beside the SnapshotRegistered that carries it (package models, which
// validates it, imports this one); models.Audit names the same type.
type Audit struct {
	// Name identifies the audit within the version (unique): a built-in's
	// kind unless given, or the custom audit's name.
	Name string `msgpack:"name" json:"name"`
	// Kind: not_null, unique_values, number_of_rows, accepted_values,
	// accepted_range, or custom (SQL set).
	Kind string `msgpack:"kind" json:"kind"`
	// Columns are the columns of not_null and unique_values.
	Columns []string `msgpack:"columns,omitempty" json:"columns,omitempty"`
	// Column is the column of accepted_values and accepted_range.
	Column string `msgpack:"column,omitempty" json:"column,omitempty"`
	// Threshold is number_of_rows' bound: at least this many rows per
	// batch.
	Threshold int64 `msgpack:"threshold,omitempty" json:"threshold,omitempty"`
	// IsIn are accepted_values' values, compared as text.
	IsIn []string `msgpack:"is_in,omitempty" json:"is_in,omitempty"`
	// Min and Max bound accepted_range: literals as written ("" =
	// unbounded), compared in the column's type.
	Min string `msgpack:"min,omitempty" json:"min,omitempty"`
	Max string `msgpack:"max,omitempty" json:"max,omitempty"`
	// SQL is a custom audit's query, whose rows are the violations; it may
	// use @this_model, @start_ts and @end_ts.
	SQL string `msgpack:"sql,omitempty" json:"sql,omitempty"`
	// NonBlocking is set for an audit whose failure only warns
	// (`blocking: false` in YAML).
	NonBlocking bool `msgpack:"non_blocking,omitempty" json:"non_blocking,omitempty"`
}

// Bounds of an audit outcome (a worker's report, checked by commands).
const (
	// MaxAuditSampleRows is the most violating rows an outcome samples.
	MaxAuditSampleRows = 5
	// MaxAuditColumns is the most columns a sample has.
	MaxAuditColumns = 64
	// MaxAuditValue bounds one sampled value, in bytes.
	MaxAuditValue = 200
	// MaxAuditError bounds an outcome's error, in bytes.
	MaxAuditError = 1000
	// MaxAudits is the most audits a version declares (and so the most
	// outcomes one completion carries).
	MaxAudits = 32
)

// AuditOutcome is one audit's result over one batch, as a worker reports it.
type AuditOutcome struct {
	// Audit is the Audit's Name.
	Audit  string `msgpack:"audit" json:"audit"`
	Passed bool   `msgpack:"passed" json:"passed"`
	// Count is the violating rows (number_of_rows: the rows found).
	Count int64 `msgpack:"count" json:"count"`
	// Columns are the sample's columns.
	Columns []string `msgpack:"columns,omitempty" json:"columns,omitempty"`
	// Sample is at most MaxAuditSampleRows violating rows, values as text,
	// each at most MaxAuditValue bytes.
	Sample [][]string `msgpack:"sample,omitempty" json:"sample,omitempty"`
	// Error says the audit could not run (it counts as failed), at most
	// MaxAuditError bytes.
	Error string `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Failed reports whether the outcome counts as a failure: not passed, or
// not run.
func (o AuditOutcome) Failed() bool { return !o.Passed || o.Error != "" }

// AuditRecorded is an audit's result over a completion's ranges of a
// snapshot: appended with the IntervalsCompleted that reported it, in the
// same atomic group. Subject: the snapshot's.
type AuditRecorded struct {
	Snapshot string           `msgpack:"snapshot" json:"snapshot"`
	Table    string           `msgpack:"table" json:"table"`
	Ranges   []interval.Range `msgpack:"ranges" json:"ranges"`
	// Blocking is from the registered definition, never from the worker.
	Blocking bool `msgpack:"blocking" json:"blocking"`
	// Work is the work item the completion reported, when it named one.
	Work         string `msgpack:"work,omitempty" json:"work,omitempty"`
	AuditOutcome `msgpack:",inline"`
}

// EventType implements Payload.
func (AuditRecorded) EventType() Type { return TypeAuditRecorded }

// Subject implements Payload.
func (p AuditRecorded) Subject() string { return snapSubject(p.Snapshot) }
