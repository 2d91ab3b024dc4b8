package work

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// TestDescribe: the publisher's SQL hook fills the steps of models with
// SQL, leaves the others without, asks at the item's event sequence, does
// not change the item it was given, and a hook error is returned (the
// publisher tries again).
func TestDescribe(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	item := Item{ID: "work-9-backfill", RunKind: events.RunBackfill, EventSeq: 9, Steps: []Step{
		{Model: "raw", Version: "v1", Snapshot: "raw@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}},
		{Model: "agg", Version: "v1", Snapshot: "agg@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}},
	}}
	aggSQL := &SQL{Query: "SELECT 1", TimeColumn: "ts", Table: "agg__0123456789ab", Upstream: map[string]string{"raw": "raw__ba9876543210"}, Unit: interval.Hour}
	var seqs []uint64
	sqlOf := func(_ context.Context, seq uint64, snapshot string) (*SQL, error) {
		seqs = append(seqs, seq)
		if snapshot == "agg@v1" {
			return aggSQL, nil
		}
		return nil, nil
	}
	got, err := describe(t.Context(), sqlOf, item)
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps[0].SQL != nil || !reflect.DeepEqual(got.Steps[1].SQL, aggSQL) {
		t.Fatalf("described steps: %+v", got.Steps)
	}
	if !reflect.DeepEqual(seqs, []uint64{9, 9}) {
		t.Errorf("asked at %v, want the item's event seq 9 twice", seqs)
	}
	if item.Steps[1].SQL != nil {
		t.Error("describe changed the item it was given")
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `"sql":{"query":"SELECT 1","time_column":"ts","table":"agg__0123456789ab","upstream":{"raw":"raw__ba9876543210"},"unit":"hour"}`
	if !strings.Contains(string(b), want) || strings.Count(string(b), `"sql"`) != 1 {
		t.Errorf("JSON %s, want one step with %s", b, want)
	}
	var back Item
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, got) {
		t.Errorf("round trip: %v\n got %+v\nwant %+v", err, back, got)
	}

	boom := errors.New("projection behind")
	if _, err := describe(t.Context(), func(context.Context, uint64, string) (*SQL, error) { return nil, boom }, item); !errors.Is(err, boom) {
		t.Errorf("hook error: %v", err)
	}
	if same, err := describe(t.Context(), nil, item); err != nil || !reflect.DeepEqual(same, item) {
		t.Errorf("no hook: %+v %v", same, err)
	}
}

// TestEncodeTooLarge: an item that would exceed the server's max payload
// with its SQL is published with sql.error on its SQL steps instead (the
// SQL workers then report them failed), not refused again and again.
func TestEncodeTooLarge(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	big := &SQL{Query: "SELECT " + strings.Repeat("1 + ", 1000) + "1 AS ts", TimeColumn: "ts", Table: "a__0", Unit: interval.Hour}
	item := Item{ID: "work-3-backfill", RunKind: events.RunBackfill, Steps: []Step{
		{Model: "a", Snapshot: "a@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}, SQL: big},
		{Model: "plain", Snapshot: "plain@v1", Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}},
	}}
	full, trimmed, err := encode(item, 1<<20)
	if err != nil || trimmed || !strings.Contains(string(full), "1 + 1") {
		t.Fatalf("an item that fits: trimmed %v, %v", trimmed, err)
	}
	b, trimmed, err := encode(item, int64(len(full)-1))
	if err != nil || !trimmed {
		t.Fatalf("an item over the max: trimmed %v, %v", trimmed, err)
	}
	var back Item
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if s := back.Steps[0].SQL; s == nil || s.Query != "" || !strings.Contains(s.Error, "max payload") || back.Steps[1].SQL != nil {
		t.Fatalf("trimmed steps: %+v %+v", back.Steps[0].SQL, back.Steps[1].SQL)
	}
	if len(b) >= len(full) || item.Steps[0].SQL != big {
		t.Fatalf("trimmed %d bytes of %d; the item given changed: %v", len(b), len(full), item.Steps[0].SQL != big)
	}
}
