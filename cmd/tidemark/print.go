package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

// formatValue is the value of -o/--output: one of allowed. An unknown
// value fails the flag parsing, a usage error naming the flag.
type formatValue struct {
	p       *string
	allowed []string
}

func (f *formatValue) String() string { return *f.p }
func (f *formatValue) Type() string   { return "format" }
func (f *formatValue) Set(v string) error {
	if !slices.Contains(f.allowed, v) {
		return fmt.Errorf("want %s", orList(f.allowed))
	}
	*f.p = v
	return nil
}

// outputFlag registers -o/--output on cmd: the output format, one of
// allowed, the first being the default.
func outputFlag(cmd *cobra.Command, p *string, allowed ...string) {
	*p = allowed[0]
	cmd.Flags().VarP(&formatValue{p: p, allowed: allowed}, "output", "o", "output format: "+orList(allowed))
}

// orList is "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func printStatus(w io.Writer, envs []commands.EnvStatus, open []commands.Repair) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENV\tGEN\tMODEL\tINCUMBENT\tSTATE\tFRONTIER\tREADY\tMISSING\tLAST TICK\tOPEN REPAIRS\tFAILED RUNS")
	for _, e := range envs {
		for _, m := range e.Models {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", e.Env, e.Generation, m.Model, m.Snapshot, modelState(m), stamp(m.Frontier),
				stamp(m.Ready), dash(strings.Join(interval.Set(m.Missing).Strings(), ",")), stamp(m.LastTick), m.OpenRepairs, m.Failures)
		}
	}
	tw.Flush()
	for _, e := range envs {
		for _, m := range e.Models {
			if m.Late {
				fmt.Fprintf(w, "LATE %s/%s: %s\n", e.Env, m.Model, m.LateReason)
			}
		}
	}
	for _, e := range envs {
		for _, m := range e.Models {
			if f := m.LastFailure; f != nil {
				fmt.Fprintf(w, "last failed run: %s %s, %s\n", e.Env, m.Snapshot, failureText(*f))
			}
			for _, a := range m.Audits {
				fmt.Fprintf(w, "failed audit: %s %s, %s\n", e.Env, m.Snapshot, auditText(a))
			}
		}
	}
	for _, r := range open {
		fmt.Fprintf(w, "open repair: %s misses %s in %s (plan %s, open for %s since seq %d)\n", r.Snapshot, interval.Set(r.Missing), r.Env, r.Plan,
			time.Duration(r.OpenForMS)*time.Millisecond, r.OpenSeq)
	}
}

// printPlans writes one line per plan in flight with its backfill
// progress, then one per model of its work (batches, rows, rate, ETA)
// and one per failure.
func printPlans(w io.Writer, plans []commands.PlanProgress) {
	for _, p := range plans {
		state := "plan in flight"
		if p.Cancelled {
			state = "plan cancelled"
		}
		fmt.Fprintf(w, "%s: %s for %s, %s\n", state, p.Plan, p.Env, progress(p))
		for _, m := range p.Models {
			fmt.Fprintf(w, "  %s: %s\n", modelLabel(m), batchFigures(m))
		}
		for _, f := range p.Failures {
			fmt.Fprintf(w, "  %s: %s\n", f.Snapshot, failureText(f))
		}
		for _, a := range p.Audits {
			fmt.Fprintf(w, "  %s: failed audit %s\n", a.Snapshot, auditText(a))
		}
	}
}

// auditText is a failed audit for people: "ids (blocking: rejects the
// promotion) failed on [ranges], 3 violating rows".
func auditText(a commands.AuditStatus) string {
	kind := "non-blocking: warns"
	if a.Blocking {
		kind = "blocking: rejects the promotion"
	}
	result := fmt.Sprintf("%d violating rows", a.Count)
	if a.Error != "" {
		result = "could not run: " + strings.Join(strings.Fields(a.Error), " ")
	}
	return fmt.Sprintf("%s (%s) failed on %s, %s", a.Audit, kind, interval.Set(a.Ranges), result)
}

// printRestating prints the restatements in flight, each model's
// progress under it.
func printRestating(w io.Writer, rs []commands.RestateProgress) {
	for _, r := range rs {
		fmt.Fprintf(w, "restatement in flight: %s of %s %s in %s (seq %d)\n", r.Run, r.Snapshot, strings.Join(interval.Set(r.Ranges).Strings(), ", "), r.Env, r.Seq)
		for _, m := range r.Models {
			fmt.Fprintf(w, "  %s: %s\n", modelLabel(m), batchFigures(m))
		}
	}
}

// failureText is a failed run for people: "backfill attempt 5 of 5
// (final, seq 42): <error>", the error's lines joined.
func failureText(f commands.RunFailure) string {
	state := "retrying"
	if f.Final {
		state = "given up"
	}
	return fmt.Sprintf("%s attempt %d (%s, seq %d): %s", f.RunKind, f.Attempt, state, f.Seq, strings.Join(strings.Fields(f.Error), " "))
}

// progress is a plan's backfill progress for people: "backfill 6h0m0s of
// 48h0m0s (12%)".
func progress(p commands.PlanProgress) string {
	pct := 100
	if p.BackfillMS > 0 {
		pct = int(p.DoneMS * 100 / p.BackfillMS)
	}
	return fmt.Sprintf("backfill %s of %s (%d%%)", time.Duration(p.DoneMS)*time.Millisecond, time.Duration(p.BackfillMS)*time.Millisecond, pct)
}

// printRetired prints the retired snapshot tables, one line each.
func printRetired(w io.Writer, retired []commands.RetiredTable) {
	for _, r := range retired {
		fmt.Fprintf(w, "retired table: %s (written by %s), seq %d at %s: %s\n", r.Table, strings.Join(r.Snapshots, ", "), r.Seq, stamp(r.JudgedAt), r.Reason)
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// modelState is a model's STATE in status: LATE, with its cause when
// known (LATE:failed, LATE:upstream_late, LATE:no_worker), or ok.
func modelState(m commands.ModelStatus) string {
	switch {
	case m.Late && m.LateCause != "":
		return "LATE:" + string(m.LateCause)
	case m.Late:
		return "LATE"
	}
	return "ok"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
