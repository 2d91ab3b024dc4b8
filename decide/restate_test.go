package decide

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// days is the range [day(a), day(b)).
func days(a, b int) interval.Range { return interval.R(day(a), day(b)) }

// restated is a world with an hourly events and a daily rollup reading
// it, deployed to prod at 06:00 on day 0 and scheduled until 01:00 on
// day 3: events covers [00:00 day 0, 01:00 day 3), rollup days 0 to 2.
func restated(t *testing.T, extra ...model) *world {
	t.Helper()
	ms := append([]model{{name: "events"}, {name: "rollup", cron: "@daily", deps: []string{"events"}}}, extra...)
	w := deployed(t, h(6), ms...)
	w.run("prod", h(6), day(3).Add(time.Hour))
	if got := w.st.Table("rollup@v1"); !got.Equal(rs(days(0, 3))) {
		t.Fatalf("rollup covers %v before the restatement", got)
	}
	return w
}

// restate restates ranges of model in prod at clock at and returns the
// request it recorded.
func (w *world) restate(model string, at time.Time, r ...interval.Range) (Decision, events.RestatementRequested) {
	w.tb.Helper()
	dec := w.must(&commands.Restate{Env: "prod", Model: model, Ranges: r}, at)
	if dec.Reply.Restatement == nil {
		w.tb.Fatalf("restate %s: no restatement in the reply", model)
	}
	return dec, *dec.Reply.Restatement
}

// wantWork checks a restatement's work, in order: model, snapshot, table,
// ranges to compute and ranges invalidated.
func wantWork(t *testing.T, req events.RestatementRequested, want ...events.RestateWork) {
	t.Helper()
	if len(req.Work) != len(want) {
		t.Fatalf("work %+v, want %d steps", req.Work, len(want))
	}
	for i, g := range req.Work {
		x := want[i]
		if g.Model != x.Model || g.Snapshot != x.Snapshot || g.Table != x.Table ||
			!interval.NewSet(g.Ranges...).Equal(interval.NewSet(x.Ranges...)) || !interval.NewSet(g.Invalidated...).Equal(interval.NewSet(x.Invalidated...)) {
			t.Errorf("work %d: %+v, want %+v", i, g, x)
		}
	}
}

// One hour of hourly events maps to its whole day of the daily rollup:
// both are invalidated with the request, in one batch, and recomputed as
// one restate item, events first. An hour asked off the unit is widened
// to the whole hour.
func TestRestateCascadesToEachUnit(t *testing.T) {
	w := restated(t)
	at := day(3).Add(90 * time.Minute)
	seq := w.st.Seq
	asked := interval.R(h(30).Add(10*time.Minute), h(30).Add(20*time.Minute)) // 06:10-06:20 on day 1
	dec, req := w.restate("events", at, asked)
	wantWork(t, req,
		events.RestateWork{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(30, 31)}, Invalidated: []interval.Range{hrs(30, 31)}},
		events.RestateWork{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{days(1, 2)}, Invalidated: []interval.Range{days(1, 2)}},
	)
	if req.Env != "prod" || req.Model != "events" || req.Snapshot != "events@v1" || req.Generation != 1 ||
		!interval.NewSet(req.Ranges...).Equal(rs(hrs(30, 31))) || req.Run != "restate:"+w.log[len(w.log)-1].Causation || req.EvaluatedAtSeq != seq {
		t.Fatalf("request %+v", req)
	}
	// The request first, then one invalidation per table, in one batch
	// decided on the whole view.
	if len(dec.Events) != 3 {
		t.Fatalf("events %d, want the request and 2 invalidations", len(dec.Events))
	}
	if _, ok := dec.Events[0].(events.RestatementRequested); !ok {
		t.Fatalf("first event %T", dec.Events[0])
	}
	for i, table := range []string{"events@v1", "rollup@v1"} {
		inv, ok := dec.Events[i+1].(events.IntervalsInvalidated)
		if !ok || inv.Table != table || inv.Reason != req.Run {
			t.Fatalf("event %d: %+v, want the invalidation of %s", i+1, dec.Events[i+1], table)
		}
	}
	if dec.Expect.LastSeq == nil || *dec.Expect.LastSeq != seq {
		t.Fatalf("expect %+v, want the whole view at seq %d", dec.Expect, seq)
	}
	// A retry (same id, same command) appends nothing and answers the
	// same request.
	retry := &commands.Restate{Meta: commands.Meta{ID: req.Run[len("restate:"):], At: at}, Env: "prod", Model: "events", Ranges: []interval.Range{asked}}
	if again, err := w.again(retry); err != nil || len(again.Events) != 0 || !again.Reply.Duplicate || again.Reply.Restatement == nil ||
		again.Reply.Restatement.Run != req.Run || len(again.Reply.Restatement.Work) != 2 {
		t.Fatalf("retry: %+v %v", again.Reply, err)
	}
	if got := w.st.Table("events@v1"); got.Overlaps(hrs(30, 31)) || !got.Covers(hrs(0, 30)) || !got.Covers(hrs(31, 73)) {
		t.Fatalf("events covers %v after the restatement", got)
	}
	if got := w.st.Table("rollup@v1"); !got.Equal(rs(days(0, 1), days(2, 3))) {
		t.Fatalf("rollup covers %v after the restatement", got)
	}
	// The work item: one step per model; the restate work's completions
	// name it and restore the coverage.
	id := events.WorkID(seq+1, events.RunRestate)
	item := w.st.Work[id]
	if item == nil || item.RunKind != events.RunRestate || len(item.Steps) != 2 ||
		!item.Steps["events@v1"].Equal(rs(hrs(30, 31))) || !item.Steps["rollup@v1"].Equal(rs(days(1, 2))) {
		t.Fatalf("work item %s: %+v", id, item)
	}
	for _, st := range []struct {
		model string
		r     interval.Range
	}{{"events", hrs(30, 31)}, {"rollup", days(1, 2)}} {
		w.must(&commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Model: st.model, Version: "v1", Ranges: []interval.Range{st.r}, RunID: req.Run, Work: id}}, at)
	}
	if !w.st.Table("rollup@v1").Equal(rs(days(0, 3))) || !w.st.Table("events@v1").Covers(hrs(0, 73)) {
		t.Fatalf("coverage not restored: events %v, rollup %v", w.st.Table("events@v1"), w.st.Table("rollup@v1"))
	}
	if w.st.Runs[events.RunRestate] != 2 {
		t.Fatalf("restate runs %d", w.st.Runs[events.RunRestate])
	}
}

