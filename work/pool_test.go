package work

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
)

// scheduledItem is a scheduler tick's item on snapshots.
func scheduledItem(seq uint64, snapshots ...string) Item {
	it := testItem(seq, snapshots...)
	it.RunKind, it.ID = events.RunScheduled, events.WorkID(seq, events.RunScheduled)
	return it
}

// feed hands the batches to a pool started with startPool() and no
// batches, from a goroutine (the tail), so that a pool that stops taking
// them in fails the test instead of hanging it.
func feed(t *testing.T, p *Publisher, batches ...batch) *poolRun {
	t.Helper()
	pr, in := launchPool(t, p, batches)
	go func() {
		for _, b := range batches {
			select {
			case in <- b:
			case <-pr.ctx.Done():
				return
			}
		}
	}()
	return pr
}

// order records the runner's starts and ends, and holds the items in
// block until released (or the pool stops).
type order struct {
	mu      sync.Mutex
	log     []string
	block   map[string]chan struct{}
	running map[string]bool
}

func newOrder(blocked ...string) *order {
	o := &order{block: map[string]chan struct{}{}, running: map[string]bool{}}
	for _, id := range blocked {
		o.block[id] = make(chan struct{})
	}
	return o
}

func (o *order) run(ctx context.Context, it Item, _ int) error {
	o.mu.Lock()
	o.log = append(o.log, "start "+it.ID)
	o.running[it.ID] = true
	ch := o.block[it.ID]
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.log = append(o.log, "end "+it.ID)
		delete(o.running, it.ID)
	}()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (o *order) isRunning(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running[id]
}

func (o *order) index(what string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Index(o.log, what)
}

// TestPoolTickBeforePlanWork: of two workers, plan work takes one at
// most, and a tick is started before plan work queued ahead of it. Two
// dev plans whose endless models never return and more plan work behind
// them: the tick queued last is done while the endless items still run,
// and before the queued plan work starts. On the pool in queue order the
// two endless items take both workers and the tick never runs.
func TestPoolTickBeforePlanWork(t *testing.T) {
	endA, endB, later := testItem(10, "e1@v1", "e2@v1"), testItem(11, "e3@v1", "e4@v1"), testItem(12, "x@v1")
	tick := scheduledItem(20, "pv@v1")
	o := newOrder(endA.ID, endB.ID)
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: &funcRunner{run: o.run}, Concurrency: 2}
	pr := feed(t, p, batch{items: []Item{endA}, last: 10}, batch{items: []Item{endB}, last: 11},
		batch{items: []Item{later}, last: 12}, batch{items: []Item{tick}, last: 20})
	eventually(t, "the tick done", func() bool { return pr.finished(tick.ID) })
	if !o.isRunning(endA.ID) {
		t.Errorf("the first endless plan item is not running while the tick is done")
	}
	if o.isRunning(endB.ID) || o.index("start "+endB.ID) >= 0 || o.index("start "+later.ID) >= 0 {
		t.Errorf("plan work took both workers: %v", o.log)
	}
	close(o.block[endA.ID])
	eventually(t, "the next plan item done", func() bool { return pr.finished(endB.ID) || o.isRunning(endB.ID) })
	close(o.block[endB.ID])
	eventually(t, "all done", func() bool { _, d := pr.snapshot(); return len(d) == 4 })
	eventually(t, "the cursor at 20", func() bool { s, _ := pr.snapshot(); return len(s) > 0 && s[len(s)-1] == 20 })
}

// TestPoolPriorityKeepsOrder: priority never lets a tick overtake an
// earlier plan item on its table: the tick waits for it, and that item
// takes the worker kept for ticks when plan work holds the others. The
// cursor moves past the tick only once the earlier items are finished.
func TestPoolPriorityKeepsOrder(t *testing.T) {
	endless, shared := testItem(10, "e1@v1"), testItem(11, "pv@v2")
	tick := scheduledItem(20, "pv@v2")
	o := newOrder(endless.ID)
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: &funcRunner{run: o.run}, Concurrency: 2}
	pr := feed(t, p, batch{items: []Item{endless}, last: 10}, batch{items: []Item{shared}, last: 11}, batch{items: []Item{tick}, last: 20})
	eventually(t, "the tick done", func() bool { return pr.finished(tick.ID) })
	if a, b := o.index("end "+shared.ID), o.index("start "+tick.ID); a < 0 || b < a {
		t.Errorf("the tick started before the earlier plan item on its table ended: %v", o.log)
	}
	if saved, _ := pr.snapshot(); len(saved) > 0 {
		t.Errorf("cursor saved %v while the first item runs", saved)
	}
	close(o.block[endless.ID])
	eventually(t, "the cursor at 20", func() bool { s, _ := pr.snapshot(); return len(s) > 0 && s[len(s)-1] == 20 })
}

