package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

func newPlanCmd() *cobra.Command {
	var f clientFlags
	var id, env string
	var set []string
	var bounds commands.Bounds
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "plan --env ENV [--set MODEL=VERSION...] | plan --wait D PLAN",
		Short: "Build a plan on the server: capture incumbents and frontiers, fix the backfill set",
		Long: `Build a plan on the server: capture incumbents and frontiers, fix the backfill set.

Without --set the plan sets every changed model: each model whose latest
registered version (by apply or register, derived versions aside) ENV does
not serve yet. With --set, exactly the versions given.

A file reverted to an earlier definition applies as "unchanged" (that
version is registered already), so it is not its model's latest version
and a plan without --set does not choose it: set it with --set
MODEL=VERSION (apply printed the version).

plan --wait D PLAN builds nothing: it waits again for the backfill of the
plan PLAN built before (after Ctrl-C, or a --wait that ran out).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return resumeWait(cmd, f, args[0], wait)
			}
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
			r, err := request(cmd, f.natsURL, &commands.BuildPlan{Plan: id, Env: env, Versions: versions, Changed: len(versions) == 0,
				Bounds: bounds, Meta: commands.Meta{Actor: "cli"}})
			if err != nil && cmd.Context().Err() != nil {
				return &exitError{kind: failed, err: fmt.Errorf("interrupted while plan %s was being built: it may be built (`tidemark status` lists the plans in flight; `tidemark plan --wait D %s` waits for it): %w", id, id, err)}
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.Plan == nil { // changed, and nothing has
				if f.output == "json" {
					return json.NewEncoder(out).Encode(r)
				}
				fmt.Fprintln(out, r.Message)
				return nil
			}
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
	fl.StringSliceVar(&set, "set", nil, "MODEL=VERSION the plan sets (repeat or comma-separate; none: every changed model)")
	fl.IntVar(&bounds.MaxTrailingGapAdvances, "max-trailing-gap-advances", 0, "trailing-gap allowance bound (0: off)")
	fl.IntVar(&bounds.MaxCatchUpAdvances, "max-catch-up-advances", 0, "bounded catch-up bound (0: off)")
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

// resumeWait is plan --wait D PLAN: it waits for the backfill of a plan
// built before, which must exist (exit 3 if not); it builds nothing, so
// it takes none of the building flags.
func resumeWait(cmd *cobra.Command, f clientFlags, plan string, wait time.Duration) error {
	for _, name := range []string{"env", "set", "id", "max-trailing-gap-advances", "max-catch-up-advances"} {
		if cmd.Flags().Changed(name) {
			return &exitError{kind: usage, err: fmt.Errorf("plan --wait D %s waits for a plan built before: --%s builds one (leave out %s to build a plan)", plan, name, plan)}
		}
	}
	if wait <= 0 {
		return &exitError{kind: usage, err: fmt.Errorf("plan %s: give --wait D, how long to wait for its backfill", plan)}
	}
	// The name as a command would carry it (invalid: exit 2).
	if err := (&commands.CancelPlan{Meta: commands.Meta{ID: commands.NewID()}, Plan: plan}).Validate(); err != nil {
		return err
	}
	nc, err := connect(f.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := planExists(cmd.Context(), nc, plan); err != nil {
		return err
	}
	nc.Close()
	return awaitBackfill(cmd, f.natsURL, plan, wait)
}

// planExists is nil when the stream holds an event of plan (its
// PlanBuilt), or when it cannot tell (a user who may not read the
// stream: the wait then finds nothing in flight); a not-found exitError
// when it holds none.
func planExists(ctx context.Context, nc *nats.Conn, plan string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return nil
	}
	if _, err := st.GetLastMsgForSubject(ctx, events.PlanSubject(plan)); errors.Is(err, jetstream.ErrMsgNotFound) {
		return &exitError{kind: notFound, err: fmt.Errorf("no plan %q: the stream holds none (tidemark status lists the plans in flight)", plan)}
	}
	return nil
}

// awaitBackfill asks the server for the status until plan's backfill set
// is covered (or the plan is no longer in flight: accepted meanwhile), for
// at most wait (0: does not wait). Progress goes to stderr: the plan's
// share of its backfill and, per model, its batches done, rows, rate and
// ETA (waitShow: bars on a terminal, lines when they change otherwise).
func awaitBackfill(cmd *cobra.Command, url, plan string, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	nc, err := connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	show := newWaitShow(cmd.ErrOrStderr(), plan)
	err = waitBackfill(cmd, nc, plan, wait, show)
	show.end()
	if err == nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "plan %s: backfill complete\n", plan)
	}
	if cmd.Context().Err() != nil {
		// Interrupted (Ctrl-C): say what stays and how to go on.
		return &exitError{kind: failed, err: interrupted(plan, url, wait)}
	}
	return err
}

// interrupted says, when a wait for plan's backfill is interrupted, that
// the plan stays and how to wait again, promote or cancel it.
func interrupted(plan, url string, wait time.Duration) error {
	server := ""
	if url != defaultNatsURL {
		server = " --nats-url " + url
	}
	return fmt.Errorf("interrupted: plan %s is built and stays; its backfill goes on: `tidemark plan --wait %s %s%s` waits again, "+
		"`tidemark promote %s%s` once it is computed, `tidemark plan cancel %s%s` ends its work", plan, wait, plan, server, plan, server, plan, server)
}

// waitBackfill is awaitBackfill's loop: nil once the backfill is covered.
func waitBackfill(cmd *cobra.Command, nc *nats.Conn, plan string, wait time.Duration, show waitShow) error {
	ctx := cmd.Context()
	deadline := time.Now().Add(wait)
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
		if p != nil {
			show.show(*p)
		}
		if p == nil || p.Complete() {
			return nil
		}
		if p.Cancelled {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s was cancelled, %s", plan, progress(*p))}
		}
		if f := p.Failed(); f != nil {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s failed: model %s (%s) was given up after %d attempt(s): %s", plan, f.Model, f.Snapshot, f.Attempt, f.Error)}
		}
		if !time.Now().Before(deadline) {
			return &exitError{kind: failed, err: fmt.Errorf("--wait: plan %s's backfill is not computed after %s, %s (is `tidemark serve` computing its work: --builtin-worker, or a `tidemark worker`?)", plan, wait, progress(*p))}
		}
		if err := pause(ctx, 250*time.Millisecond, deadline); err != nil {
			return err
		}
	}
}

// waitShow shows a plan's progress while plan --wait waits.
type waitShow interface {
	// show shows a status answer's progress of the plan.
	show(p commands.PlanProgress)
	// end stops showing; nothing is written after it returns.
	end()
}

// newWaitShow shows plan's progress on w: bars when w is a terminal,
// lines otherwise.
func newWaitShow(w io.Writer, plan string) waitShow {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barShow{plan: plan, p: mpb.New(mpb.WithOutput(f), mpb.WithWidth(30)), bars: map[string]*modelBar{}}
	}
	return &lineShow{w: w, plan: plan, models: map[string]string{}}
}

// retrying is the failures of the plan's work its workers retry:
// "; events failed (attempt 2, retrying): <first line>" each.
func retrying(p commands.PlanProgress) string {
	s := ""
	for _, f := range p.Failures {
		if !f.Final {
			s += fmt.Sprintf("; %s failed (attempt %d, retrying): %s", f.Model, f.Attempt, firstLine(f.Error))
		}
	}
	return s
}

// lineShow writes a line for the plan, and one per model, each time its
// figures change: "plan p1: events@v1 backfill: batches 1/3, intervals
// 3/5, 150 rows, 5.0 rows/s, 0.10 intervals/s, ETA 20s". One line per
// change of each, so the output is bounded by the work's batches.
type lineShow struct {
	w      io.Writer
	plan   string
	last   string
	models map[string]string
}

func (l *lineShow) show(p commands.PlanProgress) {
	if s := progress(p) + retrying(p); s != l.last {
		fmt.Fprintf(l.w, "plan %s: %s\n", l.plan, s)
		l.last = s
	}
	for _, m := range p.Models {
		k := modelLabel(m)
		if s := batchFigures(m); s != l.models[k] {
			fmt.Fprintf(l.w, "plan %s: %s: %s\n", l.plan, k, s)
			l.models[k] = s
		}
	}
}

func (l *lineShow) end() {}

// barShow draws a bar per model (batches done of its batches, then its
// other figures); the failures its workers retry are printed above them
// when they change.
type barShow struct {
	plan string
	p    *mpb.Progress
	last string
	bars map[string]*modelBar
}

// modelBar is one model's bar and the figures its decorator shows.
type modelBar struct {
	bar  *mpb.Bar
	text atomic.Pointer[string]
}

func (b *barShow) show(p commands.PlanProgress) {
	if s := retrying(p); s != b.last {
		if s != "" {
			fmt.Fprintf(b.p, "plan %s: %s%s\n", b.plan, progress(p), s)
		}
		b.last = s
	}
	for _, m := range p.Models {
		k := modelLabel(m)
		text := modelFigures(m)
		mb := b.bars[k]
		if mb == nil {
			mb = &modelBar{}
			mb.text.Store(&text)
			mb.bar = b.p.AddBar(int64(m.Batches),
				mpb.PrependDecorators(decor.Name(k, decor.WCSyncSpaceR), decor.CountersNoUnit(" %d/%d batches", decor.WCSyncSpace)),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return *mb.text.Load() })))
			b.bars[k] = mb
		}
		mb.text.Store(&text)
		mb.bar.SetCurrent(int64(m.BatchesDone))
	}
}

func (b *barShow) end() {
	for _, mb := range b.bars {
		mb.bar.Abort(false) // left drawn as it is; a completed bar stays
	}
	b.p.Wait()
}

// modelLabel names a model's step of the plan's work: "events@v1
// backfill".
func modelLabel(m commands.ModelProgress) string {
	return m.Snapshot + " " + string(m.RunKind)
}

// batchFigures is a model's progress for people: "batches 1/3, " then
// modelFigures.
func batchFigures(m commands.ModelProgress) string {
	return fmt.Sprintf("batches %d/%d, %s", m.BatchesDone, m.Batches, modelFigures(m))
}

// modelFigures is a model's progress but its batches, for people:
// "intervals 3/5, 150 rows, 5.0 rows/s, 0.10 intervals/s, ETA 20s" (no
// rates before anything is done, and then "ETA unknown").
func modelFigures(m commands.ModelProgress) string {
	s := fmt.Sprintf("intervals %d/%d, %d rows", m.IntervalsDone, m.Intervals, m.Rows)
	if !m.LastDoneAt.IsZero() {
		s += ", " + perSecond(m.RowsPerSecond) + " rows/s, " + perSecond(m.IntervalsPerSecond) + " intervals/s"
	}
	if d, ok := m.ETA(); ok {
		return s + ", ETA " + roughly(d)
	}
	return s + ", ETA unknown"
}

// perSecond is a rate with the digits that matter: "1234", "12.5", "0.10".
func perSecond(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// roughly is d to the second (to the millisecond under a second).
func roughly(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
