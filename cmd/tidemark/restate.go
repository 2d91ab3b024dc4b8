package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// newRestateCmd is `tidemark restate`: the restate command, and with
// --wait the wait until its work is recomputed.
func newRestateCmd() *cobra.Command {
	var f clientFlags
	var id, env, model, reason string
	var ranges []string
	var generation uint64
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "restate --env ENV --model MODEL --range START/END...",
		Short: "Recompute ranges of a model, then the overlapping intervals of every model downstream of it",
		Long: `Restate ranges of a model in an environment: its incumbent's ranges
(widened to whole intervals of its unit) and every interval of its
transitively downstream models that overlaps them are invalidated and
recomputed with each incumbent's own logic, parents before children
(docs/restatement.md). Recorded as a RestatementRequested event with the
IntervalsInvalidated of every table it touches, in one atomic batch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(ranges) == 0 {
				return &exitError{kind: usage, err: fmt.Errorf("--range is required: START/END in RFC 3339, e.g. 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z")}
			}
			var rs []interval.Range
			for _, s := range ranges {
				r, err := interval.ParseRange(s)
				if err != nil {
					return &exitError{kind: usage, err: fmt.Errorf("--range: %w", err)}
				}
				rs = append(rs, r)
			}
			if id == "" {
				id = commands.NewID()
			}
			c := &commands.Restate{Meta: commands.Meta{ID: id, Actor: "cli"}, Env: env, Model: model, Ranges: rs, Generation: generation, Reason: reason}
			nc, err := connect(f.natsURL)
			if err != nil {
				return err
			}
			defer nc.Close()
			r, err := send(cmd.Context(), nc, c)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			req := r.Restatement
			if req == nil {
				// A retry of an id already applied: the engine answers
				// "already applied" without the request.
				fmt.Fprintf(out, "restate %s: %s (seq %d)\n", id, r.Message, r.Seq)
				return nil
			}
			if f.output == "json" {
				if err := json.NewEncoder(out).Encode(req); err != nil {
					return err
				}
			} else {
				printRestatement(out, req, r.Seq)
			}
			if wait <= 0 {
				return nil
			}
			return awaitRestate(cmd.Context(), nc, req, r.Seq, wait, cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&id, "id", "", "command id (default: generated); a retry with the same id is applied once")
	fl.StringVar(&env, "env", "", "the environment")
	fl.StringVar(&model, "model", "", "the model to restate")
	fl.StringArrayVar(&ranges, "range", nil, "START/END (RFC 3339) to restate; repeat for several ranges")
	fl.Uint64Var(&generation, "generation", 0, "refuse the restatement (stale_generation) unless the environment is at this generation (0: any)")
	fl.StringVar(&reason, "reason", "", "why, for the record (one line, at most 1024 bytes)")
	fl.DurationVar(&wait, "wait", 0, "then wait, up to this long, until the restated intervals are computed again (exit 1 if they are not, or when their work was given up)")
	return cmd
}

// printRestatement is the restatement for people: what each model
// recomputes and what was invalidated.
func printRestatement(w io.Writer, req *events.RestatementRequested, seq uint64) {
	fmt.Fprintf(w, "restating %s in %s (%s, generation %d, seq %d): %s\n", req.Model, req.Env, req.Snapshot, req.Generation, seq, strings.Join(interval.Set(req.Ranges).Strings(), ", "))
	for _, wk := range req.Work {
		fmt.Fprintf(w, "  %s recomputes %s", wk.Snapshot, strings.Join(interval.Set(wk.Ranges).Strings(), ", "))
		if inv := interval.Set(wk.Invalidated); !inv.Equal(interval.Set(wk.Ranges)) {
			fmt.Fprintf(w, " (invalidated %s)", dash(strings.Join(inv.Strings(), ", ")))
		}
		fmt.Fprintln(w)
	}
}

// restateLeft is what the restatement's tables still miss, as a status
// answer shows them ("" when nothing), or an error when its work will not
// be done: the environment moved to another generation, or a step of it
// was given up after the request (a final failure of restate work).
func restateLeft(st commands.Reply, req *events.RestatementRequested, after uint64) (string, error) {
	var env *commands.EnvStatus
	for i := range st.Envs {
		if st.Envs[i].Env == req.Env {
			env = &st.Envs[i]
		}
	}
	if env == nil {
		return "", &exitError{kind: failed, err: fmt.Errorf("--wait: status shows no environment %s", req.Env)}
	}
	if env.Generation != req.Generation {
		return "", &exitError{kind: failed, err: fmt.Errorf("--wait: environment %s moved to generation %d (the restatement read %d): its work is no longer recorded; restate again", req.Env, env.Generation, req.Generation)}
	}
	var left []string
	for _, wk := range req.Work {
		for _, m := range env.Models {
			if m.Snapshot != wk.Snapshot {
				continue
			}
			if f := m.LastFailure; f != nil && f.Final && f.RunKind == events.RunRestate && f.Seq > after {
				return "", &exitError{kind: failed, err: fmt.Errorf("--wait: the restatement's work of %s was given up after %d attempt(s): %s", wk.Snapshot, f.Attempt, f.Error)}
			}
			// Covered: before the frontier and no hole there.
			var miss interval.Set
			for _, r := range wk.Ranges {
				if end := m.Frontier; end.Before(r.End) {
					miss = miss.Add(interval.R(maxTime(r.Start, end), r.End))
				}
				miss = miss.AddSet(interval.NewSet(m.Missing...).Clip(r))
			}
			if !miss.Empty() {
				left = append(left, wk.Snapshot+" "+strings.Join(miss.Strings(), ", "))
			}
		}
	}
	return strings.Join(left, "; "), nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// awaitRestate asks the server for the status until the restatement req
// (recorded at seq) is recomputed, for at most wait. Interrupted (ctx
// ends: Ctrl-C), it says that the restatement stays.
func awaitRestate(ctx context.Context, nc *nats.Conn, req *events.RestatementRequested, seq uint64, wait time.Duration, stderr io.Writer) error {
	deadline := time.Now().Add(wait)
	stays := func(err error) error {
		if ctx.Err() == nil {
			return err
		}
		return &exitError{kind: failed, err: fmt.Errorf("interrupted: the restatement of %s in %s (seq %d) is recorded and stays; its work goes on: `tidemark status --env %s` shows it", req.Model, req.Env, seq, req.Env)}
	}
	for {
		st, err := send(ctx, nc, &commands.Status{Env: req.Env})
		if err != nil {
			return stays(err)
		}
		left, err := restateLeft(st, req, seq)
		if err != nil {
			return err
		}
		if left == "" {
			fmt.Fprintf(stderr, "restate %s: recomputed\n", req.Model)
			return nil
		}
		if !time.Now().Before(deadline) {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: the restatement is not recomputed after %s: %s still missing (is `tidemark serve` computing its work: --builtin-worker, or a `tidemark worker`?)", wait, left)}
		}
		if err := pause(ctx, 250*time.Millisecond, deadline); err != nil {
			return stays(err)
		}
	}
}
