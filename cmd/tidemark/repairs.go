package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

func newRepairsCmd() *cobra.Command {
	var f clientFlags
	var env string
	cmd := &cobra.Command{
		Use:   "repairs",
		Short: "List open repair debt: gaps promotions accepted that the scheduler has not filled yet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := request(cmd, f.natsURL, &commands.OpenRepairs{Env: env})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				_, open := listsNotNull(nil, r.Repairs)
				return json.NewEncoder(out).Encode(open)
			}
			if len(r.Repairs) == 0 {
				fmt.Fprintln(out, "no open repair debt")
				return nil
			}
			for _, d := range r.Repairs {
				fmt.Fprintf(out, "%s %s misses %s (plan %s, open for %s)\n", d.Env, d.Snapshot, strings.Join(interval.Set(d.Missing).Strings(), ", "), d.Plan, time.Duration(d.OpenForMS)*time.Millisecond)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&env, "env", "", "only this environment")
	return cmd
}
