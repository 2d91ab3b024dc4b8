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

func newPlanCmd() *cobra.Command {
	var f clientFlags
	var id, env string
	var set []string
	var trailing, catchUp int
	var wait time.Duration
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
				if err := json.NewEncoder(out).Encode(r.Plan); err != nil {
					return err
				}
				return awaitBackfill(cmd, f.natsURL, r.Plan.Plan, wait)
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
			return awaitBackfill(cmd, f.natsURL, p.Plan, wait)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&id, "id", "", "plan id (default: generated)")
	fl.StringVar(&env, "env", "", "target environment")
	fl.StringSliceVar(&set, "set", nil, "MODEL=VERSION the plan sets (repeat or comma-separate)")
	fl.IntVar(&trailing, "max-trailing-gap-advances", 0, "trailing-gap allowance bound (0: off)")
	fl.IntVar(&catchUp, "max-catch-up-advances", 0, "bounded catch-up bound (0: off)")
	fl.DurationVar(&wait, "wait", 0, "then wait, up to this long, until the plan's backfill set is computed (exit 1 if it is not, naming the model and its error when its work was given up, or when the plan was cancelled)")
	cmd.AddCommand(newPlanCancelCmd())
	return cmd
}

// newPlanCancelCmd is `tidemark plan cancel ID`: cancel_plan.
func newPlanCancelCmd() *cobra.Command {
	var f clientFlags
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel PLAN",
		Short: "End a plan's outstanding work (backfill, catch-up): recorded as PlanCancelled; promoting it then reports what it misses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := request(cmd, f.natsURL, &commands.CancelPlan{Plan: args[0], Reason: reason, Meta: commands.Meta{Actor: "cli"}})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return json.NewEncoder(out).Encode(r)
			}
			fmt.Fprintf(out, "plan %s cancelled (seq %d): its outstanding work is not computed; promoting it reports what it misses\n", args[0], r.Seq)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record (one line, at most 1024 bytes)")
	return cmd
}

// awaitBackfill asks the server for the status until plan's backfill set
// is covered (or the plan is no longer in flight: accepted meanwhile), for
// at most wait (0: does not wait). Progress goes to stderr.
func awaitBackfill(cmd *cobra.Command, url, plan string, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	nc, err := connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx := cmd.Context()
	deadline := time.Now().Add(wait)
	last := ""
	for {
		r, err := send(ctx, nc, &commands.Status{})
		if err != nil {
			return err
		}
		var p *commands.PlanProgress
		for i := range r.Plans {
			if r.Plans[i].Plan == plan {
				p = &r.Plans[i]
			}
		}
		if p == nil || p.Complete() {
			fmt.Fprintf(cmd.ErrOrStderr(), "plan %s: backfill complete\n", plan)
			return nil
		}
		if p.Cancelled {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s was cancelled, %s", plan, progress(*p))}
		}
		if f := p.Failed(); f != nil {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s failed: model %s (%s) was given up after %d attempt(s): %s", plan, f.Model, f.Snapshot, f.Attempt, f.Error)}
		}
		s := progress(*p)
		for _, f := range p.Failures {
			s += fmt.Sprintf("; %s failed (attempt %d, retrying): %s", f.Model, f.Attempt, firstLine(f.Error))
		}
		if s != last {
			fmt.Fprintf(cmd.ErrOrStderr(), "plan %s: %s\n", plan, s)
			last = s
		}
		if !time.Now().Before(deadline) {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s's backfill is not computed after %s, %s (is `tidemark serve` computing its work: --builtin-worker, or a `tidemark worker`?)", plan, wait, progress(*p))}
		}
		if err := pause(ctx, 250*time.Millisecond, deadline); err != nil {
			return err
		}
	}
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
