package views

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/models"
	"github.com/tidemark/tidemark/projections"
)

// Lateness (issue 32). A model is late in an env when its incumbent's
// frontier trails its readiness frontier at the clock by more than its
// freshness bound (models.Freshness: one interval of its unit unless the
// version sets one). Nothing ready yet is never late. The reason, when
// known, is the first of: the incumbent's last run failed and no run
// computed its ranges since (its text, FailureStands);
// a model it depends on is late; no worker is live (the caller knows,
// NoWorker). The default bound lets a tick's work be in flight: at a
// tick the readiness frontier moves one interval on, and the model is
// late only once a second tick passes with that work not done.

// late fills ms's Ready, Late, LateCause and LateReason for incumbent sn
// at clock at; lateModels holds the env's models already found late (the
// upstream ones: Status walks the env in dependency order).
func late(st *projections.State, ms *commands.ModelStatus, sn *projections.Snapshot, at time.Time, lateModels map[string]bool) {
	if sn.Schedule.IsZero() {
		return
	}
	ready := sn.Schedule.Ready(sn.Start, at)
	if ready.Empty() {
		return
	}
	ms.Ready = ready.End
	frontier := ms.Frontier
	if frontier.IsZero() {
		frontier = ready.Start // nothing covered: it trails from its start
	}
	f, err := models.ParseFreshness(sn.Freshness)
	if err != nil {
		f = models.Freshness{} // registered unchecked (before freshness existed): the default
	}
	oldest := f.Oldest(sn.Schedule.Unit(), ready.End)
	if !frontier.Before(oldest) {
		return
	}
	ms.Late = true
	lateModels[sn.Model] = true
	behind := fmt.Sprintf("frontier %s is behind its readiness frontier %s by more than %s",
		stamp(frontier), stamp(ready.End), f)
	if fl := st.Failures[sn.Snapshot]; fl != nil && FailureStands(st, sn.Snapshot) {
		ms.LateCause = commands.LateFailed
		ms.LateReason = fmt.Sprintf("last run failed (seq %d): %s; %s", fl.LastSeq,
			commands.BoundText(fl.Last.Error, commands.MaxFailureText), behind)
		return
	}
	for _, dep := range sn.DependsOn {
		if lateModels[dep] {
			ms.LateCause = commands.LateUpstream
			ms.LateReason = fmt.Sprintf("upstream %s is late; %s", dep, behind)
			return
		}
	}
	ms.LateReason = behind
}

// FailureStands reports whether snapshot id's last failed run still
// stands: some of the ranges it failed are not covered by its table (a
// later run that computed them overcame it), or it named none. False
// when it never failed.
func FailureStands(st *projections.State, id string) bool {
	fl := st.Failures[id]
	if fl == nil {
		return false
	}
	if len(fl.Last.Ranges) == 0 {
		return true
	}
	cov := st.SnapshotCoverage(id)
	for _, r := range fl.Last.Ranges {
		if len(cov.Missing(r)) > 0 {
			return true
		}
	}
	return false
}

// NoWorker gives the late models of envs that have no cause yet the cause
// LateNoWorker: for a caller that sees no live worker heartbeat (serve's
// roster). Only the caller knows the workers; views reads the state.
func NoWorker(envs []commands.EnvStatus) {
	for i := range envs {
		for j := range envs[i].Models {
			m := &envs[i].Models[j]
			if m.Late && m.LateCause == "" {
				m.LateCause = commands.LateNoWorker
				m.LateReason = "no worker heartbeat (start `tidemark worker`, or serve --builtin-worker); " + m.LateReason
			}
		}
	}
}

// AnyLate reports whether a model of envs is late.
func AnyLate(envs []commands.EnvStatus) bool {
	for _, e := range envs {
		for _, m := range e.Models {
			if m.Late {
				return true
			}
		}
	}
	return false
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
