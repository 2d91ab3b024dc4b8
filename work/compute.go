package work

import (
	"context"
	"errors"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// Batch is what a worker computes at a time: one range of one step of a
// work item, at one delivery of the item.
type Batch struct {
	Item Item
	// Step is the index of the step in Item.Steps.
	Step    int
	Range   interval.Range
	Attempt int
}

// Computer computes batches for a worker's pull/ack/heartbeat/report loop
// (work/shell.Worker): a shell command per batch, or the step's SQL in a
// warehouse (work/sqlrun.Computer). Compute returns once the batch is
// durably computed (nil: the worker reports it complete with the Result)
// or has failed; a *Failure error details the failure's exit status and
// stderr.
type Computer interface {
	Compute(ctx context.Context, b Batch) (Result, error)
}

// Result is what computing a batch gave, reported with its completion
// (complete_work, inproc.Worker.RecordBatch).
type Result struct {
	// Rows is the rows written, 0 when unknown.
	Rows int64
	// Audits are the outcomes of the step's audits (SQL.Audits) over the
	// batch's rows, once they are committed, in the audits' order; nil
	// when the step has none (a shell command's batch has none).
	Audits []events.AuditOutcome
}

// ErrPermanent marks a batch that cannot be computed as sent (a step whose
// SQL lacks a field, say): the worker reports its failure as final and
// gives the item up at once instead of retrying it.
var ErrPermanent = errors.New("work: the batch cannot be computed as sent")

// Failure is a failed batch as a Computer details it (fail_work's
// exit_status and stderr_tail).
type Failure struct {
	ExitStatus int
	StderrTail string
	Err        error
}

func (f *Failure) Error() string { return f.Err.Error() }

// Unwrap is the failure's cause.
func (f *Failure) Unwrap() error { return f.Err }
