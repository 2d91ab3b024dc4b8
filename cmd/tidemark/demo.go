package main

import (
	"context"
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
	"github.com/tidemark/tidemark/scenario"
	"github.com/tidemark/tidemark/warehouse"
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
    sql: |
      SELECT h.h + to_minutes(CAST(r.range AS BIGINT)) AS ts, CAST(r.range %% 7 AS BIGINT) AS user_id
      FROM range(0, 60) r, range(@start_ts, @end_ts, INTERVAL 1 HOUR) h(h)
  - name: rollup
    cron: "@daily"
    start: 2026-11-30T00:00:00Z
    depends_on: [events]
    time_column: day
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
	// promotion step ("" without a warehouse).
	gapHour string
}

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Play the hourly scheduler race under each promotion policy, with real rows, and explain the decisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "tidemark demo: the scheduler race")
			fmt.Fprintln(out, "A plan rebuilds model `events` (hourly, generated page views: v1 60 rows/hour from 7 users,")
			fmt.Fprintln(out, "v2 30 rows/hour from 5 users) while the scheduler keeps running v1 in prod; the daily `rollup`")
			fmt.Fprintln(out, "reads events. The plan is built at 10:00 and backfilled to the frontier it captured; at 11:00")
			fmt.Fprintln(out, "the scheduler completes 10:00-11:00 for v1; the promotion is evaluated at 11:07. At 12:00 a")
			fmt.Fprintln(out, "scheduler replica that still read generation 1 (v1 serving) tries to advance prod.")
			runs := make([]demoRun, len(demoPolicies))
			noCgo := false
			for i, p := range demoPolicies {
				f, err := scenario.Parse("demo", []byte(fmt.Sprintf(demoScenario, p.name, p.params)))
				if err != nil {
					return err
				}
				var wh *warehouse.Warehouse
				closeWH := func() {}
				if !noCgo {
					wh, closeWH, err = demoWarehouse(cmd.Context())
					if errors.Is(err, warehouse.ErrNoCgo) {
						noCgo, closeWH = true, func() {}
						fmt.Fprintln(out, "(rows are not shown: this build has no cgo, so no embedded DuckDB warehouse)")
					} else if err != nil {
						return err
					}
				}
				fmt.Fprintf(out, "\n== policy: %s (%s)\n", p.name, p.about)
				opts := scenario.Options{Warehouse: wh, OnStep: func(sr scenario.StepResult) {
					narrate(out, sr)
					switch {
					case sr.Kind == "promote":
						runs[i].promote = sr
					case sr.Kind == "run_scheduler" && sr.Step == 7:
						runs[i].after = sr
					case sr.Kind == "replay":
						runs[i].replay = sr
					}
					if wh == nil {
						return
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

func narrate(w io.Writer, sr scenario.StepResult) {
	at := sr.Clock.Format("15:04")
	switch sr.Kind {
	case "deploy":
		fmt.Fprintf(w, "  %s  deploy events v1 and rollup v1 to prod: backfilled to its readiness frontier, %s (%s)\n", at, sr.Outcome, strings.Join(sr.Codes, ", "))
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
	case "promote":
		for _, m := range slices.Sorted(maps.Keys(sr.CatchUp)) {
			fmt.Fprintf(w, "  %s  catch-up: computed %s for %s (run kind catch_up), then retried the strict check\n", at, strings.Join(sr.CatchUp[m], ", "), m)
		}
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
	if runs[0].gapHour != "" {
		row("prod.events 10:00 after promote", func(r demoRun) string { return r.gapHour })
		row("verify: differing rows", func(r demoRun) string {
			var n int64
			for _, d := range r.replay.Verify {
				n += d.OnlyInView + d.OnlyInRecompute
			}
			return fmt.Sprint(n)
		})
	}
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
