package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/replay"
)

func newAuditCmd() *cobra.Command {
	var s storeFlags
	var f replay.Filter
	var since, until, output string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the audit trail: plan builds, advances, completions, decisions, finalizations, repairs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.Since, err = optTime("--since", since); err != nil {
				return err
			}
			if f.Until, err = optTime("--until", until); err != nil {
				return err
			}
			recs, closeStore, dmg, err := s.read(cmd)
			if err != nil {
				return err
			}
			defer closeStore()
			if err := printAudit(cmd.OutOrStdout(), replay.Audit(recs, f), output); err != nil {
				return err
			}
			return damageExit(dmg)
		},
	}
	s.register(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&f.Env, "env", "", "only events of this environment")
	fl.StringVar(&f.Model, "model", "", "only events concerning this model")
	fl.StringVar(&f.Plan, "plan", "", "only events of this plan")
	fl.StringVar(&since, "since", "", "only events that occurred at or after this time (RFC 3339)")
	fl.StringVar(&until, "until", "", "only events that occurred at or before this time (RFC 3339)")
	outputFlag(cmd, &output, "table", "json", "csv")
	cmd.AddCommand(newExplainCmd())
	return cmd
}

func optTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, &exitError{kind: usage, err: fmt.Errorf("%s: want RFC 3339, like 2026-12-01T11:07:00Z", flag)}
	}
	return t.UTC(), nil
}

func printAudit(w io.Writer, rows []replay.Row, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"seq", "at", "type", "env", "plan", "models", "actor", "causation", "correlation", "summary"})
		for _, r := range rows {
			_ = cw.Write([]string{fmt.Sprint(r.Seq), r.At.Format(time.RFC3339), r.Type, r.Env, r.Plan, strings.Join(r.Models, " "), r.Actor, r.Causation, r.Correlation, r.Summary})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tTYPE\tACTOR\tCAUSATION\tSUMMARY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.At.Format(time.RFC3339), r.Type, dash(r.Actor), dash(r.Causation), r.Summary)
	}
	return tw.Flush()
}
