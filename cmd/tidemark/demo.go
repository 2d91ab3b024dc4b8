package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/scenario"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

// demoScenario is the hourly race: a plan is built at 10:00, backfilled,
// and promoted at 11:07, after the scheduler completed 10:00-11:00 for the
// incumbent. Afterwards a lagging scheduler replica that still read
// generation 1 tries to advance the env, and the stream is replayed.
const demoScenario = `
name: the hourly race (%[1]s)
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-11-30T00:00:00Z
    time_column: ts
    grain: [ts]
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range %% 7 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
    audits:
      - number_of_rows: {threshold: 1}
      - name: full_hours
        sql: SELECT date_trunc('hour', ts) AS hour, count(*) AS page_views FROM @this_model GROUP BY 1 HAVING count(*) < 60 ORDER BY 1
        blocking: false
  - name: rollup
    cron: "@daily"
    start: 2026-11-30T00:00:00Z
    depends_on: [events]
    time_column: day
    grain: [day]
    sql: |
      SELECT date_trunc('day', ts) AS day, count(*) AS views, count(DISTINCT user_id) AS users
      FROM events WHERE ts >= @start_ts AND ts < @end_ts GROUP BY 1
steps:
  - deploy: {env: prod, versions: {events: v1, rollup: v1}}
  - run_scheduler: {env: prod, until: 2026-12-01T10:00:00Z}
  - plan:
      id: p1
      env: prod
      versions:
        events:
          version: v2
          sql: "SELECT h.h + to_minutes(CAST(2 * r.range AS BIGINT)) AS ts, CAST(r.range %% 5 AS BIGINT) AS user_id FROM range(0, 30) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)"
%[2]s
  - backfill: {plan: p1}
  - run_scheduler: {env: prod, until: 2026-12-01T11:07:00Z}
  - promote: {plan: p1}
  - run_scheduler: {env: prod, until: 2026-12-01T12:00:00Z, generation: 1}
  - replay: {}
`

var demoPolicies = []struct{ name, params, about string }{
	{"strict", "", "the candidate must cover everything the incumbent covers now"},
	{"trailing-gap", "      max_trailing_gap_advances: 1", "promote although the candidate misses a trailing suffix made by at most 1 scheduler advance"},
	{"catch-up", "      max_catch_up_advances: 1", "backfill the newly missing suffix right before promotion, then check strictly"},
}

// demoRun is what the demo keeps of one policy's run for the comparison.
type demoRun struct {
	promote, after, replay scenario.StepResult
	// gapHour is prod.events' rows for 10:00-11:00 right after the
	// promotion step.
	gapHour string
}

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Play the hourly scheduler race under each promotion policy, with real rows, and explain the decisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			runs := make([]demoRun, len(demoPolicies))
			for i, p := range demoPolicies {
				f, err := scenario.Parse("demo", []byte(fmt.Sprintf(demoScenario, p.name, p.params)))
				if err != nil {
					return err
				}
				wh, closeWH, err := demoWarehouse(cmd.Context())
				if errors.Is(err, warehouse.ErrNoCgo) {
					return errors.New("demo: this build has no cgo, so no DuckDB: the demo's models are SQL, which DuckDB's parser checks and its embedded warehouse computes; build with cgo (CGO_ENABLED=1 and a C compiler)")
				} else if err != nil {
					return err
				}
				if i == 0 {
					demoIntro(out)
				}
				fmt.Fprintf(out, "\n== policy: %s (%s)\n", p.name, p.about)
				opts := scenario.Options{Warehouse: wh, DiffBeforePromote: true, OnStep: func(sr scenario.StepResult) {
					narrate(out, sr, i == 0)
					switch {
					case sr.Kind == "promote":
						runs[i].promote = sr
					case sr.Kind == "run_scheduler" && sr.Step == 7:
						runs[i].after = sr
					case sr.Kind == "replay":
						runs[i].replay = sr
					}
					switch {
					case sr.Step == 5:
						showRows(cmd.Context(), out, wh, "prod before the promotion")
					case sr.Kind == "promote":
						runs[i].gapHour = showRows(cmd.Context(), out, wh, "prod after the promotion")
					case sr.Step == 7:
						showRows(cmd.Context(), out, wh, "prod at 12:00")
					case sr.Kind == "replay":
						showVerify(out, sr)
					}
				}}
				_, err = scenario.Run(cmd.Context(), f, opts)
				closeWH()
				if err != nil {
					return err
				}
			}
			fmt.Fprintln(out, "\n== side by side")
			compare(out, runs)
			return nil
		},
	}
}

