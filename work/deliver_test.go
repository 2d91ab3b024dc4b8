package work

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
)

// The pool tests run a Publisher without a Log (it follows no stream: the
// tests feed its pool directly), on a fixed clock, quietly.

// clockAt is a clock stopped at t.
func clockAt(t time.Time) func() time.Time { return func() time.Time { return t } }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A Publisher without a Log follows nothing: Prepare and Run refuse it,
// naming the field, and touch nothing.
func TestPublisherWithoutLog(t *testing.T) {
	for _, p := range []*Publisher{{}, {Runner: &funcRunner{}}} {
		if err := p.Prepare(t.Context()); !errors.Is(err, ErrNoLog) || !strings.Contains(err.Error(), "Publisher.Log") {
			t.Errorf("Prepare (runner %v) = %v, want ErrNoLog", p.Runner != nil, err)
		}
		if err := p.Run(t.Context()); !errors.Is(err, ErrNoLog) {
			t.Errorf("Run (runner %v) = %v, want ErrNoLog", p.Runner != nil, err)
		}
	}
}

// funcRunner runs items with run; it records the calls.
type funcRunner struct {
	mu    sync.Mutex
	calls []Item
	run   func(ctx context.Context, item Item, call int) error
}

func (r *funcRunner) Run(ctx context.Context, item Item, _ time.Time) error {
	r.mu.Lock()
	r.calls = append(r.calls, item)
	n := 0
	for _, c := range r.calls {
		if c.ID == item.ID {
			n++
		}
	}
	r.mu.Unlock()
	return r.run(ctx, item, n)
}

// reporter records the failures the pool reports.
type reporter struct {
	mu   sync.Mutex
	cmds []*commands.FailWork
}

func (h *reporter) Handle(_ context.Context, cmd commands.Command) commands.Reply {
	c := cmd.(*commands.FailWork)
	if err := c.Validate(); err != nil {
		return commands.Rejection(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, c)
	return commands.Reply{Accepted: true, Events: 1}
}

func (h *reporter) got() []*commands.FailWork {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.cmds)
}

var t0 = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

func testItem(seq uint64, snapshots ...string) Item {
	it := Item{ID: events.WorkID(seq, events.RunBackfill), RunKind: events.RunBackfill, EventSeq: seq}
	for _, sn := range snapshots {
		m, v, _ := events.ParseSnapshotID(sn)
		it.Steps = append(it.Steps, Step{Model: m, Version: v, Snapshot: sn, RunID: "backfill:p1",
			Ranges: []interval.Range{interval.R(t0, t0.Add(time.Hour))}})
	}
	return it
}

// poolRun runs p's pool on the batches, in order, until stop; it
// returns the cursor values saved, and the items finished with their
// errors, in order.
type poolRun struct {
	mu    sync.Mutex
	saved []uint64
	done  []string
	errs  map[string]error
	stop  func()
	ended chan error
	ctx   context.Context // ends when the pool is stopped
}

func startPool(t *testing.T, p *Publisher, batches ...batch) *poolRun {
	t.Helper()
	pr, in := launchPool(t, p, batches)
	for _, b := range batches {
		in <- b
	}
	return pr
}

// launchPool starts p's pool, recording what it finishes and the cursor
// it saves, stopped when the test ends, and fills in the tables of each
// batch's items; the caller hands the batches to in.
func launchPool(t *testing.T, p *Publisher, batches []batch) (*poolRun, chan<- batch) {
	t.Helper()
	pr := &poolRun{errs: map[string]error{}, ended: make(chan error, 1)}
	p.Done = func(it Item, err error) {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		pr.done = append(pr.done, it.ID)
		pr.errs[it.ID] = err
	}
	ctx, cancel := context.WithCancel(t.Context())
	var once sync.Once
	pr.stop = func() { once.Do(func() { cancel(); <-pr.ended }) }
	pr.ctx = ctx
	in := make(chan batch)
	go func() {
		pr.ended <- p.pool(ctx, in, func(_ context.Context, seq uint64) error {
			pr.mu.Lock()
			defer pr.mu.Unlock()
			pr.saved = append(pr.saved, seq)
			return nil
		})
	}()
	t.Cleanup(pr.stop)
	for i := range batches {
		for _, it := range batches[i].items {
			tables, err := p.tablesOf(ctx, it)
			if err != nil {
				t.Fatal(err)
			}
			batches[i].tables = append(batches[i].tables, tables)
		}
	}
	return pr, in
}

// eventually waits until cond holds, for at most 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (pr *poolRun) finished(id string) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Contains(pr.done, id)
}

func (pr *poolRun) snapshot() ([]uint64, []string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.saved), slices.Clone(pr.done)
}

