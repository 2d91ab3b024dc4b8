package work

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// TestSplit: each step's ranges are cut by its SQL's batch_size (a step
// without SQL: each range whole), every batch is a message of one step
// and one range named "<step>/<n>", and a batch of a step that reads an
// earlier step's table needs exactly that step's batches overlapping its
// range; a step that reads nothing in the item needs nothing.
func TestSplit(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	item := Item{ID: events.WorkID(7, events.RunBackfill), RunKind: events.RunBackfill, EventSeq: 7, Steps: []Step{
		{Snapshot: "raw@v1", Ranges: []interval.Range{interval.R(h(0), h(48))}, SQL: &SQL{Unit: interval.Hour, BatchSize: 24}},
		{Snapshot: "day@v1", Ranges: []interval.Range{interval.R(h(0), h(48))}, SQL: &SQL{Unit: interval.Day}},
		{Snapshot: "agg@v1", Ranges: []interval.Range{interval.R(h(0), h(48))}, SQL: &SQL{Unit: interval.Hour, BatchSize: 10}},
		{Snapshot: "exec@v1", Ranges: []interval.Range{interval.R(h(0), h(2)), interval.R(h(5), h(6))}},
	}}
	tables := []Tables{{Writes: "raw"}, {Writes: "day", Reads: []string{"raw"}}, {Writes: "agg", Reads: []string{"raw", "other"}}, {Writes: "exec"}}
	parts := Split(item, tables)
	var got []string
	for _, p := range parts {
		if len(p.Item.Steps) != 1 || len(p.Item.Steps[0].Ranges) != 1 || p.Item.ID != item.ID {
			t.Fatalf("part %s: %d steps, want one step with one range of item %s", p, len(p.Item.Steps), item.ID)
		}
		line := fmt.Sprintf("%s %s %s", p.Item.Batch, p.Item.Steps[0].Snapshot, p.Item.Steps[0].Ranges[0])
		for _, sn := range []string{"raw@v1", "day@v1"} {
			if need, ok := p.Needs[sn]; ok {
				line += " needs " + sn + " " + need.String()
			}
		}
		got = append(got, line)
	}
	r := func(a, b int) string { return interval.R(h(a), h(b)).String() }
	want := []string{
		"0/0 raw@v1 " + r(0, 24),
		"0/1 raw@v1 " + r(24, 48),
		"1/0 day@v1 " + r(0, 48) + " needs raw@v1 [" + r(0, 48) + "]", // the batches merge
		"2/0 agg@v1 " + r(0, 10) + " needs raw@v1 [" + r(0, 24) + "]",
		"2/1 agg@v1 " + r(10, 20) + " needs raw@v1 [" + r(0, 24) + "]",
		"2/2 agg@v1 " + r(20, 30) + " needs raw@v1 [" + r(0, 48) + "]",
		"2/3 agg@v1 " + r(30, 40) + " needs raw@v1 [" + r(24, 48) + "]",
		"2/4 agg@v1 " + r(40, 48) + " needs raw@v1 [" + r(24, 48) + "]",
		"3/0 exec@v1 " + r(0, 2),
		"3/1 exec@v1 " + r(5, 6),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Split:\n%s\nwant:\n%s", join(got), join(want))
	}
	if k := parts[3].Item.Key(); k != item.ID+"/2/0" {
		t.Errorf("key %q, want %q", k, item.ID+"/2/0")
	}
	if k := item.Key(); k != item.ID {
		t.Errorf("a whole item's key %q, want its id", k)
	}
}

func join(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}

// A whole kind's step (full, view, seed) is one batch per range whatever
// its SQL's batch size says (validation keeps it 0; docs/kinds.md), and a
// child reading it needs the whole of it.
func TestSplitWholeKindOneBatch(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	for _, k := range []events.Kind{events.Full, events.View, events.Seed} {
		item := Item{ID: events.WorkID(3, events.RunScheduled), RunKind: events.RunScheduled, EventSeq: 3, Steps: []Step{
			{Snapshot: "report@v1", Ranges: []interval.Range{interval.R(h(0), h(11))}, SQL: &SQL{Unit: interval.Hour, BatchSize: 2, Kind: k}},
			{Snapshot: "child@v1", Ranges: []interval.Range{interval.R(h(10), h(11))}, SQL: &SQL{Unit: interval.Hour}},
		}}
		parts := Split(item, []Tables{{Writes: "report"}, {Writes: "child", Reads: []string{"report"}}})
		if len(parts) != 2 || parts[0].Item.Steps[0].Ranges[0] != interval.R(h(0), h(11)) {
			t.Fatalf("%s: %d parts, first %v", k, len(parts), parts[0].Item.Steps[0].Ranges)
		}
		if need := parts[1].Needs["report@v1"]; !need.Equal(interval.NewSet(interval.R(h(0), h(11)))) {
			t.Fatalf("%s: the child needs %v", k, need)
		}
	}
}
