package main

import (
	"context"
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
	"github.com/tidemark/tidemark/warehouse"
)

func newScenarioCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "scenario", Short: "Play scenario files"}
	var asJSON bool
	var output, dataDir, wh string
	run := &cobra.Command{
		Use:   "run FILE...",
		Short: "Run scenario files on a simulated clock against an embedded JetStream engine",
		Long: "Run plays each file's steps on a simulated clock against a real embedded JetStream\n" +
			"server and checks its expectations. Exit status: 0 when every expectation holds,\n" +
			"1 when one fails, 2 when a file is invalid (then nothing is run).\n\n" +
			"With --warehouse (a new DuckDB file, or an empty postgres:// database), models that\n" +
			"carry sql: compute real rows: the built-in worker writes every interval, each env's views\n" +
			"follow its incumbents, and every step verifies its env (expect: {verify: {diffs: 0}}).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				fmt.Fprintln(cmd.ErrOrStderr(), "tidemark: --json is deprecated: use -o json")
			}
			return runScenarios(cmd, args, asJSON || output == "json", dataDir, wh)
		},
	}
	outputFlag(run, &output, "table", "json")
	run.Flags().BoolVar(&asJSON, "json", false, "deprecated: use -o json")
	run.Flags().StringVar(&dataDir, "data-dir", "", "keep the stream in this directory (one subdirectory per file when several)")
	run.Flags().StringVar(&wh, "warehouse", "", "compute SQL models in this warehouse and verify every step: a new DuckDB file (one per file when several) or an empty postgres:// database (one file only)")
	cmd.AddCommand(run)
	return cmd
}

func runScenarios(cmd *cobra.Command, paths []string, asJSON bool, dataDir, whDSN string) error {
	out := cmd.OutOrStdout()
	var files []*scenario.File
	for _, p := range paths {
		f, err := scenario.Load(p)
		if err != nil {
			return &exitError{kind: usage, err: err}
		}
		files = append(files, f)
	}
	if isPostgres(whDSN) && len(files) > 1 {
		return &exitError{kind: usage, err: errors.New("--warehouse postgres://… runs one scenario file (each file needs an empty warehouse); give a DuckDB file to run several")}
	}
	nfailed := 0
	for i, f := range files {
		opts := scenario.Options{DataDir: dataDir}
		if dataDir != "" && len(files) > 1 {
			opts.DataDir = filepath.Join(dataDir, fmt.Sprintf("%02d-%s", i+1, strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))))
		}
		if whDSN != "" {
			dsn := whDSN
			if len(files) > 1 {
				dsn = perFileDuckDB(whDSN, i, f.Path)
			}
			wh, err := openScenarioWarehouse(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			opts.Warehouse = wh
		}
		var tw *tabwriter.Writer
		if asJSON {
			enc := json.NewEncoder(out)
			opts.OnStep = func(sr scenario.StepResult) { _ = enc.Encode(sr) }
		} else {
			fmt.Fprintf(out, "%s — %s\n", f.Path, f.Name)
			tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			withRows := opts.Warehouse != nil
			header := "STEP\tKIND\tPLAN\tOUTCOME\tCODES\tMISSING\tSCHEDULED\tREPAIRS\tCLOCK"
			if withRows {
				header += "\tVERIFY"
			}
			fmt.Fprintln(tw, header+"\tCHECK")
			opts.OnStep = func(sr scenario.StepResult) { printStep(tw, sr, withRows) }
		}
		res, err := scenario.Run(cmd.Context(), f, opts)
		if opts.Warehouse != nil {
			opts.Warehouse.Close()
		}
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

func printStep(w io.Writer, sr scenario.StepResult, withRows bool) {
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
	verify := ""
	if withRows {
		verify = "\t" + verifyCell(sr.Verify)
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s%s\t%s\n", sr.Step, sr.Kind, dash(sr.Plan), dash(sr.Outcome),
		dash(strings.Join(sr.Codes, ",")), dash(strings.Join(missing, " ")), dash(strings.Join(sched, " ")), sr.RepairsOpen, sr.Clock.Format("2006-01-02T15:04Z"), verify, check)
}

// verifyCell sums a step's verify: the differing rows over its env's SQL
// models, and the intervals checked without a writer record.
func verifyCell(diffs map[string]warehouse.Diff) string {
	if len(diffs) == 0 {
		return "-"
	}
	var rows int64
	unrecorded := 0
	for _, d := range diffs {
		rows += d.OnlyInView + d.OnlyInRecompute
		unrecorded += d.Unrecorded
	}
	cell := fmt.Sprintf("%d diffs", rows)
	if unrecorded > 0 {
		cell += fmt.Sprintf(" (%d unrecorded)", unrecorded)
	}
	return cell
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// perFileDuckDB is the DuckDB file of the i-th of several scenario files:
// the given path with "-NN-<file name>" before its extension (options
// after '?' kept).
func perFileDuckDB(dsn string, i int, file string) string {
	path, opts, hasOpts := strings.Cut(dsn, "?")
	ext := filepath.Ext(path)
	path = fmt.Sprintf("%s-%02d-%s%s", strings.TrimSuffix(path, ext), i+1, strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), ext)
	if hasOpts {
		path += "?" + opts
	}
	return path
}

// openScenarioWarehouse opens the warehouse of --warehouse and refuses
// one that already holds snapshot tables: a scenario's snapshots are
// named after its models and versions, so an earlier run's tables and
// writer records would mix with this run's.
func openScenarioWarehouse(ctx context.Context, dsn string) (*warehouse.Warehouse, error) {
	wh, err := warehouse.Open(ctx, dsn, warehouse.Options{})
	if err != nil {
		return nil, &exitError{kind: usage, err: fmt.Errorf("--warehouse: %w", err)}
	}
	_, rows, err := wh.Query(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = '"+warehouse.Schema+"'")
	if err == nil && (len(rows) != 1 || len(rows[0]) != 1) {
		err = fmt.Errorf("counting its snapshot tables: %v", rows)
	}
	if err != nil {
		wh.Close()
		return nil, &exitError{kind: failed, err: fmt.Errorf("--warehouse: %w", err)}
	}
	if n := fmt.Sprint(rows[0][0]); n != "0" {
		wh.Close()
		return nil, &exitError{kind: usage, err: fmt.Errorf("--warehouse %s already holds %s snapshot tables: a scenario runs on a new DuckDB file or an empty database", warehouse.Redact(dsn), n)}
	}
	return wh, nil
}
