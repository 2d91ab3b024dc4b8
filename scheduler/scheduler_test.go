package scheduler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/scheduler"
	"github.com/tidemark/tidemark/work"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func hr(a, b int) interval.Range {
	return interval.R(t0.Add(time.Duration(a)*time.Hour), t0.Add(time.Duration(b)*time.Hour))
}

// fakeEngine is the engine's parts as the loops see them: a projection
// the test sets (Proj), and a handler that records commands and answers
// from replies (an accepted, empty reply once they run out). view, when
// set, runs before each Read (to move the projection on).
type fakeEngine struct {
	st      *projections.State
	view    func(st *projections.State)
	views   int
	cmds    []commands.Command
	replies []commands.Reply
}

func (e *fakeEngine) Handle(_ context.Context, cmd commands.Command) commands.Reply {
	if err := cmd.Validate(); err != nil {
		return commands.Rejection(err)
	}
	e.cmds = append(e.cmds, cmd)
	if len(e.cmds) <= len(e.replies) {
		return e.replies[len(e.cmds)-1]
	}
	return commands.Reply{Accepted: true}
}

func (e *fakeEngine) Read(fn func(st *projections.State)) {
	e.views++
	if e.view != nil {
		e.view(e.st)
	}
	fn(e.st)
}

func (e *fakeEngine) Watch() (<-chan struct{}, error) { return make(chan struct{}), nil }

