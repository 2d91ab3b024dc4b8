package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/projections"
	"github.com/tidemark/tidemark/transport"
	"github.com/tidemark/tidemark/work"
	"github.com/tidemark/tidemark/work/shell"
)

// TestWorkerReportsOnlyItsWork (issue 15, item 9): with docs/auth.conf, a
// worker records only the work the engine gave it. Its reports name the
// work item (complete_work, fail_work) and are refused, typed and with
// nothing appended, unless the stream made that item due and its steps
// hold the snapshot and every range; reports without an item
// (complete_intervals, fail_run: manual completions) are not the worker
// role's to send at all. A worker's real run still completes.
func TestWorkerReportsOnlyItsWork(t *testing.T) {
	node := authNode(t, "")
	e := open(t, engine.Config{}, node)
	clientURL := node.ClientURL()
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pub := &work.Publisher{Log: e.Log(), Clock: e.Now, Logger: quiet()}
	if err := pub.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); _ = pub.Run(ctx) }()
	defer cancel()

	// A legitimate worker run completes the plan's backfill.
	wConn, wViolations := asUser(t, clientURL, "worker")
	wjs, err := jetstream.New(wConn)
	if err != nil {
		t.Fatal(err)
	}
	client := transport.NewClient(wConn)
	client.Timeout = 2 * time.Second
	x := &shell.Worker{JS: wjs, Handler: client, Command: "true", Name: "w1", Logger: quiet(), AckWait: 2 * time.Second,
		Backoff: []time.Duration{10 * time.Millisecond}, Output: &strings.Builder{}}
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(wctx) }()
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "d1", Env: "prod", Versions: map[string]string{"events": "v1"}}))
	if err := e.Projection().Await(ctx, covered("events@v1", rng(0, 3))); err != nil {
		t.Fatal(err)
	}
	stopWorker()
	<-done

	// A version nobody gave any work, and the item the worker was given.
	must(t, e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v3", Cron: "@hourly", Start: t0}))
	var item string
	var runs int
	e.Projection().Read(func(st *projections.State) {
		item = events.WorkID(st.Plans["d1"].BuiltSeq, events.RunBackfill)
		runs = st.Runs[events.RunBackfill]
	})
	if runs == 0 {
		t.Fatal("the worker's run recorded no backfill")
	}
	before, state := lastSeq(t, e), stateJSON(t, e)

	// Reports without a work item are not a worker's to send: the server
	// refuses the subjects (no reply).
	short := transport.NewClient(wConn)
	short.Timeout = 500 * time.Millisecond
	for _, cmd := range []commands.Command{
		&commands.CompleteIntervals{Model: "events", Version: "v3", Ranges: []interval.Range{rng(0, 3)}},
		&commands.CompleteIntervals{Model: "events", Version: "v3", Ranges: []interval.Range{rng(0, 3)}, RunKind: events.RunBackfill, Work: item},
		&commands.FailRun{Model: "events", Version: "v3", Ranges: []interval.Range{rng(0, 3)}, RunKind: events.RunManual, Error: "x", Attempt: 1},
	} {
		if r, err := short.Do(ctx, cmd); err == nil {
			t.Errorf("a worker's %s was answered: %+v", cmd.Kind(), r)
		}
	}
	if v := strings.Join(wViolations(), "\n"); !strings.Contains(v, `"tidemark.cmd.worker.complete_intervals"`) || !strings.Contains(v, `"tidemark.cmd.worker.fail_run"`) {
		t.Errorf("violations: %s", v)
	}

	// Reports naming an item are checked against it.
	complete := func(version string, r interval.Range, kind events.RunKind, work string) commands.Command {
		return &commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Model: "events", Version: version, Ranges: []interval.Range{r}, RunKind: kind, Work: work}}
	}
	cases := []struct {
		name        string
		cmd         commands.Command
		code, field string
	}{
		{"no work item", complete("v3", rng(0, 3), "", ""), "invalid", "work"},
		{"a snapshot the item does not name", complete("v3", rng(0, 3), "", item), "invalid", "work"},
		{"a range outside the item", complete("v1", rng(3, 4), "", item), "invalid", "ranges[0]"},
		{"a range overlapping the item's end", complete("v1", rng(2, 4), events.RunBackfill, item), "invalid", "ranges[0]"},
		{"another run kind than the item's", complete("v1", rng(0, 1), events.RunScheduled, item), "invalid", "run_kind"},
		{"an item the stream never made due", complete("v1", rng(0, 1), "", events.WorkID(1, events.RunBackfill)), "not_found", "work"},
		{"an item from beyond the stream", complete("v1", rng(0, 1), "", events.WorkID(1<<40, events.RunBackfill)), "unavailable", "work"},
		{"not a work item id", complete("v1", rng(0, 1), "", "tick:prod:2026-12-01T01:00:00Z"), "invalid", "work"},
		{"a failure of a snapshot the item does not name", &commands.FailWork{FailRun: commands.FailRun{Model: "events", Version: "v3",
			Ranges: []interval.Range{rng(0, 1)}, RunKind: events.RunBackfill, Error: "x", Attempt: 1, Work: item}}, "invalid", "work"},
		{"a failure outside the item", &commands.FailWork{FailRun: commands.FailRun{Model: "events", Version: "v1",
			Ranges: []interval.Range{rng(5, 6)}, RunKind: events.RunBackfill, Error: "x", Attempt: 1, Work: item}}, "invalid", "ranges[0]"},
		{"a failure without an item", &commands.FailWork{FailRun: commands.FailRun{Model: "events", Version: "v1",
			Ranges: []interval.Range{rng(0, 1)}, RunKind: events.RunBackfill, Error: "x", Attempt: 1}}, "invalid", "work"},
	}
	for _, c := range cases {
		r, err := client.Do(ctx, c.cmd)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if r.Accepted || string(r.Code) != c.code || r.Field != c.field {
			t.Errorf("%s: got accepted=%v %s on %q (%s), want %s on %q", c.name, r.Accepted, r.Code, r.Field, r.Message, c.code, c.field)
		}
	}
	if lastSeq(t, e) != before || stateJSON(t, e) != state {
		t.Errorf("refused reports appended %d events", lastSeq(t, e)-before)
	}

	// The item's own ranges are still the worker's to report (a recomputed
	// batch, say).
	if r, err := client.Do(ctx, complete("v1", rng(1, 2), "", item)); err != nil || !r.Accepted {
		t.Fatalf("a report within the item: %v %+v", err, r)
	}
}
