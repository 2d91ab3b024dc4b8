package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

func newPromoteCmd() *cobra.Command {
	var f clientFlags
	var wait time.Duration
	var noFinalize bool
	cmd := &cobra.Command{
		Use:   "promote PLAN",
		Short: "Promote a plan; exit 1 when the promotion is rejected (its findings are printed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := connect(f.natsURL)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx := cmd.Context()
			r, err := send(ctx, nc, &commands.Promote{Plan: args[0], Meta: commands.Meta{Actor: "cli"}})
			if err != nil {
				return err
			}
			d := r.Decision
			out := cmd.OutOrStdout()
			if r.CatchUp != nil {
				if f.output != "json" {
					for _, w := range r.CatchUp.Work {
						if set := interval.NewSet(w.Ranges...).AddSet(w.Recompute); !set.Empty() {
							fmt.Fprintf(out, "catching up: %s %s\n", w.Snapshot, strings.Join(set.Strings(), ", "))
						}
					}
				}
				if d, err = awaitDecision(ctx, nc, args[0], r.Seq, wait); err != nil {
					return err
				}
			}
			if d.Outcome == events.Accepted && !noFinalize {
				if _, err := send(ctx, nc, &commands.Finalize{Plan: args[0], Meta: commands.Meta{Actor: "cli"}}); err != nil {
					return err
				}
			}
			if f.output == "json" {
				if err := json.NewEncoder(out).Encode(d); err != nil {
					return err
				}
			} else {
				printDecision(out, d)
			}
			if d.Outcome != events.Accepted {
				return &exitError{kind: failed, err: fmt.Errorf("promotion of %s rejected: %s", args[0], strings.Join(d.Codes, ", "))}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for a catch-up's strict retry")
	cmd.Flags().BoolVar(&noFinalize, "no-finalize", false, "do not finalize the environment after an accepted promotion")
	return cmd
}

// awaitDecision follows the plan's subject after seq until its decision
// is recorded (the strict retry after catch-up).
func awaitDecision(parent context.Context, nc *nats.Conn, plan string, after uint64, wait time.Duration) (*events.PromotionDecided, error) {
	ctx, cancel := context.WithTimeout(parent, wait)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, &exitError{kind: usage, err: err}
	}
	r, err := eventlog.OpenReader(ctx, js)
	if err != nil && ctx.Err() == nil {
		return nil, &exitError{kind: usage, err: fmt.Errorf("following plan %s: %w", plan, err)}
	}
	var d *events.PromotionDecided
	errFound := errors.New("found")
	if err == nil {
		err = r.Tail(ctx, after+1, func(e eventlog.Entry) error {
			if p, ok := e.Event.Payload.(events.PromotionDecided); ok && e.Err == nil {
				d = &p
				return errFound
			}
			return nil
		}, events.PlanSubject(plan))
	}
	switch {
	case d != nil:
		return d, nil
	case parent.Err() != nil:
		return nil, &exitError{kind: failed, err: fmt.Errorf("interrupted: plan %s is catching up and stays; its catch-up work goes on: `tidemark promote %s` records its decision once it is computed (see `tidemark status`)", plan, plan)}
	case ctx.Err() != nil:
		return nil, &exitError{kind: failed, err: fmt.Errorf("no decision for %s within %s: the catch-up work is still outstanding (see `tidemark status`)", plan, wait)}
	}
	return nil, &exitError{kind: usage, err: fmt.Errorf("following plan %s: %w", plan, err)}
}

func printDecision(w io.Writer, d *events.PromotionDecided) {
	fmt.Fprintf(w, "%s: %s [%s] (view at seq %d, policy %s)\n", d.Plan, strings.ToUpper(string(d.Outcome)), strings.Join(d.Codes, ", "), d.EvaluatedAtSeq, d.Policy.Name())
	models := make([]string, 0, len(d.Models))
	for m := range d.Models {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		if f := d.Models[m]; len(f.Missing) > 0 {
			fmt.Fprintf(w, "  %s misses %s (%d advance(s))\n", f.Snapshot, strings.Join(interval.Set(f.Missing).Strings(), ", "), f.Advances)
		}
	}
	for _, f := range d.Findings {
		fmt.Fprintf(w, "  %s: %s\n", f.Code, f.Message)
	}
}
