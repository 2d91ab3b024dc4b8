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
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
)

// defaultNatsURL is where `tidemark serve` listens by default.
const defaultNatsURL = "nats://127.0.0.1:4222"

// connect dials the server; failures are usage/connection errors (exit 2).
func connect(url string) (*nats.Conn, error) {
	nc, err := transport.Connect(url, nats.Name("tidemark-cli"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("cannot reach the tidemark server at %s: %v (is `tidemark serve` running? set --nats-url)", url, err)}
	}
	return nc, nil
}

// request sends one command and returns its reply; a transport failure or
// a rejected command is an error (exit 2 and 1).
func request(cmd *cobra.Command, url string, c commands.Command) (commands.Reply, error) {
	nc, err := connect(url)
	if err != nil {
		return commands.Reply{}, err
	}
	defer nc.Close()
	return send(cmd.Context(), nc, c)
}

func send(ctx context.Context, nc *nats.Conn, c commands.Command) (commands.Reply, error) {
	r, err := transport.NewClient(nc).Do(ctx, c)
	if err != nil {
		return r, &exitError{code: 2, err: fmt.Errorf("%s: %v", c.Kind(), err)}
	}
	if err := r.Err(); err != nil {
		return r, &exitError{code: 1, err: fmt.Errorf("%s rejected: %v", c.Kind(), err)}
	}
	return r, nil
}

type clientFlags struct{ natsURL, output string }

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.natsURL, "nats-url", defaultNatsURL, "the tidemark server's NATS URL")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
}

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
			if err := checkFormat(f.output, "table", "json"); err != nil {
				return err
			}
			versions := map[string]string{}
			for _, s := range set {
				m, v, ok := strings.Cut(s, "=")
				if !ok || m == "" || v == "" {
					return &exitError{code: 2, err: fmt.Errorf("--set %q: want MODEL=VERSION", s)}
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

func newPromoteCmd() *cobra.Command {
	var f clientFlags
	var wait time.Duration
	var noFinalize bool
	cmd := &cobra.Command{
		Use:   "promote PLAN",
		Short: "Promote a plan; exit 1 when the promotion is rejected (its findings are printed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(f.output, "table", "json"); err != nil {
				return err
			}
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
				return &exitError{code: 1, err: fmt.Errorf("promotion of %s rejected: %s", args[0], strings.Join(d.Codes, ", "))}
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
func awaitDecision(ctx context.Context, nc *nats.Conn, plan string, after uint64, wait time.Duration) (*events.PromotionDecided, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.PlanSubject(plan)}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1,
	})
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("following plan %s: %v", plan, err)}
	}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrNoMessages) {
				return nil, &exitError{code: 1, err: fmt.Errorf("no decision for %s within %s: the catch-up work is still outstanding (see `tidemark status`)", plan, wait)}
			}
			return nil, &exitError{code: 2, err: err}
		}
		ev, err := events.Decode(msg.Data())
		if err != nil {
			continue
		}
		if d, ok := ev.Payload.(events.PromotionDecided); ok {
			return &d, nil
		}
	}
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

func newRepairsCmd() *cobra.Command {
	var f clientFlags
	var env string
	cmd := &cobra.Command{
		Use:   "repairs",
		Short: "List open repair debt: gaps promotions accepted that the scheduler has not filled yet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(f.output, "table", "json"); err != nil {
				return err
			}
			r, err := request(cmd, f.natsURL, &commands.OpenRepairs{Env: env})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return json.NewEncoder(out).Encode(r.Repairs)
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
