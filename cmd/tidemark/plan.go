package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

func newPlanCmd() *cobra.Command {
	var f clientFlags
	var id, env string
	var set []string
	var trailing, catchUp int
	cmd := &cobra.Command{
		Use:   "plan --env ENV --set MODEL=VERSION...",
		Short: "Build a plan on the server: capture incumbents and frontiers, fix the backfill set",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			versions := map[string]string{}
			for _, s := range set {
				m, v, ok := strings.Cut(s, "=")
				if !ok || m == "" || v == "" {
					return &exitError{kind: usage, err: fmt.Errorf("--set %q: want MODEL=VERSION", s)}
				}
				versions[m] = v
			}
			if id == "" {
				id = "p-" + strings.ToLower(commands.NewID())
			}
			r, err := request(cmd, f.natsURL, &commands.BuildPlan{Plan: id, Env: env, Versions: versions,
				MaxTrailingGapAdvances: trailing, MaxCatchUpAdvances: catchUp, Meta: commands.Meta{Actor: "cli"}})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return json.NewEncoder(out).Encode(r.Plan)
			}
			p := r.Plan
			fmt.Fprintf(out, "plan %s for %s built at generation %d (policy %s, seq %d)\n", p.Plan, p.Env, p.Generation, p.Policy.Name(), r.Seq)
			for _, c := range p.Candidates {
				derived := ""
				if c.Derived {
					derived = " (derived)"
				}
				fmt.Fprintf(out, "  %s%s replaces %s (frontier %s); backfill %s\n", c.Snapshot, derived, dash(c.Incumbent), stamp(c.IncumbentFrontier), dash(strings.Join(interval.Set(c.Backfill).Strings(), ", ")))
			}
			return nil
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&id, "id", "", "plan id (default: generated)")
	fl.StringVar(&env, "env", "", "target environment")
	fl.StringSliceVar(&set, "set", nil, "MODEL=VERSION the plan sets (repeat or comma-separate)")
	fl.IntVar(&trailing, "max-trailing-gap-advances", 0, "trailing-gap allowance bound (0: off)")
	fl.IntVar(&catchUp, "max-catch-up-advances", 0, "bounded catch-up bound (0: off)")
	return cmd
}
