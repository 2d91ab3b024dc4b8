package web

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// The dashboard draws each env's lineage as an SVG DAG: an edge from
// each upstream model to its downstream, each node coloured by its
// state: failed (its last run given up), late, in a plan in flight, ok.
func TestDashboardLineage(t *testing.T) {
	e, handle, metaAt := commanded(t)
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	meta := func() commands.Meta { return metaAt(at) }
	start := at.Add(-4 * time.Hour)
	for _, m := range []struct {
		name string
		deps []string
	}{{"events", nil}, {"sessions", []string{"events"}}, {"clicks", nil}, {"funnel", []string{"sessions", "clicks"}}, {"users", nil}} {
		handle(&commands.RegisterSnapshot{Meta: meta(), Model: m.name, Version: "v1", Cron: "@hourly", Start: start, DependsOn: m.deps})
	}
	p1 := handle(&commands.BuildPlan{Meta: meta(), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1", "sessions": "v1", "clicks": "v1", "funnel": "v1", "users": "v1"}})
	for _, c := range p1.Plan.Candidates {
		handle(&commands.CompleteIntervals{Meta: meta(), Model: c.Model, Version: "v1", Ranges: c.Backfill, RunKind: events.RunBackfill})
	}
	if r := handle(&commands.Promote{Meta: meta(), Plan: "p1"}); r.Decision.Outcome != events.Accepted {
		t.Fatalf("promote p1: %+v", r.Decision)
	}
	lastHour := []interval.Range{interval.R(at.Add(-time.Hour), at)}
	handle(&commands.InvalidateIntervals{Meta: meta(), Model: "clicks", Version: "v1", Ranges: lastHour, Reason: "bad rows"})
	handle(&commands.FailRun{Meta: meta(), Model: "clicks", Version: "v1", Ranges: lastHour,
		RunKind: events.RunScheduled, ExitStatus: 1, Error: "boom", Attempt: 3, Final: true})
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "events", Version: "v2", Cron: "@hourly", Start: start})
	handle(&commands.BuildPlan{Meta: meta(), Plan: "p2", Env: "prod", Versions: map[string]string{"events": "v2"}})
	page := func(now time.Time) string {
		h, err := (&Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: func() time.Time { return now }, Logger: quiet()}).Handler()
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		_, body := get(t, srv.URL+"/")
		return body
	}
	body := page(at)
	for _, want := range []string{`<svg class="lineage"`, `data-from="events" data-to="sessions"`, `data-from="sessions" data-to="funnel"`, `data-from="clicks" data-to="funnel"`,
		`<g class="node in-plan" data-model="events" data-state="in-plan">`, `<g class="node in-plan" data-model="sessions" data-state="in-plan">`,
		`<g class="node failed" data-model="clicks" data-state="failed">`, `<g class="node in-plan" data-model="funnel" data-state="in-plan">`,
		`<g class="node ok" data-model="users" data-state="ok">`} {
		if !strings.Contains(body, want) {
			t.Errorf("now: the lineage lacks %q", want)
		}
	}
	if strings.Contains(body, `data-from="events" data-to="funnel"`) {
		t.Error("an edge to a model that does not depend on it")
	}
	body = page(at.Add(3 * time.Hour))
	for _, want := range []string{`<g class="node late" data-model="events" data-state="late">`, `<g class="node late" data-model="users" data-state="late">`,
		`<g class="node failed" data-model="clicks" data-state="failed">`} {
		if !strings.Contains(body, want) {
			t.Errorf("3h on: the lineage lacks %q", want)
		}
	}
	// The failed hour computed since (a rerun): the failure is overcome,
	// the node no longer red.
	handle(&commands.CompleteIntervals{Meta: meta(), Model: "clicks", Version: "v1", Ranges: lastHour, RunKind: events.RunRestate})
	if body := page(at); !strings.Contains(body, `<g class="node ok" data-model="clicks" data-state="ok">`) {
		t.Errorf("a failure computed since still colours clicks:\n%s", body)
	}
}
