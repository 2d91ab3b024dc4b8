package scenario

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// runAndRead plays a scenario file into a data dir, then reopens the
// stream and returns every event in it.
func runAndRead(t *testing.T, name string) []events.Record {
	t.Helper()
	f, err := Load(filepath.Join(scenarioDir, name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res, err := Run(t.Context(), f, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 {
		t.Fatalf("%s: %v", name, res.Failures)
	}
	_, recs := reopen(t, dir)
	return recs
}

// Catch-up order on the stream: the request and the child's invalidation
// in one batch, then the parent's suffix, then the child's recomputation
// (both run kind catch_up), then the strict retry's decision.
func TestCatchUpRecomputesChildAfterParent(t *testing.T) {
	recs := runAndRead(t, "catch-up-recompute-child.yaml")
	var order []string
	for _, r := range recs {
		switch p := r.Event.Payload.(type) {
		case events.CatchUpRequested:
			order = append(order, "request")
		case events.IntervalsInvalidated:
			if p.Snapshot == "sessions@v1+p1" && p.Reason == "catch_up:p1" {
				order = append(order, "invalidate sessions 10-11")
			}
		case events.IntervalsCompleted:
			if p.RunKind == events.RunCatchUp {
				order = append(order, "catch_up "+p.Snapshot+" "+p.Ranges[0].String())
			}
		case events.PromotionDecided:
			if p.Plan == "p1" {
				order = append(order, "decision "+p.Codes[0])
				if p.CatchUpSeq == 0 {
					t.Errorf("retry decision does not name its catch-up request")
				}
			}
		}
	}
	want := []string{
		"request",
		"invalidate sessions 10-11",
		"catch_up events@v2 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z",
		"catch_up sessions@v1+p1 2026-12-01T10:00:00Z/2026-12-01T11:00:00Z",
		"decision caught_up",
	}
	if len(order) != len(want) {
		t.Fatalf("catch-up events:\n got  %q\n want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("catch-up events:\n got  %q\n want %q", order, want)
		}
	}
}

// A forward-only child shares the production table: catch-up never
// invalidates it.
func TestCatchUpKeepsForwardOnlyRows(t *testing.T) {
	for _, r := range runAndRead(t, "catch-up-forward-only-child.yaml") {
		if p, ok := r.Event.Payload.(events.IntervalsInvalidated); ok {
			t.Fatalf("catch-up invalidated %s %v", p.Snapshot, p.Ranges)
		}
	}
}

// Closing repair debt appends RepairCompleted with the latency from the
// accepting decision (11:07) to the completion that filled the gap: the
// repair work the acceptance issued runs first thing in the next
// run_scheduler step (still 11:07), before the 12:00 tick.
func TestRepairCompletedLatency(t *testing.T) {
	var got []events.RepairCompleted
	var v2runs []string
	for _, r := range runAndRead(t, "trailing-gap.yaml") {
		switch p := r.Event.Payload.(type) {
		case events.RepairCompleted:
			got = append(got, p)
			v2runs = append(v2runs, "RepairCompleted")
		case events.IntervalsCompleted:
			if p.Snapshot == "events@v2" && p.RunKind != events.RunBackfill {
				v2runs = append(v2runs, string(p.RunKind)+" "+interval.Set(p.Ranges).String())
			}
		}
	}
	// The repair runs (and closes the debt) before the 12:00 tick's hour.
	want := "[repair [2026-12-01T10:00:00Z/2026-12-01T11:00:00Z] RepairCompleted scheduled [2026-12-01T11:00:00Z/2026-12-01T12:00:00Z]]"
	if fmt.Sprint(v2runs) != want {
		t.Fatalf("scheduled runs of the new incumbent: %v, want %s", v2runs, want)
	}
	if len(got) != 1 {
		t.Fatalf("RepairCompleted events: %+v", got)
	}
	rc := got[0]
	if rc.Plan != "p1" || rc.Model != "events" || rc.Snapshot != "events@v2" ||
		rc.LatencyMS != 0 || len(rc.Ranges) != 1 {
		t.Fatalf("RepairCompleted: %+v", rc)
	}
}
