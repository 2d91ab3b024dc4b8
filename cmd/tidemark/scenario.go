package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/scenario"
)

func newScenarioCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "scenario", Short: "Play scenario files"}
	var asJSON bool
	var output, dataDir string
	run := &cobra.Command{
		Use:   "run FILE...",
		Short: "Run scenario files on a simulated clock against an embedded JetStream engine",
		Long: "Run plays each file's steps on a simulated clock against a real embedded JetStream\n" +
			"server and checks its expectations. Exit status: 0 when every expectation holds,\n" +
			"1 when one fails, 2 when a file is invalid (then nothing is run).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				fmt.Fprintln(cmd.ErrOrStderr(), "tidemark: --json is deprecated: use -o json")
			}
			return runScenarios(cmd, args, asJSON || output == "json", dataDir)
		},
	}
	outputFlag(run, &output, "table", "json")
	run.Flags().BoolVar(&asJSON, "json", false, "deprecated: use -o json")
	run.Flags().StringVar(&dataDir, "data-dir", "", "keep the stream in this directory (one subdirectory per file when several)")
	cmd.AddCommand(run)
	return cmd
}

func runScenarios(cmd *cobra.Command, paths []string, asJSON bool, dataDir string) error {
	out := cmd.OutOrStdout()
	var files []*scenario.File
	for _, p := range paths {
		f, err := scenario.Load(p)
		if err != nil {
			return &exitError{kind: usage, err: err}
		}
		files = append(files, f)
	}
	nfailed := 0
	for i, f := range files {
		opts := scenario.Options{DataDir: dataDir}
		if dataDir != "" && len(files) > 1 {
			opts.DataDir = filepath.Join(dataDir, fmt.Sprintf("%02d-%s", i+1, strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))))
		}
		var tw *tabwriter.Writer
		if asJSON {
			enc := json.NewEncoder(out)
			opts.OnStep = func(sr scenario.StepResult) { _ = enc.Encode(sr) }
		} else {
			fmt.Fprintf(out, "%s — %s\n", f.Path, f.Name)
			tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STEP\tKIND\tPLAN\tOUTCOME\tCODES\tMISSING\tSCHEDULED\tREPAIRS\tCLOCK\tCHECK")
			opts.OnStep = func(sr scenario.StepResult) { printStep(tw, sr) }
		}
		res, err := scenario.Run(cmd.Context(), f, opts)
		if tw != nil {
			tw.Flush()
		}
		if err != nil {
			return &exitError{kind: failed, err: err}
		}
		nfailed += res.Failed
		if asJSON {
			_ = json.NewEncoder(out).Encode(map[string]any{"summary": true, "file": filepath.Base(f.Path), "steps": len(res.Steps), "expectations": res.Expectations, "failed": res.Failed})
		} else {
			fmt.Fprintf(out, "%d steps, %d expectations, %d failed\n", len(res.Steps), res.Expectations, res.Failed)
		}
		for _, fl := range res.Failures {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", f.Path, fl)
		}
	}
	if nfailed > 0 {
		return &exitError{kind: failed, err: errors.New("")}
	}
	return nil
}

func printStep(w io.Writer, sr scenario.StepResult) {
	var missing, sched []string
	for _, m := range slices.Sorted(maps.Keys(sr.Models)) {
		if r := sr.Models[m]; len(r.Missing) > 0 {
			missing = append(missing, fmt.Sprintf("%s:%s", m, strings.Join(r.Missing, ",")))
		}
	}
	for _, m := range slices.Sorted(maps.Keys(sr.Scheduled)) {
		sched = append(sched, fmt.Sprintf("%s:%s", m, strings.Join(sr.Scheduled[m], ",")))
	}
	check := "ok"
	if len(sr.Failures) > 0 {
		var parts []string
		for _, f := range sr.Failures {
			parts = append(parts, fmt.Sprintf("%s want %s got %s", f.Key, f.Want, f.Got))
		}
		check = "FAIL " + strings.Join(parts, "; ")
	}
	if sr.Divergences != nil {
		missing = append(missing, fmt.Sprintf("divergences=%d", *sr.Divergences))
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", sr.Step, sr.Kind, dash(sr.Plan), dash(sr.Outcome),
		dash(strings.Join(sr.Codes, ",")), dash(strings.Join(missing, " ")), dash(strings.Join(sched, " ")), sr.RepairsOpen, sr.Clock.Format("2006-01-02T15:04Z"), check)
}
