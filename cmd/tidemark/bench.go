package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/bench"
)

func newBenchCmd() *cobra.Command {
	var quick bool
	var only []string
	var output string
	cmd := &cobra.Command{
		Use:   "bench [--quick] [--only GROUP]...",
		Short: "Measure tidemark side by side with raw JetStream on embedded servers in a temp dir",
		Long: "bench starts its own embedded servers and prints, per figure, tidemark's value, its limit\n" +
			"measured in the same run with the same client concurrency (the transport limit, raw\n" +
			"JetStream...), the ratio, the goal, whether it passes, and how the cost per unit of work\n" +
			"grows at ten times the size.\n" +
			"--quick finishes in about two minutes; --only measures the named groups of rows alone\n" +
			"(" + strings.Join(bench.Groups(), ", ") + ").\n" +
			"Exit status is 0 whether goals pass or not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			errOut := cmd.ErrOrStderr()
			figs, err := bench.Run(cmd.Context(), bench.Options{Quick: quick, Only: only, Progress: func(name string) { fmt.Fprintf(errOut, "measuring %s…\n", name) }})
			if err != nil {
				return &exitError{kind: usage, err: err}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				return json.NewEncoder(out).Encode(figs)
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIGURE\tTIDEMARK\tLIMIT\tUNIT\tRATIO\tGOAL\tPASS\tAT 10×\tNOTE")
			for _, f := range figs {
				limit := "-"
				if f.Limit != 0 {
					limit = figure(f.Limit)
				}
				pass := "FAIL"
				if f.Pass {
					pass = "pass"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\n", f.Name, figure(f.Tidemark), limit, f.Unit, f.Ratio, f.Goal, pass, slope(f.Scale), f.Note)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "small sizes: about two minutes")
	cmd.Flags().StringArrayVar(&only, "only", nil, "measure only this group of rows (repeatable): "+strings.Join(bench.Groups(), ", "))
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

// figure is a measurement for the table: whole numbers from 100 up (rows
// a second, milliseconds), three significant digits below (the diff rows'
// seconds, a batch's overhead in ms), which %.0f printed as 0, 1 or 7.
func figure(v float64) string {
	if v >= 100 || v <= -100 || v == 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// slope is a row's cost growth for the table: the change per tenfold
// size, and the size it was measured at.
func slope(s *bench.Scale) string {
	if s == nil {
		return "-"
	}
	flat := "flat"
	if !s.Flat {
		flat = "STEEP"
	}
	return fmt.Sprintf("%+.0f%% per 10× (%s, at %d)", 100*s.Slope, flat, s.ScaledSize)
}