// TestPoolIsolatesAFailingItem: an item whose step always fails is tried
// Attempts times, each failure recorded (the last final), then given up;
// meanwhile an item on other tables queued after it is done, and one on
// its table waits for it (stream order on a table). The cursor moves past
// a command only once every earlier item is finished.
func TestPoolIsolatesAFailingItem(t *testing.T) {
	poison, other, same := testItem(10, "bad@v1"), testItem(20, "good@v1"), testItem(30, "bad@v1")
	boom := errors.New("Conversion Error: Could not convert string 'x' to INT32")
	var sameStarted time.Time
	var poisonGivenUp time.Time
	var mu sync.Mutex
	r := &funcRunner{run: func(_ context.Context, it Item, n int) error {
		switch it.ID {
		case poison.ID:
			return &ItemFailed{Failed: []StepFailure{{Step: 0, Err: boom}}}
		case same.ID:
			mu.Lock()
			sameStarted = time.Now()
			mu.Unlock()
		}
		return nil
	}}
	rep := &reporter{}
	p := &Publisher{Clock: clockAt(t0.Add(48 * time.Hour)), Logger: quiet, Runner: r, Reporter: rep, Concurrency: 2, Attempts: 3,
		RetryBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}
	pr := startPool(t, p, batch{items: []Item{poison}, last: 10}, batch{items: []Item{other}, last: 20}, batch{items: []Item{same}, last: 30})
	eventually(t, "the other item done", func() bool { return pr.finished(other.ID) })
	if pr.finished(poison.ID) {
		t.Errorf("the other item waited for the failing one to be given up")
	}
	eventually(t, "the failing item given up", func() bool { return pr.finished(poison.ID) })
	poisonGivenUp = time.Now()
	eventually(t, "the item on the failing table done", func() bool { return pr.finished(same.ID) })
	mu.Lock()
	if sameStarted.IsZero() || !pr.finished(poison.ID) {
		t.Errorf("the item on the failing item's table ran before it was given up")
	}
	mu.Unlock()
	_ = poisonGivenUp
	var fe *ItemFailed
	if err := pr.errs[poison.ID]; !errors.As(err, &fe) {
		t.Errorf("Done(poison) = %v, want its *ItemFailed", err)
	}
	got := rep.got()
	if len(got) != 3 {
		t.Fatalf("%d failures recorded, want 3: %+v", len(got), got)
	}
	for i, c := range got {
		want := FailedID(poison.ID, 0, i+1)
		if c.ID != want || c.Attempt != i+1 || c.Final != (i == 2) || c.Error != boom.Error() || c.Work != poison.ID || c.Model != "bad" || !c.At.Equal(t0.Add(48*time.Hour)) {
			t.Errorf("failure %d: %+v, want id %s attempt %d final %v", i, c, want, i+1, i == 2)
		}
	}
	eventually(t, "the cursor at 30", func() bool { s, _ := pr.snapshot(); return len(s) > 0 && s[len(s)-1] == 30 })
	saved, _ := pr.snapshot()
	if slices.Contains(saved, 10) || saved[0] < 20 {
		t.Errorf("cursor saved %v: it moved past 10 before the failing item was given up, or saved 10 after 20", saved)
	}
}

