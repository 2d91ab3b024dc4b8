package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work/sqlrun"
)

func newDiffCmd() *cobra.Command {
	var natsURL, output, model string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "diff PLAN [--model M]",
		Short: "Compare a plan's candidates' rows with their incumbents' over the intervals both cover (exit 1 when they differ)",
		Long: "diff compares, for every candidate of the plan (or one model), its table's rows with the\n" +
			"rows of the incumbent its environment serves (once the plan is promoted: the incumbent it\n" +
			"replaced) over the intervals both tables cover now, in the process that owns the warehouse:\n" +
			"each side's row count, the rows only in each (EXCEPT ALL both ways: duplicates count, NULL\n" +
			"equals NULL), and where the model declares a grain, the rows whose key matches but whose\n" +
			"values differ, per column, with up to 10 samples. A forward-only candidate writing its\n" +
			"incumbent's table has nothing to compare, and says so. Exit 0: no differences; 1: some.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep sqlrun.DiffReply
			if err := whRequest(cmd, natsURL, sqlrun.DiffSubject, sqlrun.DiffRequest{Plan: args[0], Model: model}, timeout, &rep); err != nil {
				return err
			}
			if rep.Error != "" {
				return rejection(rep.Code, rep.Error)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := json.NewEncoder(out).Encode(rep); err != nil {
					return err
				}
			} else {
				printDiff(out, rep)
			}
			differ := 0
			for _, m := range rep.Models {
				if m.Differs() {
					differ++
				}
			}
			if differ > 0 {
				return &exitError{kind: failed, err: fmt.Errorf("%d of %d candidates of plan %s differ from their incumbents", differ, len(rep.Models), rep.Plan)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	cmd.Flags().StringVar(&model, "model", "", "only this model")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

// printDiff prints a plan's diff for people: per candidate, what was
// compared over which ranges, the counts, and the changed rows by key.
func printDiff(w io.Writer, rep sqlrun.DiffReply) {
	fmt.Fprintf(w, "plan %s (env %s)\n", rep.Plan, rep.Env)
	for _, m := range rep.Models {
		against := m.Incumbent
		if against == "" {
			against = "-"
		}
		if m.Replaced {
			against += " (the incumbent it replaced)"
		}
		fmt.Fprintf(w, "%s: %s against %s", m.Model, m.Candidate, against)
		if m.Skipped != "" {
			fmt.Fprintf(w, ": skipped, %s\n", m.Skipped)
			continue
		}
		fmt.Fprintf(w, " over %s\n", strings.Join(interval.Set(m.Ranges).Strings(), ", "))
		d := m.TableDiff
		state := "same rows"
		if !d.Empty() {
			state = "DIFFERS"
		}
		fmt.Fprintf(w, "  %s: %s in the candidate, %d in the incumbent; %d only in the candidate, %d only in the incumbent\n",
			state, nRows(d.CandidateRows), d.IncumbentRows, d.OnlyInCandidate, d.OnlyInIncumbent)
		if len(d.CandidateOnlyColumns) > 0 {
			fmt.Fprintf(w, "  columns only in the candidate (not compared): %s\n", strings.Join(d.CandidateOnlyColumns, ", "))
		}
		if len(d.IncumbentOnlyColumns) > 0 {
			fmt.Fprintf(w, "  columns only in the incumbent (not compared): %s\n", strings.Join(d.IncumbentOnlyColumns, ", "))
		}
		if d.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", d.Note)
		}
		if len(d.Grain) == 0 {
			if !d.Empty() && d.Note == "" {
				fmt.Fprintln(w, "  (the model declares no grain: with `grain: [cols]`, its key, diff shows which keys changed and in which columns)")
			}
			continue
		}
		var cols []string
		for _, c := range d.ValueColumns {
			if n := d.ChangedColumns[c]; n > 0 {
				cols = append(cols, fmt.Sprintf("%s %d", c, n))
			}
		}
		fmt.Fprintf(w, "  grain (%s): %s changed", strings.Join(d.Grain, ", "), nRows(d.Changed))
		if len(cols) > 0 {
			fmt.Fprintf(w, "; by column: %s", strings.Join(cols, ", "))
		}
		fmt.Fprintln(w)
		for _, s := range d.Samples {
			var key, vals []string
			for i, k := range d.Grain {
				key = append(key, fmt.Sprintf("%s=%s", k, cell(at(s.Key, i))))
			}
			for i, c := range d.ValueColumns {
				cv, iv := cell(at(s.Candidate, i)), cell(at(s.Incumbent, i))
				if cv != iv {
					vals = append(vals, fmt.Sprintf("%s %s → %s", c, iv, cv))
				}
			}
			fmt.Fprintf(w, "    %s: %s\n", strings.Join(key, " "), strings.Join(vals, "; "))
		}
	}
	if len(rep.Models) == 0 {
		fmt.Fprintln(w, "no candidate to compare")
	}
}

// nRows is "1 row" or "N rows".
func nRows(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// at is vs[i], or nil past its end.
func at(vs []any, i int) any {
	if i < len(vs) {
		return vs[i]
	}
	return nil
}
