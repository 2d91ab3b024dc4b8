package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/replay"
)

// newExplainCmd is `tidemark explain PLAN`, also `tidemark audit
// explain PLAN` (the decision pages print the first, with --at-seq the
// decision's sequence).
func newExplainCmd() *cobra.Command {
	var s storeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "explain PLAN",
		Short: "Print a plan's latest decision (as of --at-seq or --at) with its findings and the exact coverage it saw",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, closeStore, dmg, err := s.read(cmd)
			if err != nil {
				return err
			}
			defer closeStore()
			x, err := replay.Explain(recs, args[0])
			if err != nil {
				kind := failed
				if np := (*replay.NoPlanError)(nil); errors.As(err, &np) && dmg == nil {
					kind = notFound
				}
				if dmg != nil {
					err = errors.Join(dmg, err)
				}
				return &exitError{kind: kind, err: err}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := json.NewEncoder(out).Encode(x); err != nil {
					return err
				}
				return damageExit(dmg)
			}
			d := x.Decision
			fmt.Fprintf(out, "plan %s for %s (built %s at generation %d, policy %s)\n", x.Plan.Plan, x.Plan.Env, x.Plan.BuiltAt.Format(time.RFC3339), x.Plan.Generation, d.Policy.Name())
			fmt.Fprintf(out, "decision at seq %d: %s [%s], evaluated at %s on the view at seq %d\n", x.DecisionSeq, strings.ToUpper(string(d.Outcome)), strings.Join(d.Codes, ", "), d.EvaluatedAt.Format(time.RFC3339), d.EvaluatedAtSeq)
			if d.CatchUpSeq > 0 {
				fmt.Fprintf(out, "it is the strict retry of the catch-up requested at seq %d\n", d.CatchUpSeq)
			}
			fmt.Fprintln(out, "findings:")
			for _, f := range d.Findings {
				fmt.Fprintf(out, "  %s: %s\n", f.Code, f.Message)
			}
			fmt.Fprintln(out, "coverage the decision saw:")
			for _, v := range x.Views {
				fmt.Fprintf(out, "  %s: candidate %s, incumbent %s, window %s, captured frontier %s\n", v.Model, v.Candidate, dash(v.Incumbent), dash(v.Window), v.CapturedFrontier)
				fmt.Fprintf(out, "    %s covers %s\n", v.Candidate, dash(strings.Join(v.CandidateCoverage, ", ")))
				if v.Incumbent != "" {
					fmt.Fprintf(out, "    %s covers %s\n", v.Incumbent, dash(strings.Join(v.IncumbentCoverage, ", ")))
				}
				for _, a := range v.FailedAudits {
					fmt.Fprintf(out, "    failed audit: %s\n", a)
				}
			}
			if len(x.Divergences) == 0 {
				fmt.Fprintln(out, "re-evaluated today: the same decision")
			} else {
				fmt.Fprintln(out, "re-evaluated today, it differs:")
				for _, dv := range x.Divergences {
					fmt.Fprintf(out, "  %s\n", dv)
				}
				err := errors.New("the recorded decision differs from its re-evaluation")
				if dmg != nil {
					err = errors.Join(dmg, err)
				}
				return &exitError{kind: failed, err: err}
			}
			return damageExit(dmg)
		},
	}
	// --at-seq SEQ explains the plan's decision at SEQ (its latest as of
	// then): a decision page prints it so, the plan decided again since.
	s.register(cmd, true)
	outputFlag(cmd, &output, "table", "json")
	return cmd
}