// demoIntro says what the demo plays.
func demoIntro(out io.Writer) {
	fmt.Fprintln(out, "tidemark demo: the scheduler race")
	fmt.Fprintln(out, "A plan rebuilds model `events` (hourly, generated page views: v1 60 rows/hour from 7 users,")
	fmt.Fprintln(out, "v2 30 rows/hour from 5 users) while the scheduler keeps running v1 in prod; the daily `rollup`")
	fmt.Fprintln(out, "reads events. The plan is built at 10:00 and backfilled to the frontier it captured; at 11:00")
	fmt.Fprintln(out, "the scheduler completes 10:00-11:00 for v1; the promotion is evaluated at 11:07. At 12:00 a")
	fmt.Fprintln(out, "scheduler replica that still read generation 1 (v1 serving) tries to advance prod.")
	fmt.Fprintln(out, "events declares audits, run on every batch the worker writes: the built-in number_of_rows, which")
	fmt.Fprintln(out, "both versions pass, and a custom full_hours (an hour has 60 page views), non-blocking: v2 fails it,")
	fmt.Fprintln(out, "which warns (audit_warning) without deciding anything. events and rollup declare a grain (their")
	fmt.Fprintln(out, "key: ts, day), so the diff of the plan taken before the promotion shows which keys changed.")
}

// demoWarehouse opens a DuckDB warehouse in a fresh temporary directory;
// closeWH closes it and removes the directory.
func demoWarehouse(ctx context.Context) (wh *warehouse.Warehouse, closeWH func(), err error) {
	dir, err := os.MkdirTemp("", "tidemark-demo-*")
	if err != nil {
		return nil, nil, err
	}
	wh, err = warehouse.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), warehouse.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return wh, func() { wh.Close(); os.RemoveAll(dir) }, nil
}

// demoHours are the hours of prod.events the demo shows.
var demoHours = []string{"08:00", "09:00", "10:00", "11:00"}

// showRows prints prod.events' rows per hour (and distinct users) for
// demoHours and prod.rollup's rows, read from prod's views. It returns the
// 10:00 cell.
func showRows(ctx context.Context, w io.Writer, wh *warehouse.Warehouse, title string) string {
	fmt.Fprintf(w, "         %s:\n", title)
	_, rows, err := wh.Query(ctx, "SELECT strftime(date_trunc('hour', ts), '%H:%M'), count(*), count(DISTINCT user_id) FROM prod.events WHERE ts >= TIMESTAMP '2026-12-01 08:00:00' GROUP BY 1")
	if err != nil {
		fmt.Fprintf(w, "           prod.events: %v\n", err)
		return ""
	}
	cell := map[string]string{}
	for _, r := range rows {
		cell[fmt.Sprint(r[0])] = fmt.Sprintf("%v rows/%v users", r[1], r[2])
	}
	var cells []string
	for _, h := range demoHours {
		cells = append(cells, h+" "+orDash(cell[h]))
	}
	fmt.Fprintf(w, "           prod.events  %s\n", strings.Join(cells, " | "))
	_, rows, err = wh.Query(ctx, "SELECT strftime(day, '%Y-%m-%d'), views, users FROM prod.rollup ORDER BY day")
	if err != nil {
		fmt.Fprintf(w, "           prod.rollup: %v\n", err)
		return orDash(cell["10:00"])
	}
	var days []string
	for _, r := range rows {
		days = append(days, fmt.Sprintf("%v %v views/%v users", r[0], r[1], r[2]))
	}
	fmt.Fprintf(w, "           prod.rollup  %s\n", orDash(strings.Join(days, " | ")))
	return orDash(cell["10:00"])
}

// showVerify prints the replay step's verify of prod: each SQL model
// recomputed over what its table covers and compared with prod's view.
func showVerify(w io.Writer, sr scenario.StepResult) {
	var n int64
	for _, d := range sr.Verify {
		n += d.OnlyInView + d.OnlyInRecompute
	}
	fmt.Fprintf(w, "         verify prod (%s recomputed, compared with prod's views): %d differing rows\n",
		strings.Join(slices.Sorted(maps.Keys(sr.Verify)), ", "), n)
}