// TestPoolEndlessItemHoldsOneWorker: an item that never returns (until
// the pool stops) takes one worker; the others do the rest (of three
// workers, plan work takes at most two); the cursor stays before it.
func TestPoolEndlessItemHoldsOneWorker(t *testing.T) {
	endless := testItem(5, "slow@v1")
	var rest []batch
	for i := range 5 {
		rest = append(rest, batch{items: []Item{testItem(uint64(10+i), fmt.Sprintf("m%d@v1", i))}, last: uint64(10 + i)})
	}
	r := &funcRunner{run: func(ctx context.Context, it Item, _ int) error {
		if it.ID == endless.ID {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: r, Concurrency: 3}
	pr := startPool(t, p, append([]batch{{items: []Item{endless}, last: 5}}, rest...)...)
	eventually(t, "the rest done", func() bool { _, d := pr.snapshot(); return len(d) == 5 })
	pr.stop()
	saved, done := pr.snapshot()
	if len(saved) != 0 || slices.Contains(done, endless.ID) {
		t.Errorf("saved %v, done %v: the cursor must stay before the unfinished item", saved, done)
	}
}

// TestPoolRetries pins how an attempt's outcome is treated: transient
// refusals are tried again without counting or recording; a rejection
// gives the item up at once; a retry runs only the failed steps and the
// steps that read them.
func TestPoolRetries(t *testing.T) {
	unavailable := commands.Errorf(commands.CodeUnavailable, "", "engine unavailable")
	invalid := commands.Errorf(commands.CodeInvalid, "run_id", "plan p1 was cancelled")
	t.Run("transient", func(t *testing.T) {
		it := testItem(7, "a@v1")
		r := &funcRunner{run: func(_ context.Context, _ Item, n int) error {
			if n <= 7 {
				return unavailable
			}
			return nil
		}}
		rep := &reporter{}
		p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: r, Reporter: rep, Attempts: 2, RetryBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
		pr := startPool(t, p, batch{items: []Item{it}, last: 7})
		eventually(t, "done", func() bool { return pr.finished(it.ID) })
		if pr.errs[it.ID] != nil || len(rep.got()) != 0 || len(r.calls) != 8 {
			t.Errorf("Done err %v, %d failures recorded, %d calls; want nil, 0, 8", pr.errs[it.ID], len(rep.got()), len(r.calls))
		}
	})
	t.Run("rejection", func(t *testing.T) {
		it := testItem(7, "a@v1")
		r := &funcRunner{run: func(context.Context, Item, int) error { return invalid }}
		p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: r, RetryBackoff: time.Millisecond}
		pr := startPool(t, p, batch{items: []Item{it}, last: 7})
		eventually(t, "given up", func() bool { return pr.finished(it.ID) })
		if !errors.Is(pr.errs[it.ID], invalid) || len(r.calls) != 1 {
			t.Errorf("Done err %v after %d calls, want the rejection after 1", pr.errs[it.ID], len(r.calls))
		}
	})
	t.Run("only failed and skipped steps again", func(t *testing.T) {
		it := testItem(7, "a@v1", "b@v1", "c@v1")
		r := &funcRunner{run: func(_ context.Context, _ Item, n int) error {
			if n == 1 {
				return &ItemFailed{Failed: []StepFailure{{Step: 0, Err: errors.New("boom")}}, Skipped: []int{2}}
			}
			return nil
		}}
		rep := &reporter{}
		p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: r, Reporter: rep, RetryBackoff: time.Millisecond}
		pr := startPool(t, p, batch{items: []Item{it}, last: 7})
		eventually(t, "done", func() bool { return pr.finished(it.ID) })
		if len(r.calls) != 2 {
			t.Fatalf("%d calls, want 2", len(r.calls))
		}
		second := r.calls[1]
		if len(second.Steps) != 3 || len(second.Steps[0].Ranges) == 0 || len(second.Steps[1].Ranges) != 0 || len(second.Steps[2].Ranges) == 0 {
			t.Errorf("second attempt: %+v, want steps 0 and 2 only (indices kept)", second.Steps)
		}
		if got := rep.got(); len(got) != 1 || got[0].Final || got[0].Attempt != 1 {
			t.Errorf("failures recorded: %+v, want attempt 1, not final", got)
		}
	})
}

// TestPoolPlanYields: with one worker, a plan item running when a tick's
// item arrives gives its worker back at its next batch (Yielding); the
// tick's item runs, then the plan item resumes, its attempt not counted.
func TestPoolPlanYields(t *testing.T) {
	var mu sync.Mutex
	var order []string
	runner := &funcRunner{run: func(ctx context.Context, item Item, call int) error {
		mu.Lock()
		order = append(order, fmt.Sprintf("%s#%d", item.RunKind, call))
		mu.Unlock()
		if item.RunKind != events.RunBackfill || call > 1 {
			return nil
		}
		for !Yielding(ctx) { // a long backfill, batch after batch
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
		return ErrYielded
	}}
	plan := testItem(1, "a@v1")
	plan.Plan = "p1"
	tick := Item{ID: events.WorkID(2, events.RunScheduled), RunKind: events.RunScheduled, EventSeq: 2, Steps: []Step{{Snapshot: "b@v1", Model: "b", Version: "v1", Ranges: plan.Steps[0].Ranges}}}
	var done []string
	var dmu sync.Mutex
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: runner, Concurrency: 1, Done: func(it Item, err error) {
		dmu.Lock()
		done = append(done, fmt.Sprintf("%s %v", it.RunKind, err))
		dmu.Unlock()
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	in := make(chan batch)
	go func() { _ = p.pool(ctx, in, func(context.Context, uint64) error { return nil }) }()
	in <- batch{items: []Item{plan}, last: 1, tables: [][]Tables{{{Writes: "a"}}}}
	eventually(t, "the plan item started", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 1 })
	in <- batch{items: []Item{tick}, last: 2, tables: [][]Tables{{{Writes: "b"}}}}
	eventually(t, "both items finished", func() bool { dmu.Lock(); defer dmu.Unlock(); return len(done) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"backfill#1", "scheduled#1", "backfill#2"}; !slices.Equal(order, want) {
		t.Errorf("attempts %v, want %v", order, want)
	}
	if want := []string{"scheduled <nil>", "backfill <nil>"}; !slices.Equal(done, want) {
		t.Errorf("finished %v, want %v", done, want)
	}
}
