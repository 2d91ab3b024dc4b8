package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/scenario"
)

// TestPlanPage: /plans/{id} lists the plan's candidates and, per
// candidate, the diff's counts (or why it was skipped), asked on request
// with a deadline; without a warehouse, or when the diff fails, it says
// so; an unknown plan is 404.
func TestPlanPage(t *testing.T) {
	f, err := scenario.Load("../testdata/scenarios/repromote-new-id.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := scenario.Run(t.Context(), f, scenario.Options{DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	e := jstest.Engine(t, engine.Config{}, jstest.Node(t, natsnode.Config{DataDir: dir}))
	var asked []string
	var diffErr error
	var block, entered chan struct{} // when set, a diff waits for block
	s := &Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet(),
		Diff: func(ctx context.Context, plan string) ([]PlanDiff, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("the diff was asked without a deadline")
			}
			asked = append(asked, plan)
			if block != nil {
				select {
				case entered <- struct{}{}:
				default:
				}
				select { // bounded: a diff let through at once fails the test, not hangs it
				case <-block:
				case <-time.After(5 * time.Second):
				}
			}
			if diffErr != nil {
				return nil, diffErr
			}
			return []PlanDiff{
				{Model: "events", Candidate: "events@v2", Incumbent: "events@v1", CandidateRows: 1770, IncumbentRows: 3540, OnlyInCandidate: 1534, OnlyInIncumbent: 3304, Changed: 1534, Grain: []string{"ts"}},
				{Model: "fwd", Candidate: "fwd@v2", Incumbent: "fwd@v1", Skipped: "writes its incumbent's <table>"},
			}, nil
		}}
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	code, body := get(t, srv.URL+"/plans/p1")
	for _, want := range []string{`data-plan="p1"`, "plan p1 → prod", `<tr data-model="events">`, `events@v2`, `href="/decisions/`,
		`<tr data-model="events" data-differs="true">`, `<td class="rows">1770 / 3540</td>`, `<td class="only-candidate">1534</td>`, `<td class="only-incumbent">3304</td>`,
		`<td class="changed">1534 <small>(ts)</small></td>`, `skipped: writes its incumbent&#39;s &lt;table&gt;`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("plan page (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if _, home := get(t, srv.URL+"/"); !strings.Contains(home, `href="/plans/p1"`) {
		t.Fatalf("the dashboard does not link the plan's page:\n%s", home)
	}
	if len(asked) != 1 || asked[0] != "p1" {
		t.Fatalf("diffs asked: %v", asked)
	}
	diffErr = errors.New("warehouse: the model's computation exceeded its timeout")
	if code, body := get(t, srv.URL+"/plans/p1"); code != 200 || !strings.Contains(body, "the diff failed: warehouse: the model&#39;s computation exceeded its timeout") {
		t.Fatalf("a failed diff (%d):\n%s", code, body)
	}
	if code, body := get(t, srv.URL+"/plans/nope"); code != 404 || len(asked) != 2 {
		t.Fatalf("an unknown plan: %d %s (diffs asked %v)", code, body, asked)
	}
	// One diff at a time: while one runs, another page waits within its
	// deadline, then says so.
	diffErr, block, entered = nil, make(chan struct{}), make(chan struct{}, 1)
	s.DiffTimeout = 300 * time.Millisecond
	first := make(chan string, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/plans/p1")
		if err != nil {
			first <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		first <- string(b)
	}()
	<-entered
	if code, body := get(t, srv.URL+"/plans/p1"); code != 200 || !strings.Contains(body, "the diff was not computed: another page") {
		t.Fatalf("a second diff at once (%d):\n%s", code, body)
	}
	close(block)
	if body := <-first; !strings.Contains(body, `<td class="rows">1770 / 3540</td>`) {
		t.Fatalf("the first page:\n%s", body)
	}
	s.Diff = nil
	h, err = s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)
	if code, body := get(t, bare.URL+"/plans/p1"); code != 200 || !strings.Contains(body, "no warehouse") || !strings.Contains(body, `<tr data-model="events">`) {
		t.Fatalf("without a warehouse (%d):\n%s", code, body)
	}
}