// narrate prints a step for people; full (the first policy's run) adds
// what is the same under every policy: the audits' failing rows and the
// whole diff.
func narrate(w io.Writer, sr scenario.StepResult, full bool) {
	at := sr.Clock.Format("15:04")
	switch sr.Kind {
	case "deploy":
		fmt.Fprintf(w, "  %s  deploy events v1 and rollup v1 to prod: backfilled to its readiness frontier, %s (%s)\n", at, sr.Outcome, strings.Join(sr.Codes, ", "))
		narrateAudits(w, sr.Audits, full)
	case "run_scheduler":
		fmt.Fprintf(w, "  %s  scheduler ran every hourly tick up to now; the built-in worker completed the work (seq %d)\n", at, sr.Seq)
		if sr.Fenced > 0 {
			fmt.Fprintf(w, "         fenced: %d advance from the stale replica rejected (stale_generation, nothing appended); it re-read and scheduled the new incumbent\n", sr.Fenced)
		}
		for _, rc := range sr.RepairsClosed {
			fmt.Fprintf(w, "         repair debt closed: %s now covers %s, %s of simulated time after the promotion (RepairCompleted)\n",
				rc.Snapshot, strings.Join(rc.Ranges, ", "), time.Duration(rc.LatencyMS)*time.Millisecond)
		}
	case "plan":
		fmt.Fprintf(w, "  %s  plan p1 built: candidate events@v2 (and rollup@v1+p1, reading it), captured the incumbents and their frontier\n", at)
	case "backfill":
		fmt.Fprintf(w, "  %s  backfill of p1 done: events@v2 and rollup@v1+p1 cover up to the captured frontier\n", at)
		narrateAudits(w, sr.Audits, full)
	case "promote":
		if sr.Diff != nil {
			narrateDiff(w, at, *sr.Diff, full)
		}
		for _, m := range slices.Sorted(maps.Keys(sr.CatchUp)) {
			fmt.Fprintf(w, "  %s  catch-up: computed %s for %s (run kind catch_up), then retried the strict check\n", at, strings.Join(sr.CatchUp[m], ", "), m)
		}
		narrateAudits(w, sr.Audits, full)
		fmt.Fprintf(w, "  %s  promote p1: %s [%s] (stream at seq %d, open repair debt: %d)\n", at, strings.ToUpper(sr.Outcome), strings.Join(sr.Codes, ", "), sr.Seq, sr.RepairsOpen)
		for _, f := range sr.Findings {
			fmt.Fprintf(w, "         %s: %s\n", f.Code, f.Message)
		}
		if sr.Outcome == "accepted" && sr.RepairsOpen > 0 {
			for _, m := range slices.Sorted(maps.Keys(sr.Scheduled)) {
				fmt.Fprintf(w, "         repair issued with the acceptance: %s %s (run kind repair; the worker runs it before the next tick)\n", m, strings.Join(sr.Scheduled[m], ", "))
			}
		}
	case "replay":
		n := 0
		if sr.Divergences != nil {
			n = *sr.Divergences
		}
		fmt.Fprintf(w, "  %s  replayed the stream and re-evaluated every decision: %d divergence(s)\n", at, n)
	}
}

// demoIndent is the indent of the lines under a step's line.
const demoIndent = "         "

// narrateAudits prints the audit results a step recorded, per snapshot:
// each audit passed or failed over the step's batches, with its count
// (number_of_rows: the rows found; the others: the violating rows); with
// full, each failed audit's first sample row too.
func narrateAudits(w io.Writer, recs []events.AuditRecorded, full bool) {
	type result struct {
		name, sample     string
		passed, blocking bool
		count            int64
	}
	var snaps []string
	ranges := map[string]interval.Set{}
	batches := map[string]int{}
	results := map[string][]*result{}
	for _, a := range recs {
		if _, ok := ranges[a.Snapshot]; !ok {
			snaps = append(snaps, a.Snapshot)
		}
		ranges[a.Snapshot] = ranges[a.Snapshot].AddSet(interval.NewSet(a.Ranges...))
		var res *result
		for _, r := range results[a.Snapshot] {
			if r.name == a.Audit {
				res = r
			}
		}
		if res == nil {
			res = &result{name: a.Audit, passed: true, blocking: a.Blocking}
			results[a.Snapshot] = append(results[a.Snapshot], res)
		}
		if res.name == results[a.Snapshot][0].name {
			batches[a.Snapshot]++
		}
		res.count += a.Count
		if !a.Passed {
			res.passed = false
			if res.sample == "" {
				res.sample = auditSample(a.AuditOutcome)
			}
		}
	}
	for _, sn := range snaps {
		var parts []string
		for _, r := range results[sn] {
			switch {
			case r.name == "number_of_rows" && r.passed:
				parts = append(parts, fmt.Sprintf("%s passed (%s)", r.name, nRows(r.count)))
			case r.passed:
				parts = append(parts, r.name+" passed")
			case r.blocking:
				parts = append(parts, fmt.Sprintf("%s FAILED (blocking, %s)", r.name, nRows(r.count)))
			default:
				parts = append(parts, fmt.Sprintf("%s FAILED (non-blocking: a warning, %s)", r.name, nRows(r.count)))
			}
		}
		n := fmt.Sprintf("%d batches", batches[sn])
		if batches[sn] == 1 {
			n = "1 batch"
		}
		fmt.Fprintf(w, "%saudits of %s over %s (%s): %s\n", demoIndent, sn, strings.Join(ranges[sn].Strings(), ", "), n, strings.Join(parts, "; "))
		for _, r := range results[sn] {
			if full && r.sample != "" {
				fmt.Fprintf(w, "%s  first failing row of %s: %s\n", demoIndent, r.name, r.sample)
			}
		}
	}
}

