package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// workEnv is an engine publishing work, with a command client.
type workEnv struct {
	t      *testing.T
	e      *engine.Engine
	client *transport.Client
	js     jetstream.JetStream
	stop   func()
}

// newWorkEnv's work consumer redelivers an item after ackWait.
func newWorkEnv(t *testing.T, ackWait time.Duration) *workEnv {
	e := open(t, engine.Config{})
	svc, err := transport.Serve(e.Log().JetStream().Conn(), e, transport.ServiceConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, e)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pub := &work.Publisher{Log: e.Log(), Clock: e.Now, Logger: quiet(), AckWait: ackWait}
	if err := pub.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = pub.Run(ctx) }()
	w := &workEnv{t: t, e: e, client: transport.NewClient(nc), js: js}
	w.stop = func() { cancel(); wg.Wait(); svc.Stop() }
	t.Cleanup(w.stop)
	return w
}

func (w *workEnv) worker(ctx context.Context, command string, mod func(*shell.Worker)) (wait func()) {
	x := &shell.Worker{JS: w.js, Handler: w.client, Command: command, Name: "test", Logger: quiet(),
		Backoff: []time.Duration{10 * time.Millisecond}, Output: &strings.Builder{}}
	if mod != nil {
		mod(x)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	return func() { <-done }
}

func covered(snapshot string, r interval.Range) func(*projections.State) bool {
	return func(st *projections.State) bool { return st.SnapshotCoverage(snapshot).Covers(r) }
}

// TestExecWorker: plan backfill and scheduled work reach a worker that
// runs a real shell command per batch with the batch in its environment,
// and its completions fill coverage; the ticks are computed in dependency
// order within one item.
func TestExecWorker(t *testing.T) {
	w := newWorkEnv(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	logFile := filepath.Join(t.TempDir(), "runs.log")
	wait := w.worker(ctx, `echo "$TIDEMARK_RUN_KIND $TIDEMARK_MODEL@$TIDEMARK_VERSION $TIDEMARK_START $TIDEMARK_END" >> `+logFile, func(x *shell.Worker) { x.Concurrency = 2 })
	defer func() { cancel(); wait() }()

	must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "sessions", Version: "v1", Cron: "@hourly", Start: t0, DependsOn: []string{"events"}}))
	must(t, w.e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "d1", Env: "prod", Versions: map[string]string{"events": "v1", "sessions": "v1"}}))
	if err := w.e.Projection().Await(ctx, covered("sessions@v1", rng(0, 3))); err != nil {
		t.Fatal(err)
	}
	if r := must(t, w.e.Handle(ctx, &commands.Promote{Meta: meta(at(3)), Plan: "d1"})); r.Decision.Outcome != events.Accepted {
		t.Fatalf("deploy: %+v", r.Decision)
	}
	if _, _, err := ticker(w.e).Tick(ctx, "prod", at(4), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.e.Projection().Await(ctx, covered("sessions@v1", rng(3, 4))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"backfill events@v1 2026-12-01T00:00:00Z 2026-12-01T03:00:00Z",
		"backfill sessions@v1 2026-12-01T00:00:00Z 2026-12-01T03:00:00Z",
		"scheduled events@v1 2026-12-01T03:00:00Z 2026-12-01T04:00:00Z",
		"scheduled sessions@v1 2026-12-01T03:00:00Z 2026-12-01T04:00:00Z",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("runs:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var runs map[events.RunKind]int
	w.e.Projection().Read(func(st *projections.State) {
		runs = map[events.RunKind]int{}
		for k, v := range st.Runs {
			runs[k] = v
		}
	})
	if runs[events.RunBackfill] != 2 || runs[events.RunScheduled] != 2 {
		t.Fatalf("completions by run kind: %v", runs)
	}
}

// TestExecWorkerFailures: a failing command is an event with its exit
// status and stderr tail, retried until the attempts run out; a hanging
// one is killed at the timeout; work a dead worker held is redelivered.
func TestExecWorkerFailures(t *testing.T) {
	w := newWorkEnv(t, time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	wait := w.worker(ctx, `case $TIDEMARK_MODEL in
		bad) echo "no such table: bad_v1" >&2; exit 3 ;;
		slow) sleep 30 ;;
	esac`, func(x *shell.Worker) { x.MaxAttempts = 2; x.Timeout = 300 * time.Millisecond; x.Concurrency = 2 })
	for _, m := range []string{"bad", "slow"} {
		must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: m, Version: "v1", Cron: "@hourly", Start: t0}))
		must(t, w.e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p-" + m, Env: "prod", Versions: map[string]string{m: "v1"}}))
	}
	failed := func(snapshot string, n int) func(*projections.State) bool {
		return func(st *projections.State) bool { f := st.Failures[snapshot]; return f != nil && f.Count >= n }
	}
	if err := w.e.Projection().Await(ctx, func(st *projections.State) bool { return failed("bad@v1", 2)(st) && failed("slow@v1", 2)(st) }); err != nil {
		t.Fatal(err)
	}
	w.e.Projection().Read(func(st *projections.State) {
		bad, slow := st.Failures["bad@v1"], st.Failures["slow@v1"]
		if bad.Count != 2 || bad.Final != 1 || bad.Last.ExitStatus != 3 || !bad.Last.Final || bad.Last.Attempt != 2 ||
			strings.TrimSpace(bad.Last.StderrTail) != "no such table: bad_v1" || bad.Last.RunKind != events.RunBackfill {
			t.Errorf("bad: %+v", bad.Last)
		}
		if slow.Last.Error != "timed out after 300ms" || slow.Last.ExitStatus != -1 {
			t.Errorf("slow: %+v", slow.Last)
		}
		if !st.SnapshotCoverage("bad@v1").Empty() {
			t.Errorf("a failed run completed something")
		}
	})
	cancel()
	wait()

	// A worker that takes an item and dies (no ack, no heartbeat): the item
	// is redelivered after the ack wait to a live worker.
	ctx2, cancel2 := context.WithTimeout(t.Context(), time.Minute)
	defer cancel2()
	x := &shell.Worker{JS: w.js}
	cons, err := x.Consumer(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.e.Handle(ctx2, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "good", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, w.e.Handle(ctx2, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p-good", Env: "prod", Versions: map[string]string{"good": "v1"}}))
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for range batch.Messages() {
		taken++ // and never acked: the worker "died"
	}
	if taken != 1 {
		t.Fatalf("dead worker took %d items", taken)
	}
	wait2 := w.worker(ctx2, "true", nil)
	if err := w.e.Projection().Await(ctx2, covered("good@v1", rng(0, 3))); err != nil {
		t.Fatal(err)
	}
	cancel2()
	wait2()
}

// TestExecWorkerHeartbeats: a command that runs longer than the ack wait
// is kept alive by in-progress acks and is not redelivered meanwhile.
func TestExecWorkerHeartbeats(t *testing.T) {
	w := newWorkEnv(t, time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	logFile := filepath.Join(t.TempDir(), "runs.log")
	wait := w.worker(ctx, `echo run >> `+logFile+`; sleep 2.5`, func(x *shell.Worker) { x.Concurrency = 3 })
	defer func() { cancel(); wait() }()
	must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "long", Version: "v1", Cron: "@hourly", Start: t0}))
	must(t, w.e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p-long", Env: "prod", Versions: map[string]string{"long": "v1"}}))
	if err := w.e.Projection().Await(ctx, covered("long@v1", rng(0, 3))); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(logFile)
	if n := strings.Count(string(b), "run\n"); n != 1 {
		t.Fatalf("the 2.5s batch ran %d times under a 1s ack wait", n)
	}
}

// TestWorkerSkipsStalePlanWork: a plan's backfill queued while no worker
// runs goes stale (a later plan promotes the same version and a
// forward-only successor takes its table over: the table is production's
// now). The worker asks before computing it (check_work), the engine
// refuses, and the worker gives the item up without running its command
// once; the items that are still current are computed.
func TestWorkerSkipsStalePlanWork(t *testing.T) {
	w := newWorkEnv(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	deploy(t, w.e, "prod", "d1", "v1", at(3))
	must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v2", Cron: "@hourly", Start: t0}))
	old := must(t, w.e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p-old", Env: "prod", Versions: map[string]string{"events": "v2"}}))
	if len(old.Plan.Candidates) != 1 || len(old.Plan.Candidates[0].Backfill) == 0 {
		t.Fatalf("p-old: %+v", old.Plan)
	}
	deploy(t, w.e, "prod", "p-new", "v2", at(3))
	must(t, w.e.Handle(ctx, &commands.RegisterSnapshot{Meta: meta(at(3)), Model: "events", Version: "v3", Cron: "@hourly", Start: t0, SnapshotKind: events.ForwardOnly}))
	must(t, w.e.Handle(ctx, &commands.BuildPlan{Meta: meta(at(3)), Plan: "p-fo", Env: "prod", Versions: map[string]string{"events": "v3"}}))
	if r := must(t, w.e.Handle(ctx, &commands.Promote{Meta: meta(at(3)), Plan: "p-fo"})); r.Decision.Outcome != events.Accepted {
		t.Fatalf("p-fo: %+v", r.Decision)
	}
	var table string
	w.e.Projection().Read(func(st *projections.State) { table = st.Snapshots["events@v3"].Table })
	if table != "events@v2" {
		t.Fatalf("forward-only v3 writes %s, want v2's table", table)
	}

	logFile := filepath.Join(t.TempDir(), "runs.log")
	type outcome struct {
		item work.Item
		err  error
	}
	done := make(chan outcome, 16)
	wait := w.worker(ctx, `echo "$TIDEMARK_PLAN $TIDEMARK_MODEL@$TIDEMARK_VERSION" >> `+logFile, func(x *shell.Worker) {
		x.Done = func(it work.Item, err error) { done <- outcome{it, err} }
	})
	defer func() { cancel(); wait() }()
	got := map[string]error{}
	for len(got) < 3 {
		select {
		case o := <-done:
			got[o.item.Plan] = o.err
		case <-ctx.Done():
			t.Fatalf("items settled: %v", got)
		}
	}
	if got["d1"] != nil || got["p-new"] != nil {
		t.Fatalf("current items: %v", got)
	}
	if ce := new(commands.Error); !errors.As(got["p-old"], &ce) || ce.Code != commands.CodeInvalid || ce.Field != "run_id" {
		t.Fatalf("the stale item: %v, want refused invalid on run_id", got["p-old"])
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if runs := string(b); strings.Contains(runs, "p-old") || !strings.Contains(runs, "p-new events@v2") || !strings.Contains(runs, "d1 events@v1") {
		t.Fatalf("commands run:\n%s", runs)
	}
}
