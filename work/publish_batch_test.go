package work

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/engine"
	"github.com/tidemark/tidemark/eventlog"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/live"
	"github.com/tidemark/tidemark/projections"
)

// The published sink's batches (deliver, admit, wake, hold) against a
// real engine on an embedded JetStream server: the test is the worker,
// fetching from the work consumer and recording completions and failures
// by hand.

// pubWorld is an engine on a simulated clock (commands carry their
// time), the work consumer, and the publisher(s) the test runs on it.
type pubWorld struct {
	t       *testing.T
	e       *engine.Engine
	js      jetstream.JetStream
	cons    jetstream.Consumer
	markers int
}

// pubNow is the completions' clock: after every range the tests use.
var pubNow = t0.Add(24 * time.Hour)

// ph is t0 plus n hours.
func ph(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

func newPubWorld(t *testing.T) *pubWorld {
	t.Helper()
	e := jstest.Engine(t, engine.Config{TrustCommandTime: true})
	return &pubWorld{t: t, e: e, js: e.Log().JetStream()}
}

// runningPub is a publisher running until stop.
type runningPub struct {
	p    *Publisher
	stop func()
	mu   sync.Mutex
	keys []string // Item.Key of every publish (duplicates included)
}

func (r *runningPub) published() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

// start runs a publisher in published mode as serve wires it (SQL,
// Progress and Tables from the engine's projection), with
// batchConcurrency as its default bound.
func (w *pubWorld) start(batchConcurrency int) *runningPub {
	t := w.t
	t.Helper()
	proj := w.e.Projection()
	r := &runningPub{}
	r.p = &Publisher{Log: w.e.Log(), Clock: w.e.Now, Logger: jstest.Quiet(), AckWait: time.Minute, SQL: testSQL(proj), Progress: ProgressFrom(proj), Tables: TablesFrom(proj), Gone: GoneFrom(proj),
		BatchConcurrency: batchConcurrency, MaxBackoff: 50 * time.Millisecond,
		Published: func(it Item) { r.mu.Lock(); r.keys = append(r.keys, it.Key()); r.mu.Unlock() }}
	if err := r.p.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	cons, err := w.js.Consumer(t.Context(), Stream, Consumer)
	if err != nil {
		t.Fatal(err)
	}
	w.cons = cons
	r.run(t)
	return r
}

// run runs r's publisher (again) until stop.
func (r *runningPub) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- r.p.Run(ctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-ended; err != nil {
				t.Errorf("publisher: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
}

// testSQL is sqlrun.StepSQL's batching: each snapshot's unit, batch_size
// and batch_concurrency (a query no one runs).
func testSQL(proj *live.Projection) SQLOf {
	return func(ctx context.Context, seq uint64, snapshot string) (*SQL, error) {
		if err := proj.WaitFor(ctx, seq); err != nil {
			return nil, err
		}
		var out *SQL
		proj.Read(func(st *projections.State) {
			if sn := st.Snapshots[snapshot]; sn != nil {
				out = &SQL{Query: "SELECT 1", TimeColumn: "ts", Table: sn.Table, Unit: sn.Unit, BatchSize: sn.BatchSize, BatchConcurrency: sn.BatchConcurrency}
			}
		})
		return out, nil
	}
}

func (w *pubWorld) do(cmd commands.Command) commands.Reply {
	w.t.Helper()
	r := w.e.Handle(w.t.Context(), cmd)
	if err := r.Err(); err != nil {
		w.t.Fatalf("%T rejected: %v", cmd, err)
	}
	return r
}

func pmeta() commands.Meta { return commands.Meta{ID: commands.NewID(), At: pubNow, Actor: "test"} }

// register registers model@v1, hourly from t0.
func (w *pubWorld) register(model string, batchSize, batchConcurrency int, dependsOn ...string) {
	w.do(&commands.RegisterSnapshot{Meta: pmeta(), Model: model, Version: "v1", Cron: "@hourly", Start: t0,
		DependsOn: dependsOn, BatchSize: batchSize, BatchConcurrency: batchConcurrency})
}

// build builds plan in env for models (each at v1, backfilled [t0,
// through)) and returns its backfill item's id.
func (w *pubWorld) build(plan, env string, through time.Time, models ...string) string {
	w.t.Helper()
	vs := map[string]string{}
	for _, m := range models {
		vs[m] = "v1"
	}
	w.do(&commands.BuildPlan{Meta: commands.Meta{ID: commands.NewID(), At: through, Actor: "test"}, Plan: plan, Env: env, Versions: vs})
	var id string
	w.e.Projection().Read(func(st *projections.State) { id = events.WorkID(st.Plans[plan].BuiltSeq, events.RunBackfill) })
	return id
}

// batchMsg is a fetched batch: its item and when it was fetched, what the
// item had recorded done of each snapshot.
type batchMsg struct {
	item  Item
	msgID string
	done  map[string]interval.Set
}

func (b batchMsg) key() string { return b.item.Key() }

// barrier makes a marker item (a model of its own, planned alone in an
// env of its own) and fetches the work consumer until the marker's batch
// comes, acking every message: the publisher handles events in stream
// order, so every batch it published before it is among those returned
// (in stream order, the marker left out).
func (w *pubWorld) barrier() []batchMsg {
	t := w.t
	t.Helper()
	w.markers++
	m := "marker" + strconv.Itoa(w.markers)
	w.register(m, 0, 0)
	w.build("plan-"+m, "env-"+m, ph(1), m)
	var out []batchMsg
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := w.cons.Fetch(10, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		for msg := range msgs.Messages() {
			var it Item
			if err := json.Unmarshal(msg.Data(), &it); err != nil {
				t.Fatal(err)
			}
			if err := msg.Ack(); err != nil {
				t.Fatal(err)
			}
			if it.Steps[0].Model == m {
				seen = true
				continue
			}
			b := batchMsg{item: it, msgID: msg.Headers().Get(jetstream.MsgIDHeader), done: map[string]interval.Set{}}
			w.e.Projection().Read(func(st *projections.State) {
				if wk := st.Work[it.ID]; wk != nil {
					for sn, d := range wk.Done {
						b.done[sn] = slices.Clone(d.Ranges)
					}
				}
			})
			out = append(out, b)
		}
		if seen {
			return out
		}
	}
	t.Fatalf("marker %s never published", m)
	return nil
}

// complete records b's range done, naming its item, as a worker does.
func (w *pubWorld) complete(b batchMsg) {
	w.t.Helper()
	st := b.item.Steps[0]
	w.do(&commands.CompleteWork{CompleteIntervals: commands.CompleteIntervals{Meta: pmeta(), Model: st.Model, Version: st.Version,
		Ranges: st.Ranges, RunKind: b.item.RunKind, RunID: st.RunID, Work: b.item.ID}})
}

// fail records b's range failed for good, naming its item.
func (w *pubWorld) fail(b batchMsg) {
	w.t.Helper()
	st := b.item.Steps[0]
	w.do(&commands.FailWork{FailRun: commands.FailRun{Meta: pmeta(), Model: st.Model, Version: st.Version, Ranges: st.Ranges,
		RunKind: b.item.RunKind, RunID: st.RunID, Worker: "test", ExitStatus: 1, Error: "boom", Attempt: 1, Final: true, Work: b.item.ID}})
}

// cursor is the saved work cursor.
func (w *pubWorld) cursor() uint64 {
	w.t.Helper()
	e, err := w.e.Log().Bucket().Get(w.t.Context(), cursorKey)
	if err != nil {
		w.t.Fatal(err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func keysOf(bs []batchMsg) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.key())
	}
	return out
}

// find is the batch of bs named key.
func find(t *testing.T, bs []batchMsg, key string) batchMsg {
	t.Helper()
	for _, b := range bs {
		if b.key() == key {
			return b
		}
	}
	t.Fatalf("no batch %s among %v", key, keysOf(bs))
	return batchMsg{}
}

// sameSet reports whether got and want hold the same keys.
func sameSet(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// checkNeeds fails t for each fetched batch of child whose parent's
// overlapping batches (hours cut by 2) were not recorded done when it
// was fetched.
func checkNeeds(t *testing.T, bs []batchMsg, child, parent string) {
	t.Helper()
	for _, b := range bs {
		st := b.item.Steps[0]
		if st.Snapshot != child {
			continue
		}
		r := st.Ranges[0]
		need := interval.R(r.Start.Truncate(2*time.Hour), r.End.Add(time.Hour).Truncate(2*time.Hour))
		if !b.done[parent].Covers(need) {
			t.Errorf("batch %s (%s) was fetchable while its parent's %s was not done (done: %s)", b.key(), r, need, b.done[parent])
		}
	}
}

// TestPublishedChildWaitsForParent: a plan of a parent and a child (batch
// size 2 hours) goes out as the parent's batches at once, and each child
// batch only once the parent's batch under it is recorded done, in
// whatever order the parent's batches complete; every batch is its own
// message (Nats-Msg-Id = its key).
func TestPublishedChildWaitsForParent(t *testing.T) {
	w := newPubWorld(t)
	w.start(0)
	w.register("events", 2, 0)
	w.register("sessions", 2, 0, "events")
	id := w.build("p1", "prod", ph(6), "events", "sessions")

	got := w.barrier()
	want := []string{id + "/0/0", id + "/0/1", id + "/0/2"}
	if !slices.Equal(keysOf(got), want) {
		t.Fatalf("published at once: %v, want the parent's batches %v", keysOf(got), want)
	}
	for _, b := range got {
		if b.msgID != b.key() {
			t.Errorf("batch %s published with Nats-Msg-Id %q, want its key", b.key(), b.msgID)
		}
	}
	parents := got

	// The middle parent batch done: only the child batch over it follows.
	w.complete(find(t, parents, id+"/0/1"))
	got = w.barrier()
	checkNeeds(t, got, "sessions@v1", "events@v1")
	if !slices.Equal(keysOf(got), []string{id + "/1/1"}) {
		t.Fatalf("after the parent's batch 1: %v, want %s/1/1 alone", keysOf(got), id)
	}
	children := got

	w.complete(find(t, parents, id+"/0/2"))
	w.complete(find(t, parents, id+"/0/0"))
	got = w.barrier()
	checkNeeds(t, got, "sessions@v1", "events@v1")
	if !sameSet(keysOf(got), []string{id + "/1/0", id + "/1/2"}) {
		t.Fatalf("after the rest of the parent: %v, want %s/1/0 and /1/2", keysOf(got), id)
	}
	children = append(children, got...)
	for _, b := range children {
		if b.msgID != b.key() {
			t.Errorf("batch %s published with Nats-Msg-Id %q, want its key", b.key(), b.msgID)
		}
		w.complete(b)
	}
	if got := w.barrier(); len(got) != 0 {
		t.Errorf("published after the item was done: %v", keysOf(got))
	}
	var done interval.Set
	w.e.Projection().Read(func(st *projections.State) { done = st.Work[id].Done["sessions@v1"].Ranges })
	if !done.Equal(interval.NewSet(interval.R(ph(0), ph(6)))) {
		t.Errorf("the child's progress: %s", done)
	}
}

// TestPublishedBatchConcurrency: with batch_concurrency 2, never more
// than two batches of the step are on the stream and not recorded done;
// each completion releases the next, in whatever order they complete. A
// model without its own bound takes the publisher's.
func TestPublishedBatchConcurrency(t *testing.T) {
	w := newPubWorld(t)
	w.start(3)
	w.register("events", 1, 2)
	w.register("clicks", 1, 0)
	id := w.build("p1", "prod", ph(8), "events", "clicks")
	bound := map[string]int{"events@v1": 2, "clicks@v1": 3}

	outstanding := map[string][]batchMsg{} // per snapshot, fetched and not completed
	seen := map[string]bool{}
	published := map[string]int{} // per snapshot
	check := func(got []batchMsg) {
		t.Helper()
		for _, b := range got {
			if seen[b.key()] || b.item.ID != id {
				t.Fatalf("batch %s published twice, or not of item %s", b.key(), id)
			}
			seen[b.key()] = true
			sn := b.item.Steps[0].Snapshot
			outstanding[sn] = append(outstanding[sn], b)
			published[sn]++
		}
		for sn, n := range bound {
			// Of the step's 8 batches, those not done yet, up to the bound.
			want := min(n, 8-published[sn]+len(outstanding[sn]))
			if len(outstanding[sn]) != want {
				t.Fatalf("%s: %d batches on the stream not done (%v), want %d", sn, len(outstanding[sn]), keysOf(outstanding[sn]), want)
			}
		}
	}
	check(w.barrier())
	// Complete the newest of events' and the oldest of clicks' batches, one
	// at a time, until all are done.
	for round := 0; len(seen) < 16 || len(outstanding["events@v1"])+len(outstanding["clicks@v1"]) > 0; round++ {
		if round > 20 {
			t.Fatalf("not done after %d rounds: seen %d", round, len(seen))
		}
		if ev := outstanding["events@v1"]; len(ev) > 0 {
			w.complete(ev[len(ev)-1])
			outstanding["events@v1"] = ev[:len(ev)-1]
		}
		if cl := outstanding["clicks@v1"]; len(cl) > 0 {
			w.complete(cl[0])
			outstanding["clicks@v1"] = cl[1:]
		}
		check(w.barrier())
	}
}

// lastSeq is the event stream's last sequence.
func (w *pubWorld) lastSeq() uint64 {
	w.t.Helper()
	seq, err := w.e.Log().Reader().LastSeq(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	return seq
}

// itemKeys is the keys of item id's batches among keys.
func itemKeys(keys []string, id string) []string {
	var out []string
	for _, k := range keys {
		if len(k) > len(id) && k[:len(id)+1] == id+"/" {
			out = append(out, k)
		}
	}
	return out
}

// TestPublishedRestart: while child batches wait, the work cursor stays
// before the item's event; a publisher started after a stop derives the
// item again and publishes only the batches not recorded done, within the
// bounds (what was on the stream not done, and the next in turn), and
// the rest as their parents complete; once nothing waits the cursor
// moves to the stream's end.
func TestPublishedRestart(t *testing.T) {
	w := newPubWorld(t)
	first := w.start(0)
	w.register("events", 2, 2)
	w.register("sessions", 2, 0, "events")
	id := w.build("p1", "prod", ph(8), "events", "sessions")
	seq, _, _ := events.ParseWorkID(id)

	parents := w.barrier()
	if !slices.Equal(keysOf(parents), []string{id + "/0/0", id + "/0/1"}) {
		t.Fatalf("published at once: %v", keysOf(parents))
	}
	w.complete(find(t, parents, id+"/0/0"))
	got := w.barrier()
	if !sameSet(keysOf(got), []string{id + "/0/2", id + "/1/0"}) {
		t.Fatalf("after the parent's batch 0: %v", keysOf(got))
	}
	parents = append(parents, got...)
	if c := w.cursor(); c != seq-1 {
		t.Errorf("work cursor %d while batches wait, want %d (before the item's event)", c, seq-1)
	}
	first.stop()
	if c := w.cursor(); c != seq-1 {
		t.Fatalf("work cursor %d after the stop, want %d", c, seq-1)
	}

	second := w.start(0)
	// The barrier's marker comes after the item: the item was derived again.
	if got := w.barrier(); len(got) != 0 {
		// Within the duplicate window the stream keeps no second copy.
		t.Errorf("new messages after the restart: %v", keysOf(got))
	}
	want := []string{id + "/0/1", id + "/0/2", id + "/1/0"}
	if got := itemKeys(second.published(), id); !sameSet(got, want) {
		t.Fatalf("published after the restart: %v, want %v (the batches not done, within batch_concurrency 2)", got, want)
	}

	w.complete(find(t, parents, id+"/0/1"))
	got = w.barrier()
	if !sameSet(keysOf(got), []string{id + "/0/3", id + "/1/1"}) {
		t.Fatalf("after the parent's batch 1: %v", keysOf(got))
	}
	parents = append(parents, got...)
	w.complete(find(t, parents, id+"/0/2"))
	w.complete(find(t, parents, id+"/0/3"))
	got = w.barrier()
	if !sameSet(keysOf(got), []string{id + "/1/2", id + "/1/3"}) {
		t.Fatalf("after the whole parent: %v", keysOf(got))
	}
	last := w.lastSeq()
	eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
}

// TestPublishedGivenUp: a final failure of a parent batch gives the
// waiting child batches up, and so does the plan's cancellation: none is
// published, and the cursor moves on.
func TestPublishedGivenUp(t *testing.T) {
	setup := func(t *testing.T) (*pubWorld, string, []batchMsg) {
		w := newPubWorld(t)
		w.start(0)
		w.register("events", 2, 0)
		w.register("sessions", 2, 0, "events")
		id := w.build("p1", "prod", ph(6), "events", "sessions")
		parents := w.barrier()
		if len(parents) != 3 {
			t.Fatalf("published at once: %v", keysOf(parents))
		}
		seq, _, _ := events.ParseWorkID(id)
		if c := w.cursor(); c != seq-1 {
			t.Fatalf("work cursor %d while batches wait, want %d", c, seq-1)
		}
		return w, id, parents
	}
	t.Run("final failure", func(t *testing.T) {
		w, id, parents := setup(t)
		w.complete(find(t, parents, id+"/0/0"))
		if got := w.barrier(); !slices.Equal(keysOf(got), []string{id + "/1/0"}) {
			t.Fatalf("after the parent's batch 0: %v", keysOf(got))
		}
		w.fail(find(t, parents, id+"/0/1"))
		w.complete(find(t, parents, id+"/0/2"))
		if got := w.barrier(); len(got) != 0 {
			t.Errorf("published after a final failure of the parent: %v", keysOf(got))
		}
		last := w.lastSeq()
		eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
	})
	t.Run("cancelled", func(t *testing.T) {
		w, _, _ := setup(t)
		w.do(&commands.CancelPlan{Meta: pmeta(), Plan: "p1"})
		if got := w.barrier(); len(got) != 0 {
			t.Errorf("published after the plan's cancellation: %v", keysOf(got))
		}
		last := w.lastSeq()
		eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
	})
}

// TestWakeOrder: the waiting batches of several items that one command's
// events wake are published in stream order (their items' events), not
// in the order a map gives them.
func TestWakeOrder(t *testing.T) {
	w := newPubWorld(t)
	var order []string
	p := &Publisher{Log: w.e.Log(), Clock: w.e.Now, Logger: jstest.Quiet(), Progress: func(context.Context, uint64, string, string) (interval.Set, error) { return nil, nil },
		Published: func(it Item) { order = append(order, it.Key()) }}
	if err := p.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		order = nil
		p.waiting = map[string]*held{}
		var want []string
		woken := wake{done: map[string]bool{}}
		for i := range 8 {
			it := testItem(uint64(100*round+10+i), "a@v1")
			parts := Split(it, nil)
			p.waiting[it.ID] = &held{item: it, runs: []string{"backfill:p1"}, limits: []int{0}, parts: parts, published: map[int][]interval.Range{}}
			woken.done[it.ID] = true
			want = append(want, parts[0].Item.Key())
		}
		if err := p.wake(t.Context(), woken, 0); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(order, want) {
			t.Fatalf("round %d: woken batches published in the order %v, want %v", round, order, want)
		}
		if len(p.waiting) != 0 {
			t.Fatalf("round %d: %d items still waiting", round, len(p.waiting))
		}
	}
}

// TestPublishedGroupedCompletions: a completion stored in a group message
// (eventlog.GroupSubject: several commands' events in one message, as the
// engine group-commits them) wakes the waiting batches wherever it sits
// in the message: before its last event (the publisher's flush mid-group,
// which saves no cursor) or last; the cursor, held before the item while
// batches wait, moves to the stream's end once none does.
func TestPublishedGroupedCompletions(t *testing.T) {
	w := newPubWorld(t)
	w.start(0)
	w.register("events", 2, 0)
	w.register("sessions", 2, 0, "events")
	id := w.build("p1", "prod", ph(6), "events", "sessions")
	seq, _, _ := events.ParseWorkID(id)
	lc := w.e.Log().Config()
	elog, err := eventlog.Ensure(t.Context(), w.js, eventlog.Config{Replicas: lc.Replicas, Memory: lc.Memory, Logger: jstest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ids := events.NewIDSource()
	n := 0
	ev := func(p events.Payload) events.Event {
		n++
		e := events.New(ids, pubNow, p)
		e.Causation, e.Digest = fmt.Sprintf("group-cmd-%d", n), "d"
		return e
	}
	done := func(a, b int) events.Event {
		return ev(events.IntervalsCompleted{Snapshot: "events@v1", Table: "events@v1", Ranges: []interval.Range{interval.R(ph(a), ph(b))},
			RunKind: events.RunBackfill, RunID: "backfill:p1", Work: id})
	}
	other := func() events.Event {
		return ev(events.IntervalsCompleted{Snapshot: "solo@v1", Table: "solo@v1", Ranges: []interval.Range{interval.R(ph(0), ph(1))}, RunKind: events.RunManual})
	}
	group := func(evs ...events.Event) {
		t.Helper()
		if _, err := elog.AppendGroup(t.Context(), evs, eventlog.GroupCondition{LastSeq: w.lastSeq()}); err != nil {
			t.Fatal(err)
		}
	}
	if parents := w.barrier(); len(parents) != 3 {
		t.Fatalf("published at once: %v", keysOf(parents))
	}

	group(done(2, 4), other()) // the completion first: a flush mid-group
	got := w.barrier()
	checkNeeds(t, got, "sessions@v1", "events@v1")
	if !slices.Equal(keysOf(got), []string{id + "/1/1"}) {
		t.Fatalf("after a completion mid-group: %v, want %s/1/1", keysOf(got), id)
	}
	group(other(), done(0, 2)) // the completion last
	got = w.barrier()
	checkNeeds(t, got, "sessions@v1", "events@v1")
	if !slices.Equal(keysOf(got), []string{id + "/1/0"}) {
		t.Fatalf("after a completion ending a group: %v, want %s/1/0", keysOf(got), id)
	}
	if c := w.cursor(); c != seq-1 {
		t.Errorf("work cursor %d while a batch waits, want %d", c, seq-1)
	}
	group(done(4, 6), other())
	got = w.barrier()
	if !slices.Equal(keysOf(got), []string{id + "/1/2"}) {
		t.Fatalf("after the last parent batch: %v, want %s/1/2", keysOf(got), id)
	}
	last := w.lastSeq()
	eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
}

// TestPublisherRunsAgain: a publisher run again after a stop (serve runs
// it each time its engine becomes the writer) starts after the cursor
// as saved now, not where it first started, and without the batches it
// held when it stopped: meanwhile another writer's publisher may have
// published them, and moved the cursor past their item.
func TestPublisherRunsAgain(t *testing.T) {
	w := newPubWorld(t)
	first := w.start(0)
	w.register("events", 2, 0)
	w.register("sessions", 2, 0, "events")
	w.register("solo", 0, 0)
	solo := w.build("p0", "dev", ph(2), "solo") // published, never completed, waits for nothing
	id := w.build("p1", "prod", ph(4), "events", "sessions")
	parents := w.barrier()
	if len(parents) != 3 || parents[0].key() != solo+"/0/0" {
		t.Fatalf("published: %v", keysOf(parents))
	}
	first.stop()

	// Another writer's publisher takes over and publishes the children.
	other := w.start(0)
	for _, b := range parents[1:] {
		w.complete(b)
	}
	if got := w.barrier(); !sameSet(keysOf(got), []string{id + "/1/0", id + "/1/1"}) {
		t.Fatalf("the other publisher published %v", keysOf(got))
	}
	last := w.lastSeq()
	eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
	other.stop()

	// The first runs again: it derives nothing before the cursor again
	// and holds nothing back.
	first.mu.Lock()
	first.keys = nil
	first.mu.Unlock()
	first.run(t)
	if got := w.barrier(); len(got) != 0 {
		t.Errorf("new messages: %v", keysOf(got))
	}
	if got := append(itemKeys(first.published(), solo), itemKeys(first.published(), id)...); len(got) != 0 {
		t.Errorf("run again, the publisher published %v again: it started before the cursor", got)
	}
	last = w.lastSeq()
	eventually(t, "the cursor at the stream's end", func() bool { return w.cursor() == last })
}

// TestPublishedFailureDropsOnlyReaders: a batch failed for good gives up
// only the waiting batches that read it; another model's batches of the
// same item, waiting for a batch_concurrency slot, go on.
func TestPublishedFailureDropsOnlyReaders(t *testing.T) {
	w := newPubWorld(t)
	w.start(0)
	w.register("events", 1, 1)
	w.register("clicks", 1, 1)
	id := w.build("p1", "prod", ph(3), "events", "clicks")
	got := w.barrier()
	if !slices.Equal(keysOf(got), []string{id + "/0/0", id + "/1/0"}) {
		t.Fatalf("published at once: %v", keysOf(got))
	}
	w.fail(find(t, got, id+"/1/0"))     // clicks fails for good
	w.complete(find(t, got, id+"/0/0")) // events' first batch done
	next := w.barrier()
	if !slices.Equal(keysOf(next), []string{id + "/0/1"}) {
		t.Errorf("after events' batch 0 done (clicks failed for good): published %v, want %s/0/1: events reads nothing clicks writes", keysOf(next), id)
	}
}

// While an earlier item's batches wait (cursor held before it), a plan
// built after it is cancelled. A restart derives both again and publishes
// the cancelled plan's batches again before it reads the cancellation
// (after the duplicate window, new messages: workers are refused and
// record final failures) unless it asks whether they are still wanted
// (Publisher.Gone).
func TestPublishedRestartSkipsCancelled(t *testing.T) {
	w := newPubWorld(t)
	first := w.start(0)
	w.register("events", 2, 0)
	w.register("sessions", 2, 0, "events")
	w.register("solo", 1, 0)
	held := w.build("p0", "prod", ph(4), "events", "sessions")
	gone := w.build("p1", "dev", ph(3), "solo")
	got := w.barrier()
	t.Logf("published: %v", keysOf(got))
	w.do(&commands.CancelPlan{Meta: pmeta(), Plan: "p1"})
	_ = held
	w.barrier()
	first.stop()
	second := w.start(0)
	w.barrier()
	if again := itemKeys(second.published(), gone); len(again) > 0 {
		t.Errorf("after a restart the publisher published batches of cancelled plan p1 again: %v", again)
	}
}

// TestPublishedExhaustedIsFailed: a parent batch that runs out of
// deliveries with nothing reported (MaxDeliver 1, handed back once) is
// recorded failed for good by the publisher, from JetStream's advisory:
// its child's batches are given up, the cursor moves on, and the message
// leaves the stream.
func TestPublishedExhaustedIsFailed(t *testing.T) {
	w := newPubWorld(t)
	proj := w.e.Projection()
	p := &Publisher{Log: w.e.Log(), Clock: w.e.Now, Logger: jstest.Quiet(), Reporter: w.e, AckWait: time.Minute, MaxDeliver: 1, SQL: testSQL(proj), Progress: ProgressFrom(proj), Tables: TablesFrom(proj), MaxBackoff: 50 * time.Millisecond}
	if err := p.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	cons, err := w.js.Consumer(t.Context(), Stream, Consumer)
	if err != nil {
		t.Fatal(err)
	}
	w.cons = cons
	r := &runningPub{p: p}
	r.run(t)
	w.register("events", 0, 0)
	w.register("sessions", 0, 0, "events")
	id := w.build("p1", "prod", ph(2), "events", "sessions")
	msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		_ = m.NakWithDelay(10 * time.Millisecond) // the last delivery, handed back unreported
	}
	eventually(t, "the exhausted batch recorded failed for good", func() bool {
		var ok bool
		proj.Read(func(st *projections.State) {
			f := st.Failures["events@v1"]
			ok = f != nil && f.Final == 1 && f.LastFinal.Work == id
		})
		return ok
	})
	eventually(t, "the cursor moves past the item", func() bool { return w.cursor() == w.lastSeq() })
	if got := w.barrier(); len(itemKeys(keysOf(got), id)) != 0 {
		t.Errorf("published after the parent ran out of deliveries: %v", keysOf(got))
	}
	info, err := w.js.Stream(t.Context(), Stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := info.GetMsg(t.Context(), 1); err == nil {
		// The stream's first message is the parent batch.
		t.Errorf("the exhausted message is still on the stream")
	}
}

// GoneFrom: a restatement's work is wanted while its environment is at
// the generation it read, and gone once a promotion moved it on (a
// restart deriving the item again publishes none of it).
func TestGoneFromStaleRestatement(t *testing.T) {
	w := newPubWorld(t)
	ctx := t.Context()
	do := func(c commands.Command) commands.Reply {
		t.Helper()
		c.Header().ID, c.Header().At = commands.NewID(), pubNow
		r := w.e.Handle(ctx, c)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	deploy := func(plan, version string) {
		t.Helper()
		do(&commands.RegisterSnapshot{Model: "events", Version: version, Cron: "@hourly", Start: t0})
		built := do(&commands.BuildPlan{Plan: plan, Env: "prod", Versions: map[string]string{"events": version}})
		for _, c := range built.Plan.Candidates {
			do(&commands.CompleteIntervals{Model: "events", Version: version, Ranges: c.Backfill})
		}
		if d := do(&commands.Promote{Plan: plan}).Decision; d == nil || d.Outcome != events.Accepted {
			t.Fatalf("promote %s: %+v", plan, d)
		}
	}
	deploy("p1", "v1")
	r := do(&commands.Restate{Env: "prod", Model: "events", Ranges: []interval.Range{interval.R(ph(2), ph(3))}})
	seq := r.Seq - uint64(r.Events) + 1 // the request, first of its batch
	gone := GoneFrom(w.e.Projection())
	if why, err := gone(ctx, seq, events.RunRestate, r.Restatement.Run); err != nil || why != "" {
		t.Fatalf("fresh restate work gone: %q %v", why, err)
	}
	deploy("p2", "v2")
	if why, err := gone(ctx, seq, events.RunRestate, r.Restatement.Run); err != nil || why == "" {
		t.Fatalf("stale restate work still wanted: %q %v", why, err)
	}
}
