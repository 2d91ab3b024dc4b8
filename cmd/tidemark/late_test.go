package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
)

// TestStatusShowsLate: on a server with no worker, two hourly models are
// promoted, then their last two intervals invalidated: two intervals
// behind their readiness frontier. events, at the default freshness bound of
// one interval, is late, and status says so and why (no worker
// heartbeat); clicks, with freshness 3, is not. --fail-on-late exits 1
// naming the late model; without it status exits 0. Before, status
// showed `MISSING -` and exited 0 either way.
func TestStatusShowsLate(t *testing.T) {
	s := startServe(t)
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewClient(nc)
	ctx := t.Context()
	now := time.Now().UTC()
	start := now.Truncate(time.Hour).Add(-5 * time.Hour)
	do := func(what string, cmd commands.Command) commands.Reply {
		t.Helper()
		r, err := c.Do(ctx, cmd)
		if err != nil || !r.Accepted {
			t.Fatalf("%s: %+v %v", what, r, err)
		}
		return r
	}
	do("register events", &commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", Start: start})
	do("register clicks", &commands.RegisterSnapshot{Model: "clicks", Version: "v1", Cron: "@hourly", Start: start, Freshness: "3"})
	r := do("plan", &commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1", "clicks": "v1"}})
	for _, c := range r.Plan.Candidates {
		do("complete "+c.Model, &commands.CompleteIntervals{Model: c.Model, Version: "v1", Ranges: c.Backfill, RunKind: "backfill"})
	}
	if r := do("promote", &commands.Promote{Plan: "p1"}); r.Decision.Outcome != "accepted" {
		t.Fatalf("promote: %+v", r.Decision)
	}
	// The last two intervals are lost (invalidated), and no worker is
	// there to compute them again.
	ready := r.Plan.BuiltAt.Truncate(time.Hour)
	for _, m := range []string{"events", "clicks"} {
		do("invalidate "+m, &commands.InvalidateIntervals{Model: m, Version: "v1", Ranges: []interval.Range{interval.R(ready.Add(-2*time.Hour), ready)}, Reason: "lost"})
	}
	out, stderr, code := runCLI(t, "status", "--nats-url", s.nats)
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	row := func(model string) string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[0] == "prod" && f[2] == model {
				return l
			}
		}
		t.Fatalf("status has no row for %s:\n%s", model, out)
		return ""
	}
	if f := strings.Fields(row("events")); f[4] != "LATE:no_worker" {
		t.Errorf("events' state %q, want LATE:no_worker:\n%s", f[4], out)
	}
	if f := strings.Fields(row("clicks")); f[4] != "ok" {
		t.Errorf("clicks' state %q, want ok:\n%s", f[4], out)
	}
	if !strings.Contains(out, "LATE prod/events: no worker heartbeat") || !strings.Contains(out, "by more than 1 interval") {
		t.Errorf("status does not say why events is late:\n%s", out)
	}
	_, stderr, code = runCLI(t, "status", "--nats-url", s.nats, "--fail-on-late")
	if code != 1 || !strings.Contains(stderr, "1 late model(s): prod/events") {
		t.Errorf("status --fail-on-late: exit %d %s, want 1 naming prod/events", code, stderr)
	}
	out, stderr, code = runCLI(t, "status", "--nats-url", s.nats, "--fail-on-late", "-o", "json")
	if code != 1 || !strings.Contains(out, `"late":true,"late_cause":"no_worker"`) {
		t.Errorf("status --fail-on-late -o json: exit %d %s\n%s", code, stderr, out)
	}
	if _, stderr, code = runCLI(t, "status", "--nats-url", s.nats, "--fail-on-late", "--env", "nope"); code != 3 {
		t.Errorf("status --env nope: exit %d %s, want 3", code, stderr)
	}
}

// TestStatusLateAtAPointInTime: a scenario's models keep their freshness,
// and status of a data dir at a later clock (--at) judges lateness at
// that clock: three hours after the last tick, the default bound (one
// interval) is passed, freshness 3 is not.
func TestStatusLateAtAPointInTime(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "late.yaml")
	os.WriteFile(file, []byte(`name: late
clock: 2026-12-01T06:00:00Z
models:
  - {name: events, cron: "@hourly", start: 2026-12-01T00:00:00Z, freshness: 3}
  - {name: clicks, cron: "@hourly", start: 2026-12-01T00:00:00Z}
steps:
  - deploy: {env: prod, versions: {events: v1, clicks: v1}}
`), 0o644)
	data := filepath.Join(dir, "data")
	if _, stderr, code := runCLI(t, "scenario", "run", "--data-dir", data, file); code != 0 {
		t.Fatalf("scenario: exit %d %s", code, stderr)
	}
	out, stderr, code := runCLI(t, "status", "--data-dir", data, "--at", "2026-12-01T09:00:00Z", "--fail-on-late")
	if code != 1 || !strings.Contains(stderr, "1 late model(s): prod/clicks") || !strings.Contains(out, "LATE prod/clicks: frontier 2026-12-01T06:00:00Z is behind its readiness frontier 2026-12-01T09:00:00Z by more than 1 interval") {
		t.Fatalf("status at 09:00: exit %d %s\n%s", code, stderr, out)
	}
	if out, _, code := runCLI(t, "status", "--data-dir", data, "--at", "2026-12-01T06:30:00Z", "--fail-on-late", "-o", "json"); code != 0 || strings.Contains(out, `"late"`) {
		t.Fatalf("status at 06:30: exit %d\n%s", code, out)
	}
}
