package sqlrun

import (
	"context"
	"slices"
	"sort"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/warehouse"
)

// VerifyEnv recomputes every SQL model env serves (or only model, when
// set) over each interval its table covers, and compares the rows with the
// env's view (warehouse.VerifyChecks: EXCEPT ALL both ways); a model
// computed whole is recomputed whole (wholeCheck), and a seed, which has
// no query, is left out. It returns a
// Diff per model; an empty Diff everywhere means the rows tidemark promoted
// are exactly what the models compute.
//
// Each interval is recomputed with the query of the snapshot that wrote
// it (warehouse.Writers, recorded with the rows): a forward-only version
// shares its incumbent's table and keeps the history its predecessor
// wrote, so that history is held to its predecessor's query, and the
// intervals the new version computed to the new one. A writer record
// counts only when its snapshot is registered, writes this table, and its
// query fingerprint equals the one the log defines for that snapshot. A
// covered interval with no such record (written before writers were
// recorded) is recomputed with the incumbent's query and counted in
// Diff.Unrecorded. A recorded interval whose writer read an upstream table
// the janitor has since retired cannot be recomputed: it is skipped and
// counted in Diff.Unverifiable (its rows stay in place, like any
// forward-only history; the tables it was computed from are gone).
func VerifyEnv(ctx context.Context, wh *warehouse.Warehouse, proj *live.Projection, env, model string) (map[string]warehouse.Diff, error) {
	type job struct {
		inc     warehouse.Model
		unit    interval.Unit
		cov     interval.Set
		writers map[string]warehouse.Model // every registered SQL snapshot that writes inc.Table
		// gone lists the writers that read a retired table.
		gone map[string]bool
	}
	var jobs []job
	var err error
	proj.Read(func(st *projections.State) {
		e := st.Envs[env]
		if e == nil {
			err = commands.Errorf(commands.CodeNotFound, "env", "no environment %q", env)
			return
		}
		for name, id := range e.Incumbents {
			if model != "" && name != model {
				continue
			}
			m, ok, merr := ModelOf(st, id)
			if merr != nil {
				err = merr
				return
			}
			if !ok || m.Kind == warehouse.KindSeed {
				continue // a seed has no query to recompute
			}
			sn := st.Snapshots[id]
			j := job{inc: m, unit: sn.Unit, cov: st.Coverage[sn.Table], writers: map[string]warehouse.Model{}, gone: map[string]bool{}}
			for wid, w := range st.Snapshots {
				if w.Table != sn.Table {
					continue
				}
				// A writer whose definition cannot be resolved is left
				// out: its intervals count as unrecorded.
				if wm, ok, werr := ModelOf(st, wid); werr == nil && ok {
					j.writers[wid] = wm
					up, _ := st.UpstreamOf(wid)
					for _, u := range up {
						if us, ok := st.Snapshots[u]; ok {
							if _, retired := st.Retired[us.Table]; retired {
								j.gone[wid] = true
							}
						}
					}
				}
			}
			jobs = append(jobs, j)
		}
		if model != "" && len(jobs) == 0 && err == nil {
			err = commands.Errorf(commands.CodeNotFound, "model", "%s serves no SQL model %q", env, model)
		}
	})
	if err != nil {
		return nil, err
	}
	out := map[string]warehouse.Diff{}
	for _, j := range jobs {
		recs, err := wh.Writers(ctx, j.inc.Table)
		if err != nil {
			return out, err
		}
		var checks []warehouse.Check
		var writers map[string]int
		var unrecorded, unverifiable int
		if j.inc.Whole() {
			checks, writers, unrecorded, unverifiable, err = wholeCheck(j.inc, j.cov, j.writers, j.gone, recs)
		} else {
			checks, writers, unrecorded, unverifiable, err = checksOf(j.inc, j.unit, j.cov, j.writers, j.gone, recs)
		}
		if err != nil {
			return out, err
		}
		d, err := wh.VerifyChecks(ctx, env, checks)
		if err != nil {
			return out, err
		}
		d.Writers, d.Unrecorded, d.Unverifiable = writers, unrecorded, unverifiable
		out[j.inc.Name] = d
	}
	return out, nil
}

// wholeCheck is the one check of a model computed whole: its whole view
// against the query of the snapshot whose computation it holds (its
// writer record, which a whole computation keeps one of), over that
// computation's bounds; without a usable record, against the incumbent's
// query over the span of its coverage (unrecorded 1); nothing when it
// covers nothing.
func wholeCheck(inc warehouse.Model, cov interval.Set, writers map[string]warehouse.Model, gone map[string]bool, recs []warehouse.Written) (checks []warehouse.Check, perWriter map[string]int, unrecorded, unverifiable int, err error) {
	for _, rec := range slices.Backward(recs) {
		m, ok := writers[rec.Snapshot]
		if !ok {
			continue
		}
		fp, err := warehouse.Fingerprint(m)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		if fp != rec.Fingerprint {
			continue
		}
		if gone[rec.Snapshot] {
			return nil, nil, 0, 1, nil
		}
		return []warehouse.Check{{Model: m, Query: rec.Query, Rows: rec.Query}}, map[string]int{rec.Snapshot: 1}, 0, 0, nil
	}
	if cov.Empty() {
		return nil, nil, 0, 0, nil
	}
	span := Span(cov.Ranges())
	rg := warehouse.Range{Start: span.Start, End: span.End}
	return []warehouse.Check{{Model: inc, Query: rg, Rows: rg}}, nil, 1, 0, nil
}

// checksOf turns a table's coverage and writer records into checks: each
// covered part of a record's interval against its writer's query, and
// every covered interval without a usable record against the incumbent's
// query, one unit interval at a time (unrecorded counts them). The covered
// parts of the records of a gone writer (one that read a retired table)
// make no check; unverifiable counts those records.
func checksOf(inc warehouse.Model, unit interval.Unit, cov interval.Set, writers map[string]warehouse.Model, gone map[string]bool, recs []warehouse.Written) (checks []warehouse.Check, perWriter map[string]int, unrecorded, unverifiable int, err error) {
	fingerprints := map[string]string{}
	var recorded interval.Set
	for _, rec := range recs {
		m, ok := writers[rec.Snapshot]
		if !ok {
			continue
		}
		fp, seen := fingerprints[rec.Snapshot]
		if !seen {
			if fp, err = warehouse.Fingerprint(m); err != nil {
				return nil, nil, 0, 0, err
			}
			fingerprints[rec.Snapshot] = fp
		}
		if fp != rec.Fingerprint {
			continue
		}
		holds := interval.R(rec.Holds.Start, rec.Holds.End)
		pieces := cov.Clip(holds)
		if gone[rec.Snapshot] {
			if len(pieces) > 0 {
				unverifiable++
			}
			recorded = recorded.Add(holds)
			continue
		}
		for _, p := range pieces {
			checks = append(checks, warehouse.Check{Model: m, Query: rec.Query, Rows: warehouse.Range{Start: p.Start, End: p.End}})
		}
		if len(pieces) > 0 {
			if perWriter == nil {
				perWriter = map[string]int{}
			}
			perWriter[rec.Snapshot]++
		}
		recorded = recorded.Add(holds)
	}
	for _, r := range Intervals(unit, cov.SubtractSet(recorded)) {
		rg := warehouse.Range{Start: r.Start, End: r.End}
		checks = append(checks, warehouse.Check{Model: inc, Query: rg, Rows: rg})
		unrecorded++
	}
	sort.SliceStable(checks, func(i, j int) bool { return checks[i].Rows.Start.Before(checks[j].Rows.Start) })
	return checks, perWriter, unrecorded, unverifiable, nil
}
