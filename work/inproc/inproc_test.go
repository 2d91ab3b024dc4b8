package inproc_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/inproc"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func hr(a, b int) interval.Range {
	return interval.R(t0.Add(time.Duration(a)*time.Hour), t0.Add(time.Duration(b)*time.Hour))
}

// recorder is a commands.Handler that validates each command as the
// engine does first and records it; reject, when set, answers instead.
type recorder struct {
	cmds   []*commands.CompleteIntervals
	reject func(n int, c *commands.CompleteIntervals) error
}

func (h *recorder) Handle(_ context.Context, cmd commands.Command) commands.Reply {
	c, ok := cmd.(*commands.CompleteIntervals)
	if !ok {
		return commands.Rejection(commands.Errorf(commands.CodeInvalid, "kind", "unexpected %s", cmd.Kind()))
	}
	if err := c.Validate(); err != nil {
		return commands.Rejection(err)
	}
	h.cmds = append(h.cmds, c)
	if h.reject != nil {
		if err := h.reject(len(h.cmds), c); err != nil {
			return commands.Rejection(err)
		}
	}
	return commands.Reply{Accepted: true, Events: 1}
}

func item() work.Item {
	return work.Item{ID: "work-42-catch_up", RunKind: events.RunCatchUp, Env: "prod", Plan: "p1", EventSeq: 42,
		Steps: []work.Step{
			{Model: "a", Version: "v2", Snapshot: "a@v2", Ranges: []interval.Range{hr(0, 2), hr(4, 5)}, RunID: "catch_up:p1"},
			{Model: "b", Version: "v2+p1", Snapshot: "b@v2+p1", Ranges: nil, RunID: "catch_up:p1"},
			{Model: "c", Version: "v3", Snapshot: "c@v3", Ranges: []interval.Range{hr(1, 3)}, RunID: "catch_up:p1"},
		}}
}

// TestRunCompletesEachStep pins the completions Run sends: one per step
// with ranges, in order, carrying the item, its run kind, the step's run id
// and model/version, under "$work:<item>/<step index>", and accepted by
// Validate (the reserved namespace's id rules).
func TestRunCompletesEachStep(t *testing.T) {
	h := &recorder{}
	w := &inproc.Worker{Handler: h, Actor: "worker:builtin"}
	at := t0.Add(100 * time.Hour)
	if err := w.Run(t.Context(), item(), at); err != nil {
		t.Fatal(err)
	}
	want := []*commands.CompleteIntervals{
		{Meta: commands.Meta{ID: "$work:work-42-catch_up/0", Actor: "worker:builtin", At: at, Correlation: "catch_up:p1"},
			Model: "a", Version: "v2", Ranges: []interval.Range{hr(0, 2), hr(4, 5)}, RunKind: events.RunCatchUp, RunID: "catch_up:p1", Work: "work-42-catch_up"},
		{Meta: commands.Meta{ID: "$work:work-42-catch_up/2", Actor: "worker:builtin", At: at, Correlation: "catch_up:p1"},
			Model: "c", Version: "v3", Ranges: []interval.Range{hr(1, 3)}, RunKind: events.RunCatchUp, RunID: "catch_up:p1", Work: "work-42-catch_up"},
	}
	if !reflect.DeepEqual(h.cmds, want) {
		t.Errorf("commands:\n got %+v\nwant %+v", deref(h.cmds), deref(want))
	}
	for _, c := range h.cmds {
		if !commands.IsInternalID(c.ID) {
			t.Errorf("id %q is not in the reserved namespace", c.ID)
		}
	}

	// Run again: the same ids, so the engine records nothing twice.
	again := &recorder{}
	if err := (&inproc.Worker{Handler: again, Actor: "worker:other"}).Run(t.Context(), item(), at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if again.cmds[i].ID != want[i].ID {
			t.Errorf("second run, step %d: id %q, want %q", i, again.cmds[i].ID, want[i].ID)
		}
	}
}

