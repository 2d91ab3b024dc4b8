package integration

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
)

// TestCommandTimeIsTheEngines (item 4): in serve a command's `at` is
// refused; completions are judged on the engine's clock.
func TestCommandTimeIsTheEngines(t *testing.T) {
	s := openStrict(t, at(7))
	s.deploy(t, "prod", "d1", "v1")
	seq, state := lastSeq(t, s.e), stateJSON(t, s.e)
	y2030 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	// Freeze the scheduler in 2030.
	r := s.do(t, &commands.AdvanceScheduler{Meta: commands.Meta{ID: "adv-2030", At: y2030}, Env: "prod", Generation: 1})
	refused(t, "advance_scheduler at 2030", r, commands.CodeInvalid, "at")
	// Record coverage of intervals that have not ended.
	r = s.do(t, &commands.CompleteIntervals{Meta: commands.Meta{ID: "c-future", At: at(30)}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(7, 29)}})
	refused(t, "complete_intervals at 06:00 the next day", r, commands.CodeInvalid, "at")
	r = s.do(t, &commands.CompleteIntervals{Meta: commands.Meta{ID: "c-future-2"}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(7, 8)}})
	refused(t, "complete_intervals of an interval that has not ended", r, commands.CodeInvalid, "ranges[0]")
	// Every other kind, and a time in the past, too.
	for _, cmd := range []commands.Command{
		&commands.RegisterSnapshot{Meta: commands.Meta{ID: "r-past", At: at(1)}, Model: "clicks", Version: "v1", Cron: "@hourly", Start: t0},
		&commands.BuildPlan{Meta: commands.Meta{ID: "b-past", At: at(1)}, Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v1"}},
		&commands.Promote{Meta: commands.Meta{ID: "p-2030", At: y2030}, Plan: "d1"},
		&commands.Status{Meta: commands.Meta{At: y2030}},
	} {
		refused(t, cmd.Kind()+" with at", s.do(t, cmd), commands.CodeInvalid, "at")
	}
	unchanged(t, s.e, "commands with at", seq, state)

	// The engine's own scheduler still ticks on its clock.
	s.set(at(8))
	if advs, _, err := ticker(s.e).Tick(t.Context(), "prod", at(8), 0); err != nil || len(advs) != 1 {
		t.Fatalf("tick at 08:00: %v %+v", err, advs)
	}
	if r := s.do(t, &commands.CompleteIntervals{Meta: commands.Meta{ID: "c-now"}, Model: "events", Version: "v1", Ranges: []interval.Range{rng(7, 8)}}); !r.Accepted {
		t.Fatalf("a completion of an ended interval: %+v", r)
	}
}