// The cascade is transitive, each child mapped from its parents'
// affected ranges to its own unit: a daily rollup's day maps to the
// hourly report reading it as the day's 24 hours, even the hours the
// report's table does not cover yet but are ready (a computation of them
// may be reading the rows restated), which are computed, not invalidated.
func TestRestateTransitiveAndReadyMissing(t *testing.T) {
	w := restated(t, model{name: "report", deps: []string{"rollup"}})
	w.invalidate("report@v1", day(3).Add(time.Hour), hrs(40, 42)) // 16:00-18:00 on day 1: missing and ready
	_, req := w.restate("events", day(3).Add(2*time.Hour), hrs(30, 31))
	wantWork(t, req,
		events.RestateWork{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(30, 31)}, Invalidated: []interval.Range{hrs(30, 31)}},
		events.RestateWork{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{days(1, 2)}, Invalidated: []interval.Range{days(1, 2)}},
		events.RestateWork{Model: "report", Snapshot: "report@v1", Table: "report@v1", Ranges: []interval.Range{days(1, 2)}, Invalidated: []interval.Range{hrs(24, 40), hrs(42, 48)}},
	)
}

// A model with no downstream model restates only itself; a restatement
// of a child never reaches its parent.
func TestRestateWithoutDownstream(t *testing.T) {
	w := restated(t)
	dec, req := w.restate("rollup", day(3).Add(time.Hour), days(0, 2))
	wantWork(t, req, events.RestateWork{Model: "rollup", Snapshot: "rollup@v1", Table: "rollup@v1", Ranges: []interval.Range{days(0, 2)}, Invalidated: []interval.Range{days(0, 2)}})
	if len(dec.Events) != 2 {
		t.Fatalf("events %d, want the request and rollup's invalidation", len(dec.Events))
	}
	if !w.st.Table("events@v1").Covers(hrs(0, 73)) {
		t.Fatalf("events lost coverage: %v", w.st.Table("events@v1"))
	}
}

// A forward-only child is restated like any other: its incumbent's table
// (its predecessor's) is invalidated, and the forward-only snapshot
// recomputes it with its own logic.
func TestRestateForwardOnlyChild(t *testing.T) {
	w := restated(t)
	w.register(model{name: "rollup", version: "v2", cron: "@daily", kind: events.ForwardOnly, deps: []string{"events"}}.command())
	w.deploy("prod", "fo", map[string]string{"rollup": "v2"}, day(3).Add(time.Hour))
	if w.incumbent("prod", "rollup") != "rollup@v2" || w.st.Snapshots["rollup@v2"].Table != "rollup@v1" {
		t.Fatalf("rollup@v2 does not write rollup@v1's table: %+v", w.st.Snapshots["rollup@v2"])
	}
	_, req := w.restate("events", day(3).Add(2*time.Hour), hrs(30, 31))
	wantWork(t, req,
		events.RestateWork{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(30, 31)}, Invalidated: []interval.Range{hrs(30, 31)}},
		events.RestateWork{Model: "rollup", Snapshot: "rollup@v2", Table: "rollup@v1", Ranges: []interval.Range{days(1, 2)}, Invalidated: []interval.Range{days(1, 2)}},
	)
	if req.Generation != 2 {
		t.Fatalf("generation %d, want 2", req.Generation)
	}
}

