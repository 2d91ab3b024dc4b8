package decide

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// advanceOf is the advance of model among advs, or nil.
func advanceOf(advs []events.SchedulerAdvanced, model string) *events.SchedulerAdvanced {
	for i := range advs {
		if advs[i].Model == model {
			return &advs[i]
		}
	}
	return nil
}

func modelsOf(advs []events.SchedulerAdvanced) []string {
	var out []string
	for _, a := range advs {
		out = append(out, a.Model)
	}
	return out
}

// DESIGN.md, "Precise rules", lookback: whenever a tick makes new
// intervals ready for a model, its work also recomputes the N whole
// intervals before the first newly ready one, clipped to the model's start.
func TestLookback(t *testing.T) {
	for _, c := range []struct {
		name     string
		m        model
		deployAt time.Time
		// before are the ticks run (and completed) before the one checked.
		before []time.Time
		tick   time.Time
		want   interval.Set
	}{
		{
			// The example of DESIGN.md: hourly, N = 1, tick 11:00 makes
			// [10:00, 11:00) ready: the work is [09:00, 11:00).
			name: "hourly N=1", m: model{name: "events", lookback: 1},
			deployAt: h(6), before: []time.Time{h(7), h(8), h(9), h(10)}, tick: h(11),
			want: rs(hrs(9, 11)),
		},
		{
			name: "hourly N=3", m: model{name: "events", lookback: 3},
			deployAt: h(6), before: []time.Time{h(7), h(8), h(9), h(10)}, tick: h(11),
			want: rs(hrs(7, 11)),
		},
		{
			// `0 */6 * * *` with unit hour, N = 1, tick 18:00: [11:00, 18:00).
			name: "six-hourly unit hour N=1", m: model{name: "events", cron: "0 */6 * * *", unit: interval.Hour, lookback: 1},
			deployAt: h(6), before: []time.Time{h(12)}, tick: h(18),
			want: rs(hrs(11, 18)),
		},
		{
			// Clipped to the model's start: N = 3 before 01:00 is [00:00, 01:00).
			name: "clipped to start", m: model{name: "events", lookback: 3},
			deployAt: h(1), tick: h(2),
			want: rs(hrs(0, 2)),
		},
		{
			name: "clipped to a later start", m: model{name: "events", lookback: 5, start: h(3)},
			deployAt: h(6), before: []time.Time{h(7)}, tick: h(8),
			want: rs(hrs(3, 8)),
		},
		{
			// @daily with unit hour: the tick makes 24 intervals ready; the
			// lookback is the one hour before the first of them.
			name: "daily unit hour N=1", m: model{name: "events", cron: "@daily", unit: interval.Hour, lookback: 1},
			deployAt: day(1), tick: day(2),
			want: rs(interval.R(day(1).Add(-time.Hour), day(2))),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := deployed(t, c.deployAt, c.m)
			for _, b := range c.before {
				w.tick("prod", b)
			}
			advs := w.advance("prod", c.tick)
			if len(advs) != 1 {
				t.Fatalf("advances %v", advs)
			}
			a := advs[0]
			if got := interval.NewSet(a.Ranges...); !got.Equal(c.want) {
				t.Fatalf("work %v, want %v", got, c.want)
			}
			if !a.Tick.Equal(c.tick) {
				t.Errorf("tick %v, want %v", a.Tick, c.tick)
			}
			if len(a.Repairs) > 0 {
				t.Errorf("repairs %v without debt", a.Repairs)
			}
		})
	}
}

// Lookback belongs to a tick that makes new intervals ready: a second
// advance for the same tick, or one between ticks, schedules nothing.
func TestLookbackOnlyWithNewlyReadyIntervals(t *testing.T) {
	w := deployed(t, h(6), model{name: "events", lookback: 2})
	w.tick("prod", h(7))
	for _, at := range []time.Time{h(7), h(7).Add(30 * time.Minute)} {
		dec := w.must(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, at)
		if len(dec.Events) != 0 || len(dec.Reply.Advances) != 0 {
			t.Fatalf("advance at %v after the 07:00 tick ran: %v", at, dec.Reply.Advances)
		}
	}
}

// Lookback belongs only to the ticks that fire (issue 33): deployed at
// 06:00, events' 06:00 tick is the deploy's instant. The 06:30 tick of
// another model, or an advance at 06:20 that is nobody's tick, must not
// add that tick's lookback [02:00, 05:00); events' own 07:00 tick adds its
// own, [03:00, 06:00).
func TestLookbackOnlyForTicksThatFire(t *testing.T) {
	w := deployed(t, h(6), model{name: "events", lookback: 3}, model{name: "halves", cron: "*/30 * * * *", start: h(6)})
	if advs := w.advance("prod", h(6).Add(20*time.Minute)); len(advs) != 0 {
		t.Fatalf("an advance at 06:20, no model's tick, schedules %v", advs)
	}
	advs := w.tick("prod", h(6).Add(30*time.Minute))
	if a := advanceOf(advs, "events"); a != nil {
		t.Fatalf("halves' 06:30 tick schedules %v for events (the lookback of its 06:00 tick, which did not fire)", interval.Set(a.Ranges))
	}
	if advanceOf(advs, "halves") == nil {
		t.Fatalf("06:30 advances %v: no halves", modelsOf(advs))
	}
	a := advanceOf(w.tick("prod", h(7)), "events")
	if a == nil {
		t.Fatal("events' own 07:00 tick schedules nothing")
	}
	if got, want := interval.NewSet(a.Ranges...), rs(hrs(3, 7)); !got.Equal(want) {
		t.Errorf("07:00 work %v, want %v", got, want)
	}
}

