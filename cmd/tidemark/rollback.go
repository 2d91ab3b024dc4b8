package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
)

func newRollbackCmd() *cobra.Command {
	var f clientFlags
	var env string
	var to uint64
	cmd := &cobra.Command{
		Use:   "rollback --env ENV [--to GENERATION]",
		Short: "Put an environment's previous incumbents back in one view swap, recomputing nothing (exit 1 when refused)",
		Long: `Put an environment's previous incumbents back: those of the generation
before the current one, or, with --to, those it had at that generation.
One decision (an EnvironmentRolledBack event, re-evaluated by replay like a
promotion) and one view swap: nothing is recomputed, the scheduler fills the
restored incumbents' missing ready intervals. The environment's generation
moves on, so the demoted snapshots' scheduler is fenced and every plan
built before is conflicting_plan at promote; the demoted snapshots' open
repair debt closes. Refused (exit 1, nothing recorded) when the target is
not an earlier generation, served nothing, lacks a model the environment
serves now, serves what it serves now, or needs a table the janitor
retired (serve --retain keeps them: 7 days by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := connect(f.natsURL)
			if err != nil {
				return err
			}
			defer nc.Close()
			r, err := send(cmd.Context(), nc, &commands.Rollback{Env: env, ToGeneration: to, Meta: commands.Meta{Actor: "cli"}})
			if err != nil {
				return err
			}
			if r.Rollback == nil {
				return &exitError{kind: failed, err: fmt.Errorf("rollback of %s: the reply carries no decision", env)}
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return json.NewEncoder(out).Encode(r.Rollback)
			}
			printRollback(out, r.Rollback, r.Seq, r.Duplicate)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&env, "env", "", "the environment to roll back (required)")
	cmd.Flags().Uint64Var(&to, "to", 0, "the generation whose incumbents to restore (default: the one before the current)")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

func printRollback(w io.Writer, rb *events.EnvironmentRolledBack, seq uint64, duplicate bool) {
	again := ""
	if duplicate {
		again = " (already applied)"
	}
	fmt.Fprintf(w, "%s: ROLLED BACK from generation %d to generation %d's incumbents, now generation %d (view at seq %d, recorded at seq %d)%s\n",
		rb.Env, rb.FromGeneration, rb.ToGeneration, rb.Generation, rb.EvaluatedAtSeq, seq, again)
	for _, m := range rb.Models {
		fmt.Fprintf(w, "  %s: %s restored (table %s), %s demoted\n", m.Model, m.Restored, m.Table, m.Demoted)
	}
	for _, r := range rb.Repairs {
		fmt.Fprintf(w, "  repair debt of %s (plan %s, opened at seq %d) closed: %s no longer serves it\n", r.Snapshot, r.Plan, r.OpenSeq, rb.Env)
	}
}
