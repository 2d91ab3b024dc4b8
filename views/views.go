// Package views answers what readers ask of a state: the status of the
// environments (Status), the open repair debts (OpenRepairs, Debts), the
// queries the engine serves (Answer) and what a plan's diff compares
// (DiffTargets).
//
// Invariants: every function reads only its arguments — a
// *projections.State it does not modify, and the clock reading at that
// the caller passes — so the same state and clock give the same answer,
// byte for byte, wherever it is asked. No NATS, no I/O, no clock, no
// randomness. A debt's missing intervals are computed once, by Debts,
// for both the status replies and the engine's repair-debt gauges.
//
// Importers: engine (queries and metrics), web (the dashboard),
// work/sqlrun (diff) and cmd/tidemark (status over a folded stream).
package views

import (
	"fmt"
	"sort"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// Status summarises the environments of st (one when env is set): each
// incumbent with its frontier, what it misses, its last tick, open repair
// debt, failed runs, readiness frontier and whether it is late and why
// (late.go); and the open repair debts, measured at clock at.
func Status(st *projections.State, env string, at time.Time) ([]commands.EnvStatus, []commands.Repair) {
	out := []commands.EnvStatus{}
	names := make([]string, 0, len(st.Envs))
	for n := range st.Envs {
		if env == "" || n == env {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	repairs := OpenRepairs(st, env, at)
	for _, n := range names {
		e := st.Envs[n]
		es := commands.EnvStatus{Env: n, Generation: e.Generation, Finalized: e.Finalized, Models: []commands.ModelStatus{}}
		lateModels := map[string]bool{}
		for _, m := range st.DependencyOrder(n) {
			id := e.Incumbents[m]
			cov := st.SnapshotCoverage(id)
			ms := commands.ModelStatus{Model: m, Snapshot: id, Frontier: st.Frontier(id), LastTick: e.LastTick[m], Missing: []interval.Range{}}
			if sn, ok := st.Snapshots[id]; ok && !ms.Frontier.IsZero() {
				if start := sn.Schedule.Unit().Floor(sn.Start); start.Before(ms.Frontier) {
					ms.Missing = nonNilRanges(cov.Missing(interval.R(start, ms.Frontier)))
				}
			}
			for _, r := range repairs {
				if r.Env == n && r.Model == m {
					ms.OpenRepairs++
				}
			}
			if f := st.Failures[id]; f != nil {
				ms.Failures = f.Count
				last := Failure(m, f.Last, f.LastSeq)
				ms.LastFailure = &last
			}
			ms.Audits = FailedAudits(st, m, id, everything)
			if sn, ok := st.Snapshots[id]; ok {
				late(st, &ms, sn, at, lateModels)
			}
			es.Models = append(es.Models, ms)
		}
		out = append(out, es)
	}
	return out, repairs
}

// everything is every time a range may hold.
var everything = interval.NewSet(interval.R(events.MinTime, events.MaxTime))

// FailedAudits lists the audits of snapshot (of model) whose latest result
// failed on a range of window, by audit name; nil when none.
func FailedAudits(st *projections.State, model, snapshot string, window interval.Set) []commands.AuditStatus {
	var out []commands.AuditStatus
	for _, f := range st.FailedAudits(snapshot, window) {
		out = append(out, commands.AuditStatus{Model: model, Snapshot: snapshot, Audit: f.Audit, Blocking: f.Blocking,
			Ranges: f.Ranges, Count: f.Count, Error: f.Error})
	}
	return out
}

// OpenRepairs lists the open repair debts (of env, when set), oldest
// first, with what their tables still miss and their age at clock at.
func OpenRepairs(st *projections.State, env string, at time.Time) []commands.Repair {
	out := []commands.Repair{}
	for _, d := range Debts(st, env) {
		out = append(out, commands.Repair{
			Env: d.Env, Plan: d.Plan, Model: d.Model, Snapshot: d.Snapshot, Table: d.Table, Ranges: d.Ranges,
			Missing: nonNilRanges(d.Missing), OpenedAt: d.OpenedAt, OpenSeq: d.OpenSeq, OpenForMS: at.Sub(d.OpenedAt).Milliseconds(),
		})
	}
	return out
}

// Debt is one open repair debt with what its table still misses.
type Debt struct {
	*projections.Repair
	// Missing is the part of the debt's ranges its table does not cover.
	Missing interval.Set
	// Intervals counts Missing in the unit of the debt's snapshot (0 when
	// the snapshot is unknown).
	Intervals int
}

// Debts lists the open repair debts of st (of env, when set), oldest
// first, each with what its table still misses.
func Debts(st *projections.State, env string) []Debt {
	var out []Debt
	for _, r := range st.OpenRepairs() {
		if env != "" && r.Env != env {
			continue
		}
		d := Debt{Repair: r}
		sn := st.Snapshots[r.Snapshot]
		for _, gap := range r.Ranges {
			miss := st.Table(r.Table).Missing(gap)
			d.Missing = d.Missing.AddSet(miss)
			for _, m := range miss {
				if sn != nil {
					d.Intervals += sn.Schedule.Unit().Count(m)
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// DebtTotals sums debts: how many there are, their missing intervals, and
// when the oldest was opened (zero when there is none).
func DebtTotals(debts []Debt) (open, intervals int, oldest time.Time) {
	for _, d := range debts {
		intervals += d.Intervals
		if oldest.IsZero() || d.OpenedAt.Before(oldest) {
			oldest = d.OpenedAt
		}
	}
	return len(debts), intervals, oldest
}

// Answer runs a query (Status or OpenRepairs) against st at clock at;
// Status also lists the plans in flight (InFlight) and the restatements
// in flight (Restating). An
// unknown environment is a CodeNotFound *commands.Error, another query a
// CodeInvalid one. The reply's Accepted and Seq are the caller's to set.
func Answer(st *projections.State, q commands.Query, at time.Time) (commands.Reply, error) {
	env := ""
	switch c := q.(type) {
	case *commands.OpenRepairs:
		env = c.Env
	case *commands.Status:
		env = c.Env
	default:
		return commands.Reply{}, commands.Errorf(commands.CodeInvalid, "kind", "unsupported query %T", q)
	}
	if env != "" {
		if _, ok := st.Envs[env]; !ok {
			return commands.Reply{}, commands.Errorf(commands.CodeNotFound, "env", "environment %q has no promoted models", env)
		}
	}
	var r commands.Reply
	if _, ok := q.(*commands.Status); ok {
		r.Envs, r.Repairs = Status(st, env, at)
		r.Plans = Plans(st, env)
		r.Retired = Retired(st)
		r.Restatements = Restating(st, env)
		r.Message = fmt.Sprintf("%d environment(s), %d open repair debt(s), %d plan(s) in flight", len(r.Envs), len(r.Repairs), len(r.Plans))
		if len(r.Restatements) > 0 {
			r.Message += fmt.Sprintf(", %d restatement(s) in flight", len(r.Restatements))
		}
		if len(r.Retired) > 0 {
			r.Message += fmt.Sprintf(", %d retired table(s)", len(r.Retired))
		}
		return r, nil
	}
	r.Repairs = OpenRepairs(st, env, at)
	r.Message = fmt.Sprintf("%d open repair debt(s)", len(r.Repairs))
	return r, nil
}

// Retired lists the retired snapshot tables (TableRetired, not taken back
// by a later plan), by table.
func Retired(st *projections.State) []commands.RetiredTable {
	out := make([]commands.RetiredTable, 0, len(st.Retired))
	for t, r := range st.Retired {
		out = append(out, commands.RetiredTable{Table: t, Snapshots: r.Event.Snapshots, Seq: r.Seq, JudgedAt: r.Event.JudgedAt, Reason: r.Event.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// Failure is a RunFailed of model at seq as status shows it: its error
// text bounded (commands.MaxFailureText).
func Failure(model string, f events.RunFailed, seq uint64) commands.RunFailure {
	return commands.RunFailure{Model: model, Snapshot: f.Snapshot, RunKind: f.RunKind, Error: commands.BoundText(f.Error, commands.MaxFailureText),
		Attempt: f.Attempt, Final: f.Final, Seq: seq}
}

func nonNilRanges(s interval.Set) []interval.Range {
	if s == nil {
		return []interval.Range{}
	}
	return s
}