var (
	_ commands.Handler     = (*fakeEngine)(nil)
	_ scheduler.Projection = (*fakeEngine)(nil)
	_ scheduler.Projection = (*live.Projection)(nil) // the engine's
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// catchUps is a catch-up driver on e's parts, at t0, running r.
func (e *fakeEngine) catchUps(r work.Runner) *scheduler.CatchUps {
	return &scheduler.CatchUps{Handler: e, Proj: e, Clock: func() time.Time { return t0 }, Logger: quiet, Runner: r}
}

func TestTickID(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	tests := []struct {
		env  string
		t    time.Time
		want string
	}{
		{"prod", t0, "$tick:prod:2024-01-01T00:00:00Z"},
		{"prod", t0.Add(90 * time.Minute), "$tick:prod:2024-01-01T01:30:00Z"},
		{"prod", t0.In(cet), "$tick:prod:2024-01-01T00:00:00Z"}, // the same instant in another zone
		{"prod", t0.Add(999 * time.Millisecond), "$tick:prod:2024-01-01T00:00:00Z"},
		{"dev_2-x", time.Date(2025, 12, 31, 23, 55, 0, 0, time.UTC), "$tick:dev_2-x:2025-12-31T23:55:00Z"},
	}
	for _, tt := range tests {
		got := scheduler.TickID(tt.env, tt.t)
		if got != tt.want {
			t.Errorf("TickID(%s, %v) = %q, want %q", tt.env, tt.t, got, tt.want)
		}
		if again := scheduler.TickID(tt.env, tt.t); again != got {
			t.Errorf("TickID not deterministic: %q, then %q", got, again)
		}
		c := &commands.AdvanceScheduler{Meta: commands.Meta{ID: got}, Env: tt.env, Generation: 1}
		if err := c.Validate(); err != nil || !commands.IsInternalID(got) {
			t.Errorf("TickID %q: not a valid reserved id: %v", got, err)
		}
	}
	// The longest env name still gives a valid id.
	long := string(slices.Repeat([]byte("e"), 128))
	c := &commands.AdvanceScheduler{Meta: commands.Meta{ID: scheduler.TickID(long, t0)}, Env: long, Generation: 1}
	if err := c.Validate(); err != nil {
		t.Errorf("TickID of a 128-byte env: %v", err)
	}
	if scheduler.TickID("a", t0) == scheduler.TickID("b", t0) || scheduler.TickID("a", t0) == scheduler.TickID("a", t0.Add(5*time.Minute)) {
		t.Error("TickID does not tell envs or ticks apart")
	}
}

func TestRetryID(t *testing.T) {
	if got, want := scheduler.RetryID("p1", 42), "$catch-up-retry:p1:42"; got != want {
		t.Errorf("RetryID = %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, plan := range []string{"p", "p1", "p_1", "P-1"} {
		for _, seq := range []uint64{1, 11, 1<<64 - 1} {
			id := scheduler.RetryID(plan, seq)
			if seen[id] {
				t.Errorf("RetryID(%s, %d) = %q, used before", plan, seq, id)
			}
			seen[id] = true
			c := &commands.Promote{Meta: commands.Meta{ID: id}, Plan: plan}
			if err := c.Validate(); err != nil || !commands.IsInternalID(id) {
				t.Errorf("RetryID %q: not a valid reserved id: %v", id, err)
			}
		}
	}
}

// state has two envs: prod serves a (hourly), b (at :30 every two hours)
// and a snapshot the state does not know; dev serves d (daily).
func state() *projections.State {
	st := projections.New()
	add := func(id, cron string) {
		m, v, _ := events.ParseSnapshotID(id)
		sched := interval.MustSchedule(cron, "", false)
		st.Snapshots[id] = &projections.Snapshot{SnapshotRegistered: events.SnapshotRegistered{Snapshot: id, Model: m, Version: v, Cron: cron, Unit: sched.Unit()},
			Schedule: sched}
	}
	add("a@v1", "@hourly")
	add("b@v1", "30 */2 * * *")
	add("d@v1", "@daily")
	st.Envs["prod"] = &projections.Env{Name: "prod", Generation: 3, Incumbents: map[string]string{"a": "a@v1", "b": "b@v1", "x": "x@gone"}}
	st.Envs["dev"] = &projections.Env{Name: "dev", Generation: 1, Incumbents: map[string]string{"d": "d@v1"}}
	st.Envs["empty"] = &projections.Env{Name: "empty", Incumbents: map[string]string{}}
	return st
}

func TestNextTick(t *testing.T) {
	st := state()
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	tests := []struct {
		name string
		envs []string
		t    time.Time
		want time.Time
	}{
		{"all envs, on a tick: the next one", nil, t0, min(30)},
		{"all envs, just before a tick", nil, min(29), min(30)},
		{"all envs, on the :30 tick", nil, min(30), min(60)},
		{"prod, between ticks", []string{"prod"}, min(61), min(120)},
		{"prod, on the hour: b's :30 first", []string{"prod"}, min(120), min(150)},
		{"dev only", []string{"dev"}, min(30), t0.Add(24 * time.Hour)},
		{"dev, on midnight", []string{"dev"}, t0.Add(24 * time.Hour), t0.Add(48 * time.Hour)},
		{"sub-second past a tick", []string{"dev"}, t0.Add(time.Millisecond), t0.Add(24 * time.Hour)},
		{"another zone", []string{"dev"}, t0.Add(23 * time.Hour).In(time.FixedZone("X", -5*3600)), t0.Add(24 * time.Hour)},
		{"an env without incumbents", []string{"empty"}, t0, time.Time{}},
		{"an unknown env", []string{"nope"}, t0, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scheduler.NextTick(st, tt.envs, tt.t)
			if !got.Equal(tt.want) {
				t.Errorf("NextTick(%v, %v) = %v, want %v", tt.envs, tt.t, got, tt.want)
			}
		})
	}
	if got := scheduler.NextTick(projections.New(), nil, t0); !got.IsZero() {
		t.Errorf("NextTick of an empty state = %v, want zero", got)
	}
}

func TestTick(t *testing.T) {
	tick := t0.Add(3 * time.Hour)
	advs := []events.SchedulerAdvanced{{Env: "prod", Model: "a", Snapshot: "a@v1", Tick: tick, Ranges: []interval.Range{hr(2, 3)}, Generation: 3}}
	reject := func(c commands.Code) commands.Reply { return commands.Reply{Code: c, Message: string(c)} }
	stale := reject(commands.CodeStaleGeneration)
	tests := []struct {
		name       string
		env        string
		gen        uint64
		replies    []commands.Reply
		bump       bool // each View after the first moves the generation on
		wantAdvs   []events.SchedulerAdvanced
		wantFenced int
		wantCode   commands.Code // of the error; "" for none
		wantGens   []uint64      // the generation each advance carried
		wantViews  int
	}{
		{name: "advances at the generation given", env: "prod", gen: 2, replies: []commands.Reply{{Accepted: true, Advances: advs}},
			wantAdvs: advs, wantGens: []uint64{2}},
		{name: "generation 0 is read from the projection", env: "prod", replies: []commands.Reply{{Accepted: true, Advances: advs}},
			wantAdvs: advs, wantGens: []uint64{3}, wantViews: 1},
		{name: "nothing due", env: "prod", gen: 3, wantGens: []uint64{3}},
		{name: "an env with no promoted models", env: "empty", wantCode: commands.CodeNotFound, wantViews: 1},
		{name: "an unknown env", env: "nope", wantCode: commands.CodeNotFound, wantViews: 1},
		{name: "fenced once: re-read and advance", env: "prod", gen: 2, bump: true, replies: []commands.Reply{stale, {Accepted: true, Advances: advs}},
			wantAdvs: advs, wantFenced: 1, wantGens: []uint64{2, 3}, wantViews: 1},
		{name: "fenced on every try", env: "prod", gen: 1, bump: true, replies: []commands.Reply{stale, stale, stale, stale, stale},
			wantFenced: scheduler.MaxFencedRetries, wantCode: commands.CodeStaleGeneration, wantGens: []uint64{1, 3, 4, 5}, wantViews: 3},
		{name: "recorded by another replica", env: "prod", gen: 3, replies: []commands.Reply{reject(commands.CodeIdempotencyConflict)},
			wantGens: []uint64{3}},
		{name: "fenced, then recorded by another replica", env: "prod", gen: 2, replies: []commands.Reply{stale, reject(commands.CodeIdempotencyConflict)},
			wantFenced: 1, wantGens: []uint64{2, 3}, wantViews: 1},
		{name: "another rejection", env: "prod", gen: 3, replies: []commands.Reply{reject(commands.CodeUnavailable)},
			wantCode: commands.CodeUnavailable, wantGens: []uint64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{st: state(), replies: tt.replies}
			if tt.bump {
				e.view = func(st *projections.State) {
					if e.views > 1 {
						st.Envs["prod"].Generation++
					}
				}
			}
			got, fenced, err := (&scheduler.Scheduler{Handler: e, Proj: e, Logger: quiet}).Tick(t.Context(), tt.env, tick, tt.gen)
			if !reflect.DeepEqual(got, tt.wantAdvs) || fenced != tt.wantFenced {
				t.Errorf("Tick = %v, fenced %d; want %v, fenced %d", got, fenced, tt.wantAdvs, tt.wantFenced)
			}
			var ce *commands.Error
			switch {
			case tt.wantCode == "" && err != nil:
				t.Errorf("Tick error %v, want none", err)
			case tt.wantCode != "" && (!errors.As(err, &ce) || ce.Code != tt.wantCode):
				t.Errorf("Tick error %v, want a %s rejection", err, tt.wantCode)
			}
			var gens []uint64
			for _, c := range e.cmds {
				a := c.(*commands.AdvanceScheduler)
				gens = append(gens, a.Generation)
				want := commands.Meta{ID: scheduler.TickID(tt.env, tick), Actor: "scheduler", At: tick}
				if a.Meta != want || a.Env != tt.env {
					t.Errorf("advance %+v, want meta %+v, env %s", *a, want, tt.env)
				}
			}
			if !slices.Equal(gens, tt.wantGens) {
				t.Errorf("advances at generations %v, want %v", gens, tt.wantGens)
			}
			if e.views != tt.wantViews {
				t.Errorf("%d views, want %d", e.views, tt.wantViews)
			}
		})
	}
}

