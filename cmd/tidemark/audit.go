package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tidemark/tidemark/events"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/views"
)

func checkFormat(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	return &exitError{code: 2, err: fmt.Errorf("-o %q: want %s", o, strings.Join(allowed, ", "))}
}

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
			"policy version it names, and exits 1 on any divergence. It exits 1, naming them, when\n" +
			"the stream lost events or holds messages that are not tidemark events.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "table", "json"); err != nil {
				return err
			}
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
				return &exitError{code: 1, err: errors.Join(errs...)}
			}
			return nil
		},
	}
	s.register(cmd, true)
	cmd.Flags().BoolVar(&verify, "verify", false, "re-evaluate every recorded decision; exit 1 on any divergence (and, like every reader, on lost events or messages that are not tidemark events)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func nonNilDivs(d []replay.Divergence) []replay.Divergence {
	if d == nil {
		return []replay.Divergence{}
	}
	return d
}

func newStatusCmd() *cobra.Command {
	var s storeFlags
	var env, output string
	var waitAdvance time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show incumbents, frontiers and open repair debt, now (from the server) or as they were (--at, --at-seq, --data-dir)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "table", "json"); err != nil {
				return err
			}
			var envs []commands.EnvStatus
			var open []commands.Repair
			var seq uint64
			var dmg *replay.Damage
			if s.pointInTime() {
				if waitAdvance > 0 {
					return &exitError{code: 2, err: errors.New("--wait-advance asks the running server: not with --data-dir, --at or --at-seq")}
				}
				if s.natsURL == "" && s.dataDir == "" {
					s.natsURL = defaultNatsURL
				}
				recs, closeStore, d, err := s.read(cmd)
				if err != nil {
					return err
				}
				defer closeStore()
				dmg = d
				st := replay.Fold(recs)
				at := lastAt(recs)
				if o, _ := s.options(); !o.At.IsZero() {
					at = o.At
				}
				envs, open = views.Status(st, env, at)
				seq = st.Seq
			} else {
				if s.natsURL == "" {
					s.natsURL = defaultNatsURL
				}
				var r commands.Reply
				var err error
				if waitAdvance > 0 {
					r, err = awaitAdvance(cmd, s.natsURL, env, waitAdvance)
				} else {
					r, err = request(cmd, s.natsURL, &commands.Status{Env: env})
				}
				if err != nil {
					return err
				}
				envs, open, seq = r.Envs, r.Repairs, r.Seq
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				res := map[string]any{"seq": seq, "envs": envs, "open_repairs": open}
				if dmg != nil {
					res["damage"] = dmg
				}
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
				return damageExit(dmg)
			}
			fmt.Fprintf(out, "as of seq %d\n", seq)
			printStatus(out, envs, open)
			return damageExit(dmg)
		},
	}
	s.register(cmd, true)
	cmd.Flags().StringVar(&env, "env", "", "only this environment")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().DurationVar(&waitAdvance, "wait-advance", 0, "first wait, up to this long, until the scheduler has moved the frontier of every incumbent shown past where it is now (its next tick, computed); exit 1 if it does not")
	return cmd
}

// awaitAdvance asks the server for the status until every incumbent's
// frontier in it has moved past the one the first answer showed, and
// returns that status. It asks once a second, for at most wait.
func awaitAdvance(cmd *cobra.Command, url, env string, wait time.Duration) (commands.Reply, error) {
	nc, err := connect(url)
	if err != nil {
		return commands.Reply{}, err
	}
	defer nc.Close()
	ctx := cmd.Context()
	first, err := send(ctx, nc, &commands.Status{Env: env})
	if err != nil {
		return first, err
	}
	type key struct{ env, model string }
	was := map[key]time.Time{}
	var names []string
	for _, e := range first.Envs {
		for _, m := range e.Models {
			was[key{e.Env, m.Model}] = m.Frontier
			names = append(names, e.Env+"/"+m.Model+" at "+stamp(m.Frontier))
		}
	}
	if len(was) == 0 {
		return first, &exitError{code: 1, err: errors.New("--wait-advance: no incumbents to wait for (promote a plan first)")}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "waiting up to %s for the scheduler to advance %s\n", wait, strings.Join(names, ", "))
	deadline := time.Now().Add(wait)
	for {
		r, err := send(ctx, nc, &commands.Status{Env: env})
		if err != nil {
			return r, err
		}
		moved := 0
		for _, e := range r.Envs {
			for _, m := range e.Models {
				if f, ok := was[key{e.Env, m.Model}]; ok && m.Frontier.After(f) {
					moved++
				}
			}
		}
		if moved == len(was) {
			return r, nil
		}
		if !time.Now().Before(deadline) {
			return r, &exitError{code: 1, err: fmt.Errorf("--wait-advance: the scheduler did not advance every incumbent within %s (is `tidemark serve` computing its work: --builtin-worker, or a `tidemark worker`?)", wait)}
		}
		select {
		case <-ctx.Done():
			return r, &exitError{code: 2, err: ctx.Err()}
		case <-time.After(min(time.Second, time.Until(deadline))):
		}
	}
}