func deref(cs []*commands.CompleteIntervals) []commands.CompleteIntervals {
	out := make([]commands.CompleteIntervals, len(cs))
	for i, c := range cs {
		out[i] = *c
	}
	return out
}

// TestRunIDsDistinct pins that the completion ids differ between steps
// and between items, and that items of every run kind give valid ids.
func TestRunIDsDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, k := range []events.RunKind{events.RunBackfill, events.RunScheduled, events.RunCatchUp, events.RunRepair} {
		for _, seq := range []uint64{1, 10, 11, 1<<64 - 1} {
			it := work.Item{ID: events.WorkID(seq, k), RunKind: k}
			for i := 0; i < 12; i++ {
				it.Steps = append(it.Steps, work.Step{Model: "m", Version: "v", Snapshot: "m@v", Ranges: []interval.Range{hr(i, i+1)}, RunID: "r"})
			}
			h := &recorder{}
			if err := (&inproc.Worker{Handler: h, Actor: "w"}).Run(t.Context(), it, t0); err != nil {
				t.Fatalf("%s: %v", it.ID, err)
			}
			if len(h.cmds) != len(it.Steps) {
				t.Fatalf("%s: %d commands for %d steps", it.ID, len(h.cmds), len(it.Steps))
			}
			for i, c := range h.cmds {
				key := it.ID + " step " + string(rune('a'+i))
				if prev, dup := seen[c.ID]; dup {
					t.Errorf("id %q of %s already used by %s", c.ID, key, prev)
				}
				seen[c.ID] = key
			}
		}
	}
}

// TestRunWithoutID: an item without an id (built by hand, not by Of)
// names no item, and each completion gets a fresh reserved id.
func TestRunWithoutID(t *testing.T) {
	it := item()
	it.ID = ""
	h := &recorder{}
	w := &inproc.Worker{Handler: h, Actor: "w"}
	for range 2 {
		if err := w.Run(t.Context(), it, t0); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, c := range h.cmds {
		if c.Work != "" {
			t.Errorf("completion names work %q", c.Work)
		}
		if !strings.HasPrefix(c.ID, "$work:") || seen[c.ID] {
			t.Errorf("id %q: want a fresh $work: id", c.ID)
		}
		seen[c.ID] = true
	}
	if len(h.cmds) != 4 {
		t.Errorf("%d commands, want 4", len(h.cmds))
	}
}

// TestRunStopsAtRejection pins that Run stops at the first rejected step
// and returns an error that keeps the rejection: the work publisher tells
// transient failures (retried) from final ones (given up) with
// work.Transient.
func TestRunStopsAtRejection(t *testing.T) {
	for _, tt := range []struct {
		code      commands.Code
		transient bool
	}{
		{commands.CodeUnavailable, true},
		{commands.CodeConflict, true},
		{commands.CodeInvalid, false},
		{commands.CodeNotFound, false},
	} {
		t.Run(string(tt.code), func(t *testing.T) {
			h := &recorder{reject: func(n int, _ *commands.CompleteIntervals) error {
				if n == 1 {
					return commands.Errorf(tt.code, "work", "refused")
				}
				return nil
			}}
			err := (&inproc.Worker{Handler: h, Actor: "w"}).Run(t.Context(), item(), t0)
			if err == nil {
				t.Fatal("Run = nil, want the rejection")
			}
			var ce *commands.Error
			if !errors.As(err, &ce) || ce.Code != tt.code || !errors.Is(err, commands.ErrRejected) {
				t.Errorf("Run = %v, want a %s rejection", err, tt.code)
			}
			if got := work.Transient(err); got != tt.transient {
				t.Errorf("Transient(%v) = %v, want %v", err, got, tt.transient)
			}
			if !strings.Contains(err.Error(), "a@v2") {
				t.Errorf("error %q does not name the snapshot", err)
			}
			if len(h.cmds) != 1 {
				t.Errorf("%d commands sent, want 1 (Run goes on after a rejection)", len(h.cmds))
			}
		})
	}
}

// TestHelpersDeriveWork pins that RunAdvances, CatchUp and Backfill
// compute work.Scheduled, work.CatchUp and work.Backfill with their run
// kinds (no item id: fresh ids).
func TestHelpersDeriveWork(t *testing.T) {
	tick := t0.Add(24 * time.Hour)
	advs := []events.SchedulerAdvanced{{Env: "prod", Model: "a", Snapshot: "a@v1", Tick: tick, Ranges: []interval.Range{hr(0, 24)}, Repairs: []interval.Range{hr(3, 4)}, Generation: 1}}
	req := events.CatchUpRequested{Plan: "p1", Env: "prod", Work: []events.CatchUpWork{{Model: "a", Snapshot: "a@v2", Ranges: []interval.Range{hr(5, 6)}, Recompute: []interval.Range{hr(2, 3)}}}}
	plan := events.PlanBuilt{Plan: "p1", Env: "prod", Candidates: []events.Candidate{{Model: "a", Snapshot: "a@v2", Backfill: []interval.Range{hr(0, 5)}}}}
	tests := []struct {
		name string
		run  func(w *inproc.Worker) error
		want work.Item
	}{
		{"RunAdvances", func(w *inproc.Worker) error { return w.RunAdvances(t.Context(), advs, tick) }, work.Scheduled(advs)},
		{"CatchUp", func(w *inproc.Worker) error { return w.CatchUp(t.Context(), req, tick) }, work.CatchUp(req)},
		{"Backfill", func(w *inproc.Worker) error { return w.Backfill(t.Context(), plan, tick) }, work.Backfill(plan)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &recorder{}
			if err := tt.run(&inproc.Worker{Handler: h, Actor: "w"}); err != nil {
				t.Fatal(err)
			}
			if len(h.cmds) != len(tt.want.Steps) {
				t.Fatalf("%d commands, want %d", len(h.cmds), len(tt.want.Steps))
			}
			for i, s := range tt.want.Steps {
				c := h.cmds[i]
				if c.RunKind != tt.want.RunKind || c.RunID != s.RunID || events.SnapshotID(c.Model, c.Version) != s.Snapshot ||
					!interval.Set(c.Ranges).Equal(interval.Set(s.Ranges)) || !c.At.Equal(tick) {
					t.Errorf("step %d: got %+v, want %s %+v", i, *c, tt.want.RunKind, s)
				}
			}
		})
	}
}

