package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/engine/scenario"
)

// demoScenario is the hourly race: a plan is built at 10:00, backfilled,
// and promoted at 11:07, after the scheduler completed 10:00-11:00 for the
// incumbent.
const demoScenario = `
name: the hourly race (%[1]s)
clock: 2026-12-01T06:00:00Z
models:
  - name: events
    cron: "@hourly"
    start: 2026-12-01T00:00:00Z
steps:
  - deploy: {env: prod, versions: {events: v1}}
  - run_scheduler: {env: prod, until: 2026-12-01T10:00:00Z}
  - plan: {id: p1, env: prod, versions: {events: v2}%[2]s}
  - backfill: {plan: p1}
  - run_scheduler: {env: prod, until: 2026-12-01T11:07:00Z}
  - promote: {plan: p1}
  - run_scheduler: {env: prod, until: 2026-12-01T12:00:00Z}
  - replay: {}
`

var demoPolicies = []struct{ name, params, about string }{
	{"strict", "", "the candidate must cover everything the incumbent covers now"},
	{"trailing-gap allowance", ", max_trailing_gap_advances: 1", "promote although the candidate misses a trailing suffix made by at most 1 scheduler advance"},
	{"bounded catch-up", ", max_catch_up_advances: 1", "backfill the newly missing suffix right before promotion, then check strictly"},
}

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Play the hourly scheduler race under each promotion policy and explain the decisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "tidemark demo: the scheduler race")
			fmt.Fprintln(out, "A plan rebuilds model `events` (hourly) as v2 while the scheduler keeps running v1 in prod.")
			fmt.Fprintln(out, "The plan is built at 10:00 and backfilled to the frontier it captured; at 11:00 the scheduler")
			fmt.Fprintln(out, "completes 10:00-11:00 for v1; the promotion is evaluated at 11:07.")
			for _, p := range demoPolicies {
				fmt.Fprintf(out, "\n== policy: %s (%s)\n", p.name, p.about)
				f, err := scenario.Parse("demo", []byte(fmt.Sprintf(demoScenario, p.name, p.params)))
				if err != nil {
					return err
				}
				opts := scenario.Options{OnStep: func(sr scenario.StepResult) { narrate(out, sr) }}
				if _, err := scenario.Run(cmd.Context(), f, opts); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func narrate(w io.Writer, sr scenario.StepResult) {
	at := sr.Clock.Format("15:04")
	switch sr.Kind {
	case "deploy":
		fmt.Fprintf(w, "  %s  deploy events v1 to prod: backfilled to its readiness frontier, %s (%s)\n", at, sr.Outcome, strings.Join(sr.Codes, ", "))
	case "run_scheduler":
		fmt.Fprintf(w, "  %s  scheduler ran every hourly tick up to now; the built-in worker completed the work (seq %d)\n", at, sr.Seq)
	case "plan":
		fmt.Fprintf(w, "  %s  plan p1 built: candidate events@v2, captured incumbent events@v1 and its frontier\n", at)
	case "backfill":
		fmt.Fprintf(w, "  %s  backfill of p1 done: events@v2 covers up to the captured frontier\n", at)
	case "promote":
		verdict := strings.ToUpper(sr.Outcome)
		fmt.Fprintf(w, "  %s  promote p1: %s [%s] (stream at seq %d, open repair debt: %d)\n", at, verdict, strings.Join(sr.Codes, ", "), sr.Seq, sr.RepairsOpen)
		for m, r := range sr.Models {
			if len(r.Missing) > 0 {
				fmt.Fprintf(w, "         %s misses %s: %d scheduler advance(s) after the plan was built\n", m, strings.Join(r.Missing, ", "), r.Advances)
			}
		}
		for _, c := range sr.Codes {
			if why, ok := explanations[c]; ok {
				fmt.Fprintf(w, "         why: %s\n", why)
			}
		}
	case "replay":
		n := 0
		if sr.Divergences != nil {
			n = *sr.Divergences
		}
		fmt.Fprintf(w, "  %s  replayed the stream and re-evaluated every decision: %d divergence(s); open repair debt: %d\n", at, n, sr.RepairsOpen)
	}
}

var explanations = map[string]string{
	"no_gaps":               "the candidate covers every interval the incumbent covers now",
	"missing_intervals":     "strict policy: the candidate must cover everything the incumbent covers now; the scheduler won the race",
	"conflicting_plan":      "the environment changed (another promotion) since the plan was built",
	"policy_not_available":  "bounded catch-up is not in this build yet; the plan asked for a bound it cannot honour, so it is rejected rather than promoted unsafely",
	"trailing_gap_accepted": "the miss is one trailing suffix made by no more scheduler advances than allowed; it stays missing and is tracked as repair debt until the scheduler fills it",
	"caught_up":             "the missing suffix was backfilled right before promotion and the strict retry passed",
	"catch_up_exhausted":    "the scheduler advanced again during catch-up",
}
