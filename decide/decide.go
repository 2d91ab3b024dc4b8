// Package decide is tidemark's pure decision core: given the projection
// state a command is decided against, it returns the events to append, the
// condition to append them under, and the reply to give once they are
// stored, or a typed *commands.Error that appends nothing.
//
// It reads nothing but its arguments: no clock (a command's At is its
// clock), no randomness, no I/O, no NATS. The engine reads the state,
// calls Decide, and appends conditionally; replay and tests call it
// directly. Its importers: engine, scheduler, tests.
package decide

import (
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/projections"
)

// Decision is what a command decides: the events to append under Expect,
// and the reply to give once they are stored (its Accepted, Seq and Events
// are filled by the writer after the append).
//
// Expect always names the sequence the decision read as its LastSeq: the
// fencing token. A decision holds on exactly the stream it was made on, so
// an append decided on a stale view (a deposed writer, a lagging replica)
// fails and is decided again; nothing another writer stored in between can
// be overlooked, whatever subject it is on. Expect.Subjects is the finer
// condition: the subjects the decision's outcome depends on. A writer that
// appends several decisions made on one view one after another (the
// engine's group commit of independent completions) moves LastSeq past its
// own earlier appends of that group and no further; it may do so only for
// decisions none of whose Subjects those appends write.
type Decision struct {
	Events []events.Payload
	Expect events.Expect
	Reply  commands.Reply
}

// Decide decides cmd against st (the state at st.Seq): the events to
// append, the condition they are appended under, and the reply once they
// are stored. A command id already in st.Commands gets its recorded reply
// and no events when it was recorded with cmd's digest (a retry), and an
// idempotency_conflict naming the id when with another one (another kind
// or body). It reads nothing but its arguments; cmd's At is its clock and
// must be set.
func Decide(st *projections.State, cmd commands.Command) (Decision, error) {
	d, err := decideCommand(st, cmd)
	if err == nil && len(d.Events) > 0 {
		seq := st.Seq
		d.Expect.LastSeq = &seq
	}
	return d, err
}

func decideCommand(st *projections.State, cmd commands.Command) (Decision, error) {
	if c, ok := cmd.(*commands.CheckWork); ok {
		// A question, recorded nowhere: its id is never a duplicate.
		if _, err := complete(st, &c.CompleteIntervals); err != nil {
			return Decision{}, err
		}
		return Decision{Reply: commands.Reply{Message: "complete_work with these fields would be recorded now"}}, nil
	}
	id := cmd.Header().ID
	if rec, ok := st.Commands[id]; ok {
		if rec.Digest != "" && rec.Digest != commands.Digest(cmd) {
			return Decision{}, commands.Errorf(commands.CodeIdempotencyConflict, "id",
				"command id %q was used by another command (another kind or body), recorded at seq %d: nothing was done; a retry must send the same command, a new command needs a new id", id, rec.Seq)
		}
		return Decision{Reply: duplicate(st, cmd, rec.Seq)}, nil
	}
	switch c := cmd.(type) {
	case *commands.RegisterSnapshot:
		return register(st, c)
	case *commands.RegisterSnapshots:
		return registerSet(st, c)
	case *commands.BuildPlan:
		return buildPlan(st, c)
	case *commands.CompleteIntervals:
		return complete(st, c)
	case *commands.InvalidateIntervals:
		return invalidate(st, c)
	case *commands.AdvanceScheduler:
		return advance(st, c)
	case *commands.Promote:
		return promote(st, c)
	case *commands.Finalize:
		return finalize(st, c)
	case *commands.FailRun:
		return failRun(st, c)
	case *commands.CompleteWork:
		return complete(st, &c.CompleteIntervals)
	case *commands.FailWork:
		return failRun(st, &c.FailRun)
	case *commands.RetireTables:
		return retire(st, c)
	case *commands.CancelPlan:
		return cancelPlan(st, c)
	case *commands.Rollback:
		return rollback(st, c)
	case *commands.Restate:
		return restate(st, c)
	}
	return Decision{}, commands.Errorf(commands.CodeInvalid, "kind", "unsupported command %T", cmd)
}

// duplicate is the reply to a command whose id st already applied (its
// last event is at seq): what the command got the first time, with
// Duplicate set and nothing appended.
func duplicate(st *projections.State, cmd commands.Command, seq uint64) commands.Reply {
	r := commands.Reply{Accepted: true, Duplicate: true, Seq: seq, Message: "command already applied"}
	switch c := cmd.(type) {
	case *commands.Promote:
		pl, ok := st.Plans[c.Plan]
		if !ok {
			break
		}
		if d := pl.DecidedAt(seq); d != nil {
			dd := *d
			r.Decision = &dd
		} else if pl.CatchUp != nil && seq >= pl.CatchUpSeq {
			req := *pl.CatchUp
			r.CatchUp = &req
		}
	case *commands.BuildPlan:
		if pl, ok := st.Plans[c.Plan]; ok {
			b := pl.Built
			r.Plan = &b
		}
	case *commands.Rollback:
		r.Rollback = rolledBackAt(st, c.Env, seq)
	case *commands.Restate:
		run := events.RestateRunID(c.ID)
		for _, req := range st.Restatements {
			if req.Run == run {
				rr := *req
				r.Restatement = &rr
			}
		}
	}
	return r
}

func single(st *projections.State, p events.Payload) Decision {
	return Decision{Events: []events.Payload{p}, Expect: events.ExpectSubjects(st.SubjectSeq, p.Subject())}
}