// TestPoolPlanFloodLeavesRoomForTicks: more plan items than the pool
// schedules (maxQueuedPlan, and the old bound on all items) never keep a
// tick out: the tail hands it over and it is done while all of them are
// held. On the pool with one bound for all work the tail blocks on the
// flood and the tick is never taken in.
func TestPoolPlanFloodLeavesRoomForTicks(t *testing.T) {
	var batches []batch
	var ids []string
	for i := range maxQueuedPlan + 8 {
		it := testItem(uint64(10+i), fmt.Sprintf("m%d@v1", i))
		ids = append(ids, it.ID)
		batches = append(batches, batch{items: []Item{it}, last: uint64(10 + i)})
	}
	tick := scheduledItem(uint64(10+len(batches)), "pv@v1")
	o := newOrder(ids...)
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: &funcRunner{run: o.run}, Concurrency: 2}
	pr := feed(t, p, append(batches, batch{items: []Item{tick}, last: tick.EventSeq})...)
	eventually(t, "the tick done", func() bool { return pr.finished(tick.ID) })
	if _, done := pr.snapshot(); len(done) != 1 {
		t.Errorf("done %v, want the tick alone", done)
	}
}

// TestPoolParkedPlanWorkKeepsOrder: a plan item parked beyond
// maxQueuedPlan still holds back a later tick on its table, and is
// scheduled, in order, once an earlier plan item finishes.
func TestPoolParkedPlanWorkKeepsOrder(t *testing.T) {
	old := maxQueuedPlan
	maxQueuedPlan = 1
	t.Cleanup(func() { maxQueuedPlan = old })
	first, parked := testItem(10, "e1@v1"), testItem(11, "pv@v2")
	tick, other := scheduledItem(20, "pv@v2"), scheduledItem(21, "pv@v1")
	o := newOrder(first.ID)
	p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: &funcRunner{run: o.run}, Concurrency: 3}
	pr := feed(t, p, batch{items: []Item{first}, last: 10}, batch{items: []Item{parked}, last: 11},
		batch{items: []Item{tick}, last: 20}, batch{items: []Item{other}, last: 21})
	eventually(t, "the tick on other tables done", func() bool { return pr.finished(other.ID) })
	if o.index("start "+tick.ID) >= 0 || o.index("start "+parked.ID) >= 0 {
		t.Errorf("the parked item or the tick on its table ran while the first plan item holds the plan room: %v", o.log)
	}
	close(o.block[first.ID])
	eventually(t, "the tick done", func() bool { return pr.finished(tick.ID) })
	if a, b := o.index("end "+parked.ID), o.index("start "+tick.ID); a < 0 || b < a {
		t.Errorf("the tick started before the earlier parked item on its table ended: %v", o.log)
	}
	eventually(t, "the cursor at 21", func() bool { s, _ := pr.snapshot(); return len(s) > 0 && s[len(s)-1] == 21 })
}

// TestPoolTimeoutIsFinal: a step that timed out (ErrTimedOut, or its own
// deadline) is recorded final at its first attempt and the item given
// up: it is not retried.
func TestPoolTimeoutIsFinal(t *testing.T) {
	for name, cause := range map[string]error{
		"marked":   fmt.Errorf("e1@v1: timed out after 1m0s: %w: interrupted", ErrTimedOut),
		"deadline": fmt.Errorf("e1@v1: %w", context.DeadlineExceeded),
	} {
		t.Run(name, func(t *testing.T) {
			it := testItem(7, "e1@v1", "e2@v1")
			r := &funcRunner{run: func(context.Context, Item, int) error {
				return &ItemFailed{Failed: []StepFailure{{Step: 0, Err: cause}, {Step: 1, Err: errors.New("boom")}}}
			}}
			rep := &reporter{}
			p := &Publisher{Clock: clockAt(t0), Logger: quiet, Runner: r, Reporter: rep, Attempts: 5, RetryBackoff: time.Millisecond}
			pr := feed(t, p, batch{items: []Item{it}, last: 7})
			eventually(t, "given up", func() bool { return pr.finished(it.ID) })
			var fe *ItemFailed
			if !errors.As(pr.errs[it.ID], &fe) || len(r.calls) != 1 {
				t.Errorf("Done err %v after %d attempts, want its *ItemFailed after 1", pr.errs[it.ID], len(r.calls))
			}
			got := rep.got()
			if len(got) != 2 {
				t.Fatalf("%d failures recorded, want 2", len(got))
			}
			for _, c := range got {
				if !c.Final || c.Attempt != 1 {
					t.Errorf("failure %+v: want final at attempt 1", c)
				}
			}
		})
	}
}
