package decide

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
)

var update = flag.Bool("update", false, "rewrite decide/testdata/*.golden from the current decisions")

// goldenDecision is a Decision as JSON: each event with its type and
// subject (a payload alone does not say its type).
type goldenDecision struct {
	Events []goldenEvent  `json:"events"`
	Expect events.Expect  `json:"expect"`
	Reply  commands.Reply `json:"reply"`
}

type goldenEvent struct {
	Type    events.Type    `json:"type"`
	Subject string         `json:"subject"`
	Payload events.Payload `json:"payload"`
}

// golden compares dec with decide/testdata/<name>.golden, or rewrites it
// with -update.
func golden(t *testing.T, name string, dec Decision) {
	t.Helper()
	g := goldenDecision{Events: []goldenEvent{}, Expect: dec.Expect, Reply: dec.Reply}
	for _, p := range dec.Events {
		g.Events = append(g.Events, goldenEvent{Type: p.EventType(), Subject: p.Subject(), Payload: p})
	}
	got, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./decide -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var a, b string
			if i < len(gl) {
				a = gl[i]
			}
			if i < len(wl) {
				b = wl[i]
			}
			if a != b {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(go test ./decide -update rewrites it)", path, i+1, a, b)
			}
		}
	}
}

func TestGoldenDecisions(t *testing.T) {
	t.Run("trailing_gap_accepted", func(t *testing.T) {
		w := standard(t, nil, []int{1})
		w.tick("prod", h(11))
		golden(t, "trailing_gap_accepted", w.promote("p1", at1107))
	})
	t.Run("catch_up_request", func(t *testing.T) {
		w := standard(t, nil, []int{0, 1}, sessions, sessionsFO2)
		w.tick("prod", h(11))
		w.complete("sessions@v1+p1", at1107, events.RunManual, hrs(10, 11))
		golden(t, "catch_up_request", w.promote("p1", at1107))
	})
	t.Run("catch_up_retry", func(t *testing.T) {
		w := standard(t, nil, []int{0, 1}, sessions, sessionsFO2)
		w.tick("prod", h(11))
		w.complete("sessions@v1+p1", at1107, events.RunManual, hrs(10, 11))
		_, req := requestCatchUp(t, w, at1107)
		runCatchUp(t, w, req, h(11).Add(10*time.Minute))
		golden(t, "catch_up_retry", w.promote("p1", h(11).Add(10*time.Minute)))
	})
	t.Run("rejected_several_codes", func(t *testing.T) {
		w := deployed(t, h(6), model{name: "events"}, model{name: "clicks"}, users, sessionsFO)
		w.run("prod", h(6), h(10))
		w.hourly("events", "v2")
		w.hourly("clicks", "v2")
		w.plan("p1", "prod", map[string]string{"events": "v2", "clicks": "v2"}, h(10), 1)
		w.backfill("p1", h(10))
		w.invalidate("clicks@v2", h(10), hrs(3, 4))
		w.tick("prod", h(11))
		w.complete("users@v1+p1", at1107, events.RunManual, hrs(10, 11))
		golden(t, "rejected_several_codes", w.promote("p1", at1107))
	})
	t.Run("plan_built_derived", func(t *testing.T) {
		w := deployed(t, h(6), model{name: "events"}, users, sessionsFO)
		w.run("prod", h(6), h(8))
		w.hourly("events", "v2")
		golden(t, "plan_built_derived", w.must(&commands.BuildPlan{Plan: "p1", Env: "prod",
			Versions: map[string]string{"events": "v2"}, Bounds: commands.Bounds{MaxTrailingGapAdvances: 1, MaxCatchUpAdvances: 2}}, h(8).Add(5*time.Minute)))
	})
	t.Run("advance_with_repair_and_lookback", func(t *testing.T) {
		w := standard(t, &model{name: "events", lookback: 2}, []int{1})
		w.tick("prod", h(11))
		w.promote("p1", at1107)
		golden(t, "advance_with_repair_and_lookback", w.must(&commands.AdvanceScheduler{Env: "prod", Generation: 2}, h(12)))
	})
	t.Run("completion_closes_repair", func(t *testing.T) {
		w := standard(t, nil, []int{1})
		w.tick("prod", h(11))
		w.promote("p1", at1107)
		golden(t, "completion_closes_repair", w.complete("events@v2", h(11).Add(20*time.Minute), events.RunRepair, hrs(10, 11)))
	})
	// Nothing is promoted empty (DESIGN.md, amended 2026-12-04): with no
	// incumbent, the candidate is checked against its own backfill set.
	t.Run("promoted_empty_rejected", func(t *testing.T) {
		w := newWorld(t)
		w.hourly("events", "v1")
		w.plan("p1", "prod", map[string]string{"events": "v1"}, h(6), 1)
		w.complete("events@v1", h(6), events.RunBackfill, hrs(0, 2))
		golden(t, "promoted_empty_rejected", w.promote("p1", h(6)))
	})
	// An incumbent with no coverage now (a paused worker since the deploy):
	// the candidate passes on its own backfill set, computed.
	t.Run("incumbent_without_coverage_accepted", func(t *testing.T) {
		w := deployed(t, h(0), model{name: "events"})
		for i := 1; i <= 3; i++ {
			w.advance("prod", h(i))
		}
		w.hourly("events", "v2")
		w.plan("p1", "prod", map[string]string{"events": "v2"}, h(3))
		w.backfill("p1", h(3))
		golden(t, "incumbent_without_coverage_accepted", w.promote("p1", h(3).Add(5*time.Minute)))
	})
	t.Run("stale_generation", func(t *testing.T) {
		w := standard(t, nil, []int{1})
		w.tick("prod", h(11))
		w.promote("p1", at1107)
		_, err := w.do(&commands.AdvanceScheduler{Env: "prod", Generation: 1}, h(12))
		golden(t, "stale_generation", Decision{Reply: commands.Rejection(err)})
	})
}

// sessionsFO2 is a forward-only child under another name, so a golden can
// hold an incremental and a forward-only child together.
var sessionsFO2 = model{name: "visits", deps: []string{"events"}, kind: events.ForwardOnly}