// runner records the items it is given and fails with err.
type runner struct {
	items []work.Item
	err   error
}

func (r *runner) Run(_ context.Context, it work.Item, _ time.Time) error {
	r.items = append(r.items, it)
	return r.err
}

// catchUpState has three plans with an open catch-up request: p3 (seq 10)
// with nothing to compute, p1 (seq 15) with a@v2 [5h, 8h) still missing
// [6h, 8h), p2 (seq 20) with all its work done; and p4, whose request was
// answered.
func catchUpState() *projections.State {
	st := projections.New()
	st.Coverage["a_t"] = interval.NewSet(hr(0, 6))
	st.Coverage["b_t"] = interval.NewSet(hr(0, 10))
	open := func(plan string, seq uint64, ws ...events.CatchUpWork) {
		st.Plans[plan] = &projections.Plan{Built: events.PlanBuilt{Plan: plan, Env: "prod"}, BuiltSeq: 1,
			CatchUp: &events.CatchUpRequested{Plan: plan, Env: "prod", Work: ws}, CatchUpSeq: seq, DecisionSeq: 2}
	}
	open("p1", 15, events.CatchUpWork{Model: "a", Snapshot: "a@v2", Table: "a_t", Ranges: []interval.Range{hr(5, 8)}},
		events.CatchUpWork{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: []interval.Range{hr(8, 10)}, Recompute: []interval.Range{hr(2, 3)}})
	open("p2", 20, events.CatchUpWork{Model: "b", Snapshot: "b@v2", Table: "b_t", Ranges: []interval.Range{hr(8, 10)}})
	open("p3", 10)
	open("p4", 5)
	st.Plans["p4"].DecisionSeq = 6
	return st
}