// TestPlanPageInFlight: a plan in flight has its page, with its backfill
// per candidate, its work per model, its failures with their text, and
// no decision yet; once promoted (rejected here: a gap), the page shows
// the decision and its findings.
func TestPlanPageInFlight(t *testing.T) {
	e, handle, metaAt := commanded(t)
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	meta := func() commands.Meta { return metaAt(at) }
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "events", Version: "v1", Cron: "@hourly", Start: at.Add(-4 * time.Hour)})
	handle(&commands.RegisterSnapshot{Meta: meta(), Model: "clicks", Version: "v1", Cron: "@hourly", Start: at.Add(-4 * time.Hour)})
	built := handle(&commands.BuildPlan{Meta: meta(), Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1", "clicks": "v1"}})
	handle(&commands.CompleteIntervals{Meta: meta(), Model: "events", Version: "v1",
		Ranges: []interval.Range{interval.R(at.Add(-4*time.Hour), at.Add(-3*time.Hour))}, Work: events.WorkID(built.Seq, events.RunBackfill), Rows: 120})
	handle(&commands.FailRun{Meta: meta(), Model: "clicks", Version: "v1", Ranges: []interval.Range{interval.R(at.Add(-4*time.Hour), at)},
		RunKind: events.RunBackfill, RunID: events.PlanRunID(events.RunBackfill, "p1"), ExitStatus: 1, Error: "relation <raw.clicks> does not exist", Attempt: 3, Final: true})
	h, err := (&Server{Proj: e.Projection(), Log: e.Log().Reader(), Registry: e.Registry(), Clock: e.Now, Logger: quiet()}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, page := get(t, srv.URL+"/plans/p1")
	for _, want := range []string{`data-state="built"`, `<section class="progress" data-in-flight="true">`, `13% (1h0m0s of 8h0m0s) · in flight`,
		`<tr data-progress="events" data-percent="25">`, `25% (1h0m0s of 4h0m0s)`, `<tr data-progress="clicks" data-percent="0">`,
		`<tr data-work="events@v1" data-run-kind="backfill">`, `<div class="failure" data-model="clicks" data-final="true">clicks@v1: backfill attempt 3, given up: relation &lt;raw.clicks&gt; does not exist</div>`,
		"Not promoted yet: <code>tidemark promote p1</code>"} {
		if code != 200 || !strings.Contains(page, want) {
			t.Fatalf("plan page in flight (%d) lacks %q:\n%s", code, want, page)
		}
	}
	d := handle(&commands.Promote{Meta: meta(), Plan: "p1"})
	if d.Decision.Outcome != events.Rejected {
		t.Fatalf("promote: %+v", d.Decision)
	}
	_, page = get(t, srv.URL+"/plans/p1")
	for _, want := range []string{`data-state="rejected"`, `<article class="decision rejected" data-outcome="rejected">`, `<li data-code="missing_intervals">`,
		fmt.Sprintf(`href="/decisions/%d"`, d.Seq)} {
		if !strings.Contains(page, want) {
			t.Fatalf("plan page after the decision lacks %q:\n%s", want, page)
		}
	}
	// No allowance admits a gap in the history: the rejection's page says
	// to let the backfill finish and promote again.
	_, page = get(t, fmt.Sprintf("%s/decisions/%d", srv.URL, d.Seq))
	if !strings.Contains(page, "the candidates miss clicks@v1 [2026-12-01T00:00:00Z/2026-12-01T04:00:00Z]") || !strings.Contains(page, "<code>tidemark promote p1</code>") ||
		strings.Contains(page, "--max-trailing-gap-advances") {
		t.Fatalf("the rejection's next steps:\n%s", page)
	}
}