// Invalid restatements are refused with the field named and append
// nothing: an unknown env, a model the env does not serve, a stale
// generation, ranges the model's table covers nothing of (after
// clipping to its start), a bad range.
func TestRestateRefusals(t *testing.T) {
	w := restated(t)
	at := day(3).Add(time.Hour)
	w.invalidate("events@v1", at, hrs(50, 52)) // ready, and covered no more
	for _, c := range []struct {
		name  string
		cmd   commands.Restate
		code  commands.Code
		field string
	}{
		{"unknown env", commands.Restate{Env: "staging", Model: "events", Ranges: []interval.Range{hrs(1, 2)}}, commands.CodeNotFound, "env"},
		{"unserved model", commands.Restate{Env: "prod", Model: "sessions", Ranges: []interval.Range{hrs(1, 2)}}, commands.CodeNotFound, "model"},
		{"stale generation", commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{hrs(1, 2)}, Generation: 7}, commands.CodeStaleGeneration, "generation"},
		{"nothing covered", commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{days(5, 6)}}, commands.CodeInvalid, "ranges"},
		{"only missing intervals", commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{hrs(50, 52)}}, commands.CodeInvalid, "ranges"},
		{"before the start", commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{days(-3, 0)}}, commands.CodeInvalid, "ranges"},
		{"no ranges", commands.Restate{Env: "prod", Model: "events"}, commands.CodeInvalid, "ranges"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.cmd
			if ce := w.refused(&cmd, at, c.code); ce.Field != c.field {
				t.Fatalf("field %q (%s), want %q", ce.Field, ce.Message, c.field)
			}
		})
	}
	if len(w.st.Restatements) != 0 {
		t.Fatalf("restatements recorded: %v", w.st.Restatements)
	}
	// The current generation is accepted.
	w.must(&commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{hrs(1, 2)}, Generation: 1}, at)
}

// Restate work is fenced by the generation it read: once a promotion has
// moved the env on, its completions are refused (stale_generation) and
// StaleRestatement says why, as a scheduler advance of an older
// generation is refused.
func TestRestateWorkFencedByGeneration(t *testing.T) {
	w := restated(t)
	at := day(3).Add(time.Hour)
	seq := w.st.Seq
	_, req := w.restate("events", at, hrs(30, 31))
	id := events.WorkID(seq+1, events.RunRestate)
	if why := StaleRestatement(w.st, id); why != "" {
		t.Fatalf("fresh work stale: %s", why)
	}
	w.hourly("events", "v2")
	w.deploy("prod", "p2", map[string]string{"events": "v2"}, at)
	if StaleRestatement(w.st, id) == "" {
		t.Fatalf("restate work of generation %d not stale at generation %d", req.Generation, w.st.Env("prod").Generation)
	}
	if ce := w.refused(&commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(30, 31)}, RunID: req.Run, Work: id}}, at, commands.CodeStaleGeneration); ce.Field != "work" {
		t.Fatalf("field %q", ce.Field)
	}
}

// A forward-only version coarser than its table's coverage (a daily
// rollup@v2 over the hourly rows rollup@v1 wrote): the restated hour
// affects today's whole day, which has not ended. Its covered hours are
// invalidated, and the day is left to the scheduler (computed whole once
// ready): a completion of an interval not ended would be refused.
func TestRestateCoarserForwardOnlyLeavesTodayToTheScheduler(t *testing.T) {
	w := deployed(t, h(6), model{name: "events"}, model{name: "rollup", deps: []string{"events"}})
	w.run("prod", h(6), day(3).Add(10*time.Hour))
	w.register(model{name: "rollup", version: "v2", cron: "@daily", kind: events.ForwardOnly, deps: []string{"events"}}.command())
	at := day(3).Add(10*time.Hour + 30*time.Minute)
	w.deploy("prod", "fo", map[string]string{"rollup": "v2"}, at)
	today := interval.R(day(3), day(3).Add(10*time.Hour))
	if !w.st.Table("rollup@v1").Covers(today) {
		t.Fatalf("rollup's table covers %v", w.st.Table("rollup@v1"))
	}
	_, req := w.restate("events", at, interval.R(day(3).Add(2*time.Hour), day(3).Add(3*time.Hour)))
	wantWork(t, req,
		events.RestateWork{Model: "events", Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(74, 75)}, Invalidated: []interval.Range{hrs(74, 75)}},
		events.RestateWork{Model: "rollup", Snapshot: "rollup@v2", Table: "rollup@v1", Ranges: nil, Invalidated: []interval.Range{today}},
	)
	if w.st.Table("rollup@v1").Overlaps(today) {
		t.Fatalf("today's hours still covered: %v", w.st.Table("rollup@v1"))
	}
	// Once the day has ended and is ready, the scheduler computes it whole.
	advs := w.advance("prod", day(4))
	found := false
	for _, a := range advs {
		if a.Snapshot == "rollup@v2" && interval.NewSet(a.Ranges...).Covers(interval.R(day(3), day(4))) {
			found = true
		}
	}
	if !found {
		t.Fatalf("the tick at the day's end does not schedule rollup@v2's day: %+v", advs)
	}
}