// TestRunLargeStep: a step may hold more ranges than one command may carry
// (commands.MaxRanges); the work must still be recorded.
func TestRunLargeStep(t *testing.T) {
	var ranges []interval.Range
	for i := 0; i <= commands.MaxRanges; i++ {
		ranges = append(ranges, hr(2*i, 2*i+1))
	}
	it := work.Item{ID: "work-1-backfill", RunKind: events.RunBackfill, Steps: []work.Step{{Model: "a", Version: "v", Snapshot: "a@v", Ranges: ranges, RunID: "backfill:p"}}}
	h := &recorder{}
	if err := (&inproc.Worker{Handler: h, Actor: "w"}).Run(t.Context(), it, t0); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got interval.Set
	for _, c := range h.cmds {
		got = got.AddSet(c.Ranges)
	}
	if !got.Equal(interval.NewSet(ranges...)) {
		t.Errorf("recorded %d ranges, want %d", len(got), len(ranges))
	}
	// Chunks of at most MaxRanges, each its own deterministic id; the
	// first keeps the step's id.
	wantIDs := []string{"$work:work-1-backfill/0", "$work:work-1-backfill/0.1"}
	if len(h.cmds) != len(wantIDs) {
		t.Fatalf("%d commands, want %d", len(h.cmds), len(wantIDs))
	}
	for i, c := range h.cmds {
		if c.ID != wantIDs[i] || len(c.Ranges) > commands.MaxRanges || c.Work != it.ID {
			t.Errorf("command %d: id %q, %d ranges, work %q; want id %q, at most %d ranges, work %q", i, c.ID, len(c.Ranges), c.Work, wantIDs[i], commands.MaxRanges, it.ID)
		}
	}
}
