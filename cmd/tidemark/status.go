package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/replay"
	"github.com/tidemark/tidemark/views"
)

func newStatusCmd() *cobra.Command {
	var s storeFlags
	var env, output string
	var waitAdvance time.Duration
	var failOnLate bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show incumbents, frontiers and open repair debt, now (from the server) or as they were (--at, --at-seq, --data-dir)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var envs []commands.EnvStatus
			var open []commands.Repair
			var plans []commands.PlanProgress
			var retired []commands.RetiredTable
			var restating []commands.RestateProgress
			var seq uint64
			var dmg *eventlog.Damage
			if s.pointInTime() {
				if waitAdvance > 0 {
					return &exitError{kind: usage, err: errors.New("--wait-advance asks the running server: not with --data-dir, --at or --at-seq")}
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
				plans = views.Plans(st, env)
				retired = views.Retired(st)
				restating = views.Restating(st, env)
				seq = st.Seq
			} else {
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
				envs, open, plans, retired, restating, seq = r.Envs, r.Repairs, r.Plans, r.Retired, r.Restatements, r.Seq
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				envs, open = listsNotNull(envs, open)
				if plans == nil {
					plans = []commands.PlanProgress{}
				}
				res := map[string]any{"seq": seq, "envs": envs, "open_repairs": open, "plans": plans, "retired_tables": orEmpty(retired), "restatements": orEmpty(restating)}
				if dmg != nil {
					res["damage"] = dmg
				}
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
				return lateExit(failOnLate, envs, dmg)
			}
			fmt.Fprintf(out, "as of seq %d\n", seq)
			printStatus(out, envs, open)
			printPlans(out, plans)
			printRestating(out, restating)
			printRetired(out, retired)
			return lateExit(failOnLate, envs, dmg)
		},
	}
	s.register(cmd, true)
	cmd.Flags().StringVar(&env, "env", "", "only this environment")
	outputFlag(cmd, &output, "table", "json")
	cmd.Flags().DurationVar(&waitAdvance, "wait-advance", 0, "first wait, up to this long, until the scheduler has moved the frontier of every incumbent shown past where it is now (its next tick, computed); exit 1 if it does not")
	cmd.Flags().BoolVar(&failOnLate, "fail-on-late", false, "exit 1 when any model shown is late (its frontier behind its readiness frontier by more than its freshness bound): for monitoring scripts")
	return cmd
}

// lateExit is status's exit: the damage's, else with failOnLate exit 1
// (failed) naming the late models of envs, if any.
func lateExit(failOnLate bool, envs []commands.EnvStatus, dmg *eventlog.Damage) error {
	if err := damageExit(dmg); err != nil || !failOnLate {
		return err
	}
	var late []string
	for _, e := range envs {
		for _, m := range e.Models {
			if m.Late {
				late = append(late, e.Env+"/"+m.Model)
			}
		}
	}
	if len(late) == 0 {
		return nil
	}
	return &exitError{kind: failed, err: fmt.Errorf("--fail-on-late: %d late model(s): %s", len(late), strings.Join(late, ", "))}
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
		return first, &exitError{kind: failed, err: errors.New("--wait-advance: no incumbents to wait for (promote a plan first)")}
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
			return r, &exitError{kind: failed, err: fmt.Errorf("--wait-advance: the scheduler did not advance every incumbent within %s (is `tidemark serve` computing its work: --builtin-worker, or a `tidemark worker`?)", wait)}
		}
		if err := pause(ctx, time.Second, deadline); err != nil {
			return r, err
		}
	}
}

// listsNotNull makes every list in envs and open non-nil, so JSON shows
// [] rather than null (a reply decoded from the wire may hold nil ones).
func listsNotNull(envs []commands.EnvStatus, open []commands.Repair) ([]commands.EnvStatus, []commands.Repair) {
	envs, open = orEmpty(envs), orEmpty(open)
	for i := range envs {
		envs[i].Models = orEmpty(envs[i].Models)
		for j := range envs[i].Models {
			envs[i].Models[j].Missing = orEmpty(envs[i].Models[j].Missing)
		}
	}
	for i := range open {
		open[i].Ranges, open[i].Missing = orEmpty(open[i].Ranges), orEmpty(open[i].Missing)
	}
	return envs, open
}

// orEmpty is s, or an empty slice when s is nil.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