// The scheduler, at each tick of any incumbent, fills every missing ready
// interval of all the env's incumbents: work a paused worker skipped is
// picked up at the next tick of any model.
func TestTickFillsEveryIncumbent(t *testing.T) {
	w := deployed(t, day(1), model{name: "hourly"}, model{name: "daily", cron: "@daily"})
	// Midnight: both models advance; the worker is paused.
	advs := w.advance("prod", day(2))
	if got := modelsOf(advs); len(got) != 2 {
		t.Fatalf("midnight advances %v", got)
	}
	// 01:00 is a tick of hourly only; daily's skipped day is scheduled too.
	advs = w.advance("prod", day(2).Add(time.Hour))
	daily := advanceOf(advs, "daily")
	if daily == nil {
		t.Fatalf("01:00 advances %v: the daily model's skipped work is not picked up", modelsOf(advs))
	}
	if got, want := interval.NewSet(daily.Ranges...), rs(interval.R(day(1), day(2))); !got.Equal(want) {
		t.Errorf("daily work %v, want %v", got, want)
	}
	hourly := advanceOf(advs, "hourly")
	if hourly == nil {
		t.Fatalf("no hourly advance")
	}
	if got, want := interval.NewSet(hourly.Ranges...), rs(interval.R(day(1), day(2).Add(time.Hour))); !got.Equal(want) {
		t.Errorf("hourly work %v, want %v", got, want)
	}
	// Once the work is done, a tick of the hourly model schedules only it.
	for _, a := range advs {
		w.complete(a.Snapshot, day(2).Add(time.Hour), events.RunScheduled, a.Ranges...)
	}
	advs = w.advance("prod", day(2).Add(2*time.Hour))
	if got := modelsOf(advs); len(got) != 1 || got[0] != "hourly" {
		t.Errorf("02:00 advances %v, want [hourly]", got)
	}
}

// Work is scheduled in dependency order, whatever the names.
func TestTickInDependencyOrder(t *testing.T) {
	w := deployed(t, h(6), model{name: "z_raw"}, model{name: "m_mid", deps: []string{"z_raw"}}, model{name: "a_agg", deps: []string{"m_mid"}})
	advs := w.advance("prod", h(7))
	got := modelsOf(advs)
	want := []string{"z_raw", "m_mid", "a_agg"}
	if len(got) != len(want) {
		t.Fatalf("advances %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("advances %v, want %v", got, want)
		}
	}
}

// The scheduler never runs a candidate before promotion and never the
// demoted snapshot after it; an accepted promotion bumps the generation,
// a rejected one does not.
func TestSchedulerRunsIncumbentsOnly(t *testing.T) {
	w := standard(t, nil, nil)
	for _, a := range w.tick("prod", h(11)) {
		if a.Snapshot != "events@v1" {
			t.Fatalf("before promotion the scheduler ran %s", a.Snapshot)
		}
	}
	if pd := w.decided("p1", at1107); pd.Outcome != events.Rejected {
		t.Fatalf("strict promotion with a gap: %s", pd.Outcome)
	}
	if g := w.st.Env("prod").Generation; g != 1 {
		t.Fatalf("generation %d after a rejection, want 1", g)
	}
	w.complete("events@v2", at1107, events.RunBackfill, hrs(10, 11))
	pd := w.decided("p1", at1107)
	if pd.Outcome != events.Accepted || pd.Generation != 2 || w.st.Env("prod").Generation != 2 {
		t.Fatalf("acceptance: %s, decision generation %d, env generation %d", pd.Outcome, pd.Generation, w.st.Env("prod").Generation)
	}
	advs := w.tick("prod", h(12))
	if len(advs) != 1 || advs[0].Snapshot != "events@v2" || advs[0].Generation != 2 {
		t.Fatalf("after promotion the scheduler ran %+v", advs)
	}
}

// Promotion fences the old generation's scheduler: a stale advance is an
// error and appends nothing.
func TestStaleGenerationIsFenced(t *testing.T) {
	w := standard(t, nil, []int{1})
	w.tick("prod", h(11))
	if pd := w.decided("p1", at1107); pd.Outcome != events.Accepted {
		t.Fatalf("promotion: %s %v", pd.Outcome, pd.Codes)
	}
	w.refused(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, h(12), commands.CodeStaleGeneration)
	if advs := w.advance("prod", h(12)); len(advs) != 1 || advs[0].Snapshot != "events@v2" {
		t.Fatalf("current generation: %+v", advs)
	}
}

// A scheduler decides its advance against a view at generation 1 while a
// promotion is appended by another writer: the advance's append condition
// must fail, so that it re-reads and is fenced, and never records work for
// the demoted snapshot after the promotion.
func TestFencingUnderConcurrency(t *testing.T) {

	w := standard(t, nil, []int{1})
	w.tick("prod", h(11))
	adv := w.decideOnly(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, h(12))
	if len(adv.Events) != 1 || adv.Events[0].(events.SchedulerAdvanced).Snapshot != "events@v1" {
		t.Fatalf("advance at generation 1: %+v", adv.Events)
	}
	if pd := w.decided("p1", at1107); pd.Outcome != events.Accepted {
		t.Fatalf("promotion: %s %v", pd.Outcome, pd.Codes)
	}
	if holds(w.st, adv.Expect) {
		t.Fatalf("the advance for the demoted events@v1 (generation 1) still appends after the promotion to generation %d: Expect %+v",
			w.st.Env("prod").Generation, adv.Expect)
	}
}