// auditSample is an audit outcome's first sample row, column=value.
func auditSample(o events.AuditOutcome) string {
	if len(o.Sample) == 0 {
		return o.Error
	}
	var kv []string
	for i, v := range o.Sample[0] {
		c := "?"
		if i < len(o.Columns) {
			c = o.Columns[i]
		}
		kv = append(kv, c+"="+v)
	}
	return strings.Join(kv, " ")
}

// demoDiffSamples is how many changed rows per model the demo shows.
const demoDiffSamples = 3

// narrateDiff prints the plan's diff taken before the promotion: with
// full, as `tidemark diff` prints it (printDiff, fewer samples),
// otherwise its counts on one line.
func narrateDiff(w io.Writer, at string, rep sqlrun.DiffReply, full bool) {
	if !full {
		var parts []string
		for _, m := range rep.Models {
			if d := m.TableDiff; d != nil {
				parts = append(parts, fmt.Sprintf("%s %s against %d, %d changed", m.Model, nRows(d.CandidateRows), d.IncumbentRows, d.Changed))
			}
		}
		fmt.Fprintf(w, "  %s  diff %s before promoting, as under %s: %s\n", at, rep.Plan, demoPolicies[0].name, strings.Join(parts, "; "))
		return
	}
	fmt.Fprintf(w, "  %s  diff %s before promoting (what `tidemark diff %s` prints):\n", at, rep.Plan, rep.Plan)
	// The CLI gets the reply as JSON (times as RFC 3339 text): so does this.
	if b, err := json.Marshal(rep); err == nil {
		var back sqlrun.DiffReply
		if json.Unmarshal(b, &back) == nil {
			rep = back
		}
	}
	for i, m := range rep.Models {
		if m.TableDiff != nil && len(m.TableDiff.Samples) > demoDiffSamples {
			d := *m.TableDiff
			d.Samples = d.Samples[:demoDiffSamples]
			rep.Models[i].TableDiff = &d
		}
	}
	var b strings.Builder
	printDiff(&b, rep)
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", demoIndent, line)
	}
	fmt.Fprintf(w, "%s(v2 keeps the even minutes and numbers users mod 5, not 7: v1's odd minutes are only in the\n", demoIndent)
	fmt.Fprintf(w, "%s incumbent, and most even minutes changed user_id; rollup's day changed both counts)\n", demoIndent)
}

// compare prints the three runs as columns.
func compare(w io.Writer, runs []demoRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	row := func(label string, cell func(demoRun) string) {
		cells := []string{label}
		for _, r := range runs {
			cells = append(cells, cell(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	head := []string{""}
	for _, p := range demoPolicies {
		head = append(head, p.name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	row("decision at 11:07", func(r demoRun) string { return r.promote.Outcome })
	row("codes", func(r demoRun) string { return strings.Join(r.promote.Codes, ", ") })
	row("catch-up backfill", func(r demoRun) string { return orDash(strings.Join(r.promote.CatchUp["events"], ", ")) })
	row("events@v2 missing", func(r demoRun) string { return orDash(strings.Join(r.promote.Models["events"].Missing, ", ")) })
	row("repair debt at 11:07", func(r demoRun) string { return fmt.Sprint(r.promote.RepairsOpen) })
	row("repair debt at 12:00", func(r demoRun) string { return fmt.Sprint(r.after.RepairsOpen) })
	row("stale advances fenced", func(r demoRun) string { return fmt.Sprint(r.after.Fenced) })
	row("prod.events 10:00 after promote", func(r demoRun) string { return r.gapHour })
	row("verify: differing rows", func(r demoRun) string {
		var n int64
		for _, d := range r.replay.Verify {
			n += d.OnlyInView + d.OnlyInRecompute
		}
		return fmt.Sprint(n)
	})
	row("replay divergences", func(r demoRun) string {
		if r.replay.Divergences == nil {
			return "-"
		}
		return fmt.Sprint(*r.replay.Divergences)
	})
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
