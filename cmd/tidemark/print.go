package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

func checkFormat(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	return &exitError{code: 2, err: fmt.Errorf("-o %q: want %s", o, strings.Join(allowed, ", "))}
}

func printStatus(w io.Writer, envs []commands.EnvStatus, open []commands.Repair) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENV\tGEN\tMODEL\tINCUMBENT\tFRONTIER\tMISSING\tLAST TICK\tOPEN REPAIRS\tFAILED RUNS")
	for _, e := range envs {
		for _, m := range e.Models {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", e.Env, e.Generation, m.Model, m.Snapshot, stamp(m.Frontier),
				dash(strings.Join(interval.Set(m.Missing).Strings(), ",")), stamp(m.LastTick), m.OpenRepairs, m.Failures)
		}
	}
	tw.Flush()
	for _, r := range open {
		fmt.Fprintf(w, "open repair: %s misses %s in %s (plan %s, open for %s since seq %d)\n", r.Snapshot, interval.Set(r.Missing), r.Env, r.Plan,
			time.Duration(r.OpenForMS)*time.Millisecond, r.OpenSeq)
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