// lastAt is the time of the last decoded record (zero when none).
func lastAt(recs []events.Record) time.Time {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Err == nil {
			return recs[i].Event.OccurredAt
		}
	}
	return time.Time{}
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

func newAuditCmd() *cobra.Command {
	var s storeFlags
	var f replay.Filter
	var since, until, output string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the audit trail: plan builds, advances, completions, decisions, finalizations, repairs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "table", "json", "csv"); err != nil {
				return err
			}
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
	fl.StringVarP(&output, "output", "o", "table", "table, json (one object per line) or csv")
	cmd.AddCommand(newExplainCmd())
	return cmd
}

func optTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, &exitError{code: 2, err: fmt.Errorf("%s: want RFC 3339, like 2026-12-01T11:07:00Z", flag)}
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

func newExplainCmd() *cobra.Command {
	var s storeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "explain PLAN",
		Short: "Print a plan's latest decision with its findings and the exact coverage it saw",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, "table", "json"); err != nil {
				return err
			}
			recs, closeStore, dmg, err := s.read(cmd)
			if err != nil {
				return err
			}
			defer closeStore()
			x, err := replay.Explain(recs, args[0])
			if err != nil {
				if dmg != nil {
					err = errors.Join(dmg, err)
				}
				return &exitError{code: 1, err: err}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := json.NewEncoder(out).Encode(x); err != nil {
					return err
				}
				return damageExit(dmg)
			}
			d := x.Decision
			fmt.Fprintf(out, "plan %s for %s (built %s at generation %d, policy %s)\n", x.Plan.Plan, x.Plan.Env, x.Plan.BuiltAt.Format(time.RFC3339), x.Plan.Generation, d.Policy.Name())
			fmt.Fprintf(out, "decision at seq %d: %s [%s], evaluated at %s on the view at seq %d\n", x.DecisionSeq, strings.ToUpper(string(d.Outcome)), strings.Join(d.Codes, ", "), d.EvaluatedAt.Format(time.RFC3339), d.EvaluatedAtSeq)
			if d.CatchUpSeq > 0 {
				fmt.Fprintf(out, "it is the strict retry of the catch-up requested at seq %d\n", d.CatchUpSeq)
			}
			fmt.Fprintln(out, "findings:")
			for _, f := range d.Findings {
				fmt.Fprintf(out, "  %s: %s\n", f.Code, f.Message)
			}
			fmt.Fprintln(out, "coverage the decision saw:")
			for _, v := range x.Views {
				fmt.Fprintf(out, "  %s: candidate %s, incumbent %s, window %s, captured frontier %s\n", v.Model, v.Candidate, dash(v.Incumbent), dash(v.Window), v.CapturedFrontier)
				fmt.Fprintf(out, "    %s covers %s\n", v.Candidate, dash(strings.Join(v.CandidateCoverage, ", ")))
				if v.Incumbent != "" {
					fmt.Fprintf(out, "    %s covers %s\n", v.Incumbent, dash(strings.Join(v.IncumbentCoverage, ", ")))
				}
			}
			if len(x.Divergences) == 0 {
				fmt.Fprintln(out, "re-evaluated today: the same decision")
			} else {
				fmt.Fprintln(out, "re-evaluated today, it differs:")
				for _, dv := range x.Divergences {
					fmt.Fprintf(out, "  %s\n", dv)
				}
				err := errors.New("the recorded decision differs from its re-evaluation")
				if dmg != nil {
					err = errors.Join(dmg, err)
				}
				return &exitError{code: 1, err: err}
			}
			return damageExit(dmg)
		},
	}
	s.register(cmd, false)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}
