package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/warehouse"
	"github.com/tidemark/tidemark/work/sqlrun"
)

func newVerifyCmd() *cobra.Command {
	var natsURL, output, env, model string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify --env ENV [--model M]",
		Short: "Recompute an environment's SQL models and compare them row by row with what it serves",
		Long: "verify recomputes every SQL model the environment serves (or one) over each interval its\n" +
			"table covers and compares the rows with the environment's view, both ways (EXCEPT ALL), in\n" +
			"the process that owns the warehouse. Each interval is recomputed with the query of the\n" +
			"snapshot that wrote it (recorded with the rows; a forward-only version keeps its\n" +
			"predecessor's history); an interval with no writer record is recomputed with the\n" +
			"incumbent's query, and the line says how many. It exits 1 when any row differs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep sqlrun.VerifyReply
			if err := whRequest(cmd, natsURL, sqlrun.VerifySubject, sqlrun.VerifyRequest{Env: env, Model: model}, timeout, &rep); err != nil {
				return err
			}
			if rep.Error != "" {
				return rejection(rep.Code, rep.Error)
			}
			out := cmd.OutOrStdout()
			differ := 0
			names := make([]string, 0, len(rep.Models))
			for name, d := range rep.Models {
				names = append(names, name)
				if d.OnlyInView+d.OnlyInRecompute > 0 {
					differ++
				}
			}
			sort.Strings(names)
			if output == "json" {
				if err := json.NewEncoder(out).Encode(rep.Models); err != nil {
					return err
				}
			} else {
				for _, name := range names {
					d := rep.Models[name]
					state := "ok"
					if d.OnlyInView+d.OnlyInRecompute > 0 {
						state = "DIFFERS"
					}
					schema, view := warehouse.ViewOf(env, name) // sushi.orders: sushi__prod.orders
					fmt.Fprintf(out, "%s.%s: %s (%d rows only in the view, %d only in the recompute%s)\n", schema, view, state, d.OnlyInView, d.OnlyInRecompute, writersNote(d))
					for _, s := range d.Samples {
						fmt.Fprintf(out, "  only in the %s: %v\n", s.Side, s.Values)
					}
				}
				if len(names) == 0 {
					fmt.Fprintf(out, "%s serves no SQL model\n", env)
				}
			}
			if differ > 0 {
				return &exitError{kind: failed, err: fmt.Errorf("%d of %d models of %s differ from their recompute", differ, len(names), env)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", defaultNatsURL, natsURLUsage)
	cmd.Flags().StringVar(&env, "env", "prod", "the environment to verify")
	cmd.Flags().StringVar(&model, "model", "", "only this model")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

// writersNote says which snapshots' queries verified a model's intervals,
// and how many intervals had no writer record.
func writersNote(d warehouse.Diff) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(d.Writers)) {
		parts = append(parts, fmt.Sprintf("%s: %d", id, d.Writers[id]))
	}
	note := ""
	if len(parts) > 0 {
		note = "; intervals by writer: " + strings.Join(parts, ", ")
	}
	if d.Unverifiable > 0 {
		note += fmt.Sprintf("; %d recorded intervals not recomputed: their writer read a table the janitor retired", d.Unverifiable)
	}
	if d.Unrecorded > 0 {
		note += fmt.Sprintf("; %d intervals without a writer record, checked against the incumbent's query", d.Unrecorded)
	}
	return note
}
