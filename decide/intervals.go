package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// checkRanges validates ranges against a snapshot's unit and start, and,
// for completions, that they have ended at the command's clock.
func checkRanges(sn *projections.Snapshot, rs []interval.Range, ended bool, at time.Time) (interval.Set, error) {
	u := sn.Schedule.Unit()
	start := u.Floor(sn.Start)
	field := func(i int) string { return fmt.Sprintf("ranges[%d]", i) }
	for i, r := range rs {
		if !u.Aligned(r.Start) || (!u.Aligned(r.End) && !sn.AllowPartials) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s is not aligned to the %s unit of %s", r, u, sn.Snapshot)
		}
		if r.Start.Before(start) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s starts before %s's start %s", r, sn.Snapshot, start.Format(time.RFC3339))
		}
		if ended && r.End.After(at) {
			return nil, commands.Errorf(commands.CodeInvalid, field(i), "range %s has not ended at %s", r, at.Format(time.RFC3339))
		}
	}
	return interval.NewSet(rs...), nil
}

func snapshotOf(st *projections.State, model, version string) (*projections.Snapshot, error) {
	sn, ok := st.Snapshots[events.SnapshotID(model, version)]
	if !ok {
		for _, s := range st.Snapshots {
			if s.Model == model {
				return nil, commands.Errorf(commands.CodeNotFound, "version", "model %s has no version %q", model, version)
			}
		}
		return nil, commands.Errorf(commands.CodeNotFound, "model", "unknown model %q", model)
	}
	return sn, nil
}

// rangesOf resolves the snapshot a completion or invalidation names and
// validates its ranges.
func rangesOf(st *projections.State, model, version string, rs []interval.Range, ended bool, at time.Time) (*projections.Snapshot, interval.Set, error) {
	sn, err := snapshotOf(st, model, version)
	if err != nil {
		return nil, nil, err
	}
	set, err := checkRanges(sn, rs, ended, at)
	return sn, set, err
}

// checkWork checks a report that names a work item (work, when not
// empty) against the item as the stream made it due: it must exist, have
// a step for the snapshot, and contain every range. It returns the run
// kind to record: kind, or the item's when kind is empty.
func checkWork(st *projections.State, work string, kind events.RunKind, sn *projections.Snapshot, rs []interval.Range) (events.RunKind, error) {
	if work == "" {
		return kind, nil
	}
	w, ok := st.Work[work]
	if !ok {
		if seq, _, _ := events.ParseWorkID(work); seq > st.Seq {
			// Issued from an event this view has not read yet (another
			// replica appended it): retrying will find it.
			return "", commands.Errorf(commands.CodeUnavailable, "work", "work item %s comes from seq %d; this engine has read up to seq %d: retry", work, seq, st.Seq)
		}
		return "", commands.Errorf(commands.CodeNotFound, "work", "no work item %s: the stream made no such work due", work)
	}
	if kind != "" && kind != w.RunKind {
		return "", commands.Errorf(commands.CodeInvalid, "run_kind", "run_kind %q: work item %s is %s work", kind, work, w.RunKind)
	}
	steps, ok := w.Steps[sn.Snapshot]
	if !ok {
		return "", commands.Errorf(commands.CodeInvalid, "work", "work item %s has no step for %s: report only the snapshots the item names", work, sn.Snapshot)
	}
	for i, r := range rs {
		if !steps.Covers(r) {
			return "", commands.Errorf(commands.CodeInvalid, fmt.Sprintf("ranges[%d]", i), "range %s is not part of work item %s, which asks %s for %d range(s) within %s", r, work, sn.Snapshot, len(steps), interval.R(steps.Start(), steps.Frontier()))
		}
	}
	return w.RunKind, nil
}

