package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/views"
)

func newReplayCmd() *cobra.Command {
	var s storeFlags
	var verify bool
	var output string
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild every projection from the stream (up to a sequence or a time) and re-evaluate recorded decisions",
		Long: "replay folds the stream from its start with the same code as the live projections and\n" +
			"prints what the projections held at that point. With --verify it re-evaluates every\n" +
			"recorded decision and catch-up request at the sequence it was evaluated at, with the\n" +
			"policy version it names, and every restatement on its view at its clock, and exits 1 on\n" +
			"any divergence. It exits 1, naming them, when\n" +
			"the stream lost events or holds messages that are not tidemark events.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			recs, closeStore, dmg, err := s.read(cmd)
			if err != nil {
				return err
			}
			defer closeStore()
			st := replay.Fold(recs)
			envs, open := views.Status(st, "", lastAt(recs))
			var divs []replay.Divergence
			if verify {
				divs = replay.Verify(recs)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				envs, open := listsNotNull(envs, open)
				res := map[string]any{"seq": st.Seq, "events": st.Events, "skipped": st.Skipped, "decisions": len(st.Decisions), "envs": envs, "open_repairs": open}
				if verify {
					res["divergences"] = nonNilDivs(divs)
				}
				if dmg != nil {
					res["damage"] = dmg
				}
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "replayed %d events up to seq %d (%d undecodable or contradictory); %d decisions\n", st.Events, st.Seq, st.Skipped, len(st.Decisions))
				printStatus(out, envs, open)
				if verify {
					fmt.Fprintf(out, "re-evaluated every decision: %d divergence(s)\n", len(divs))
					for _, d := range divs {
						fmt.Fprintf(out, "  %s\n", d)
					}
				}
			}
			var errs []error
			if dmg != nil {
				errs = append(errs, dmg)
			}
			if len(divs) > 0 {
				errs = append(errs, fmt.Errorf("%d divergence(s) between recorded and recomputed decisions", len(divs)))
			}
			if len(errs) > 0 {
				return &exitError{kind: failed, err: errors.Join(errs...)}
			}
			return nil
		},
	}
	s.register(cmd, true)
	cmd.Flags().BoolVar(&verify, "verify", false, "re-evaluate every recorded decision; exit 1 on any divergence (and, like every reader, on lost events or messages that are not tidemark events)")
	outputFlag(cmd, &output, "table", "json")
	return cmd
}

func nonNilDivs(d []replay.Divergence) []replay.Divergence {
	if d == nil {
		return []replay.Divergence{}
	}
	return d
}