func TestCatchUpsStep(t *testing.T) {
	promoted := func(e *fakeEngine) []string {
		var out []string
		for _, c := range e.cmds {
			p := c.(*commands.Promote)
			out = append(out, p.Plan+" "+p.ID)
			if p.Actor != "catch-up" || p.Correlation != p.Plan {
				t.Errorf("promote meta %+v", p.Meta)
			}
		}
		return out
	}
	t.Run("without a runner, plans with work left wait", func(t *testing.T) {
		e := &fakeEngine{st: catchUpState()}
		if err := e.catchUps(nil).Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string{"p3 $catch-up-retry:p3:10", "p2 $catch-up-retry:p2:20"}
		if got := promoted(e); !slices.Equal(got, want) {
			t.Errorf("promoted %v, want %v", got, want)
		}
	})
	t.Run("with a runner, the outstanding work is computed first", func(t *testing.T) {
		e := &fakeEngine{st: catchUpState()}
		r := &runner{}
		if err := e.catchUps(r).Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string{"p3 $catch-up-retry:p3:10", "p1 $catch-up-retry:p1:15", "p2 $catch-up-retry:p2:20"}
		if got := promoted(e); !slices.Equal(got, want) {
			t.Errorf("promoted %v, want %v", got, want)
		}
		wantItem := work.Item{RunKind: events.RunCatchUp, Env: "prod", Plan: "p1", Steps: []work.Step{
			{Model: "a", Version: "v2", Snapshot: "a@v2", Ranges: []interval.Range{hr(6, 8)}, RunID: "catch_up:p1"},
		}}
		if len(r.items) != 1 || !reflect.DeepEqual(r.items[0], wantItem) {
			t.Errorf("runner got %+v, want [%+v]", r.items, wantItem)
		}
	})
	t.Run("a runner failure stops the pass", func(t *testing.T) {
		e := &fakeEngine{st: catchUpState()}
		boom := errors.New("boom")
		err := e.catchUps(&runner{err: boom}).Step(t.Context())
		if !errors.Is(err, boom) {
			t.Errorf("Step = %v, want boom", err)
		}
		if got := promoted(e); len(got) != 1 {
			t.Errorf("promoted %v, want p3 only", got)
		}
	})
	t.Run("a rejected retry stops the pass", func(t *testing.T) {
		e := &fakeEngine{st: catchUpState(), replies: []commands.Reply{{Code: commands.CodeConflict, Message: "busy"}}}
		err := e.catchUps(nil).Step(t.Context())
		var ce *commands.Error
		if !errors.As(err, &ce) || ce.Code != commands.CodeConflict {
			t.Errorf("Step = %v, want a conflict", err)
		}
		if got := promoted(e); len(got) != 1 {
			t.Errorf("promoted %v, want p3 only", got)
		}
	})
	t.Run("nothing open", func(t *testing.T) {
		e := &fakeEngine{st: projections.New()}
		if err := e.catchUps(&runner{}).Step(t.Context()); err != nil || len(e.cmds) != 0 {
			t.Errorf("Step = %v, %d commands; want nil, none", err, len(e.cmds))
		}
	})
}
