package decide

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
)

// A command id found in the state is a retry when the command asks the
// same (its digest, whatever its actor or clock), and an idempotency
// conflict naming the id when it asks anything else: another body or
// another kind. Ids recorded before digests stay duplicates.
func TestIdempotencyConflict(t *testing.T) {
	w := newWorld(t)
	w.hourly("events", "v1")
	c := &commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{hrs(0, 1)}, RunKind: events.RunManual}
	first := w.must(c, h(2))
	id := c.ID

	retry := *c
	retry.Actor, retry.At, retry.Correlation = "someone-else", h(3), "x"
	if d, err := Decide(w.st, &retry); err != nil || len(d.Events) != 0 || !d.Reply.Duplicate || d.Reply.Seq != w.st.Seq {
		t.Fatalf("retry: %v %+v (first %+v)", err, d, first.Reply)
	}
	other := *c
	other.Ranges = []interval.Range{hrs(1, 2)}
	otherKind := &commands.InvalidateIntervals{Meta: c.Meta, Model: "events", Version: "v1", Ranges: c.Ranges}
	for _, cmd := range []commands.Command{&other, otherKind} {
		_, err := Decide(w.st, cmd)
		var ce *commands.Error
		if !errors.As(err, &ce) || ce.Code != commands.CodeIdempotencyConflict || ce.Field != "id" || !strings.Contains(ce.Message, `"`+id+`"`) {
			t.Fatalf("%s reusing %s: %v", cmd.Kind(), id, err)
		}
	}

	// A state folded from events without digests (an older build).
	legacy := projections.New()
	for seq, p := range []events.Payload{
		events.SnapshotRegistered{Snapshot: "events@v1", Model: "events", Version: "v1", Cron: "0 * * * *", Unit: "hour", Start: t0, Kind: events.Incremental, Table: "events@v1"},
		events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{hrs(0, 1)}, RunKind: events.RunManual},
	} {
		ev := events.New(w.ids, h(2), p)
		ev.Causation = "old-" + string(rune('a'+seq))
		if err := projections.Apply(legacy, uint64(seq+1), ev); err != nil {
			t.Fatal(err)
		}
	}
	other.ID = "old-b"
	if d, err := Decide(legacy, &other); err != nil || !d.Reply.Duplicate {
		t.Fatalf("an id recorded without a digest: %v %+v", err, d)
	}
}
