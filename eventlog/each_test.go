package eventlog

import (
	"reflect"
	"testing"

	"github.com/tidemark/tidemark/events"
)

// Read with Each hands every record, in stream order, as it reads (plain
// messages and a group message's events alike), and returns none; up to
// AtSeq it stops where Read stops.
func TestReadEach(t *testing.T) {
	ctx := t.Context()
	l, _ := memLog(t)
	ids := events.NewIDSource()
	for i, cmd := range []string{"c1", "c2"} {
		if _, err := l.Append(ctx, MsgID("finalize", cmd, false), []events.Event{finalized(ids, "prod", "p"+cmd, cmd)}, events.Expect{}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	group := []events.Event{finalized(ids, "a", "pa", "g1"), finalized(ids, "b", "pb", "g2")}
	if _, err := l.AppendGroup(ctx, group, GroupCondition{LastSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, MsgID("finalize", "c3", false), []events.Event{finalized(ids, "prod", "pc3", "c3")}, events.Expect{}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []uint64{0, 3} {
		all, err := l.Reader().Read(ctx, ReadOptions{AtSeq: at})
		if err != nil {
			t.Fatal(err)
		}
		var each []events.Record
		none, err := l.Reader().Read(ctx, ReadOptions{AtSeq: at, Each: func(r events.Record) { each = append(each, r) }})
		if err != nil || len(none) != 0 {
			t.Fatalf("at %d: Read with Each returned %d records, %v", at, len(none), err)
		}
		if len(all) != map[uint64]int{0: 5, 3: 4}[at] || !reflect.DeepEqual(each, all) {
			t.Fatalf("at %d: Each got %d records, Read %d:\n%+v\n%+v", at, len(each), len(all), each, all)
		}
	}
}