// complete merges ranges into the snapshot's table. A completion that
// closes repair debt carries its RepairCompleted in the same atomic batch,
// under the env's expected sequence too.
func complete(st *projections.State, c *commands.CompleteIntervals) (Decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, true, c.At)
	if err != nil {
		return Decision{}, err
	}
	if err := wholeRange(sn, set); err != nil {
		return Decision{}, err
	}
	kind, err := checkWork(st, c.Work, c.RunKind, sn, c.Ranges)
	if err != nil {
		return Decision{}, err
	}
	if err := notRetired(st, sn); err != nil {
		return Decision{}, err
	}
	if err := notForeign(st, kind, c.RunID, sn); err != nil {
		return Decision{}, err
	}
	if err := notCancelled(st, kind, c.RunID, sn); err != nil {
		return Decision{}, err
	}
	if err := notStale(st, c.Work); err != nil {
		return Decision{}, err
	}
	audits, err := auditsOf(sn, c.Audits)
	if err != nil {
		return Decision{}, err
	}
	if kind == "" {
		kind = events.RunManual
	}
	p := events.IntervalsCompleted{Snapshot: sn.Snapshot, Table: sn.Table, Ranges: set, RunKind: kind, RunID: c.RunID, Work: c.Work, Rows: c.Rows}
	payloads := []events.Payload{p}
	subjects := []string{p.Subject()}
	for _, o := range audits {
		// The snapshot's subject, which p already names.
		payloads = append(payloads, events.AuditRecorded{Snapshot: sn.Snapshot, Table: sn.Table, Ranges: set,
			Blocking: !o.NonBlocking, Work: c.Work, AuditOutcome: o.outcome})
	}
	for _, r := range st.RepairsClosedBy(sn.Table, set) {
		rc := r.Completed(c.At)
		payloads = append(payloads, rc)
		if !slices.Contains(subjects, rc.Subject()) {
			subjects = append(subjects, rc.Subject())
		}
	}
	return Decision{Events: payloads, Expect: events.ExpectSubjects(st.SubjectSeq, subjects...)}, nil
}

// wholeRange refuses a completion of a whole kind (full, view, seed;
// docs/kinds.md) that is not one range from the version's start: such a
// version is computed whole, never in part, so a completion says it was
// computed as of the range's end.
func wholeRange(sn *projections.Snapshot, set interval.Set) error {
	if !sn.Kind.Whole() || set.Empty() {
		return nil
	}
	start := sn.Schedule.Unit().Floor(sn.Start)
	if len(set) != 1 || !set[0].Start.Equal(start) {
		return commands.Errorf(commands.CodeInvalid, "ranges", "%s is a %s version, computed whole: a completion is one range from its start %s, not %s",
			sn.Snapshot, sn.Kind, start.Format(time.RFC3339), strings.Join(set.Strings(), ", "))
	}
	return nil
}

// declaredOutcome is an outcome with the definition of the audit it is of.
type declaredOutcome struct {
	outcome     events.AuditOutcome
	NonBlocking bool
}

// auditsOf pairs each outcome of a completion with the audit of sn it
// names: an outcome naming an audit sn does not declare is refused (the
// command's validation refused duplicates and bounds).
func auditsOf(sn *projections.Snapshot, os []events.AuditOutcome) ([]declaredOutcome, error) {
	out := make([]declaredOutcome, 0, len(os))
	for i, o := range os {
		j := slices.IndexFunc(sn.Audits, func(a events.Audit) bool { return a.Name == o.Audit })
		if j < 0 {
			names := make([]string, len(sn.Audits))
			for k, a := range sn.Audits {
				names[k] = a.Name
			}
			declared := "it declares none"
			if len(names) > 0 {
				declared = "it declares " + strings.Join(names, ", ")
			}
			return nil, commands.Errorf(commands.CodeInvalid, fmt.Sprintf("audits[%d].audit", i), "audits[%d].audit %q: %s declares no such audit (%s)", i, o.Audit, sn.Snapshot, declared)
		}
		out = append(out, declaredOutcome{outcome: o, NonBlocking: sn.Audits[j].NonBlocking})
	}
	return out, nil
}

func invalidate(st *projections.State, c *commands.InvalidateIntervals) (Decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, false, c.At)
	if err != nil {
		return Decision{}, err
	}
	return single(st, events.IntervalsInvalidated{Snapshot: sn.Snapshot, Table: sn.Table, Ranges: set, Reason: c.Reason}), nil
}

func failRun(st *projections.State, c *commands.FailRun) (Decision, error) {
	sn, set, err := rangesOf(st, c.Model, c.Version, c.Ranges, false, c.At)
	if err != nil {
		return Decision{}, err
	}
	if _, err := checkWork(st, c.Work, c.RunKind, sn, c.Ranges); err != nil {
		return Decision{}, err
	}
	return single(st, events.RunFailed{Snapshot: sn.Snapshot, Ranges: set, RunKind: c.RunKind, RunID: c.RunID, Worker: c.Worker,
		ExitStatus: c.ExitStatus, Error: commands.BoundText(c.Error, commands.MaxErrorText), StderrTail: c.StderrTail, Attempt: c.Attempt, Final: c.Final, Work: c.Work}), nil
}
