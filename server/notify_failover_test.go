package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/natsnode"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/transport"
)

// The phases of a failover test (pair), as the hook records them with
// each POST.
const (
	bothRun  = iota // a writes, b follows
	handover        // a's Run is being stopped and a closed
	bAlone          // a closed
)

// hookPost is one POST a hook received.
type hookPost struct {
	member string // the URL's path: which server sent it
	key    string // Idempotency-Key
	notice notify.Notice
	acked  bool
	phase  int
}

// hook is a notification endpoint shared by the members of a cluster,
// each posting to its own path: it records every POST with the phase it
// came in and answers 200, or 500 when refuse says so (set it before
// any server posts).
type hook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	phase  int
	posts  []hookPost
	refuse func(member string, nt notify.Notice) bool
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var nt notify.Notice
		if err := json.Unmarshal(b, &nt); err != nil || r.Method != http.MethodPost {
			t.Errorf("hook: %s %q: %v", r.Method, b, err)
		}
		h.mu.Lock()
		p := hookPost{member: r.URL.Path, key: r.Header.Get("Idempotency-Key"), notice: nt, acked: true, phase: h.phase}
		if h.refuse != nil && h.refuse(p.member, nt) {
			p.acked = false
		}
		h.posts = append(h.posts, p)
		h.mu.Unlock()
		if !p.acked {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (p hookPost) String() string {
	return fmt.Sprintf("%s %s %s (%s) acked %t phase %d", p.member, p.key, p.notice.Kind, p.notice.Plan, p.acked, p.phase)
}

func (h *hook) setPhase(p int) { h.mu.Lock(); h.phase = p; h.mu.Unlock() }

// all is every POST so far, in the order received.
func (h *hook) all() []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookPost(nil), h.posts...)
}

// count is how many POSTs so far keep keeps.
func (h *hook) count(keep func(hookPost) bool) int {
	n := 0
	for _, p := range h.all() {
		if keep(p) {
			n++
		}
	}
	return n
}

// waitFor polls cond every 10ms until it holds, failing t after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pair is two servers, a and b, sharing one NATS server (two members of
// one cluster), each with --notify-url on its own path of one hook, and
// a client of their command service. a is opened and running first, so it
// is the writer; b follows.
type pair struct {
	t      *testing.T
	node   *natsnode.Node
	h      *hook
	client *transport.Client
	a, b   *Server
	stopA  func()
}

// newPair opens and runs a, waits until it is the writer, then opens and
// runs b; builtin says whether they run the built-in worker.
func newPair(t *testing.T, h *hook, builtin bool) *pair {
	p := &pair{t: t, node: jstest.Node(t), h: h}
	p.a = p.open("a", builtin)
	var once sync.Once
	stopA := running(t, p.a)
	p.stopA = func() { once.Do(stopA) }
	t.Cleanup(func() { p.stopA(); p.a.Close(context.Background()) })
	waitFor(t, "a is the writer", 30*time.Second, func() bool { return writing(p.a) })
	p.b = p.open("b", builtin)
	stopB := running(t, p.b)
	t.Cleanup(func() { stopB(); p.b.Close(context.Background()) })
	if writing(p.b) {
		t.Fatal("b took the lease a holds")
	}
	nc, err := nats.Connect(p.node.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p.client = transport.NewClient(nc)
	return p
}

func (p *pair) open(name string, builtin bool) *Server {
	cfg := testConfig(p.t.TempDir())
	cfg.Node.Listen, cfg.Node.NatsURL, cfg.HTTP, cfg.BuiltinWorker = "", p.node.ClientURL(), "", builtin
	cfg.Notify = notify.Notifier{URL: p.h.srv.URL + "/" + name, Attempts: 2, Backoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Pause: 50 * time.Millisecond, LateEvery: 100 * time.Millisecond}
	s, err := Open(p.t.Context(), cfg)
	if err != nil {
		p.t.Fatalf("open %s: %v", name, err)
	}
	return s
}

func writing(s *Server) bool { on, _ := s.member.Writing(); return on }

// do sends c until it is accepted (asked again with its id while the
// writer changes), within 30s.
func (p *pair) do(c commands.Command) commands.Reply {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(p.t.Context(), 5*time.Second)
		r, err := p.client.Do(ctx, c)
		cancel()
		if err == nil && r.Accepted {
			return r
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%T not accepted within 30s: %+v %v", c, r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handOver stops a's Run (its writer loops first), then closes a, which
// gives the lease up, and waits until b is the writer; the hook records
// the phases.
func (p *pair) handOver() {
	p.t.Helper()
	p.h.setPhase(handover)
	p.stopA()
	if err := p.a.Close(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.h.setPhase(bAlone)
	waitFor(p.t, "b is the writer", 30*time.Second, func() bool { return writing(p.b) })
}

// checkOneSender fails t for every POST but the writer's: b's while a
// was the writer, a's acknowledged after it closed, and any POST of a
// key already acknowledged (a notice not acknowledged may be sent again,
// by either: receivers drop repeats by key). It returns, by key, the
// member whose POST was acknowledged.
func checkOneSender(t *testing.T, posts []hookPost) map[string]string {
	t.Helper()
	ackedBy := map[string]string{}
	for _, p := range posts {
		switch {
		case p.member == "/b" && p.phase == bothRun:
			t.Errorf("b (not the writer) sent %v while a was the writer", p)
		case p.member == "/a" && p.phase == bAlone && p.acked:
			t.Errorf("a sent %v after it closed", p)
		case p.member != "/a" && p.member != "/b":
			t.Errorf("a POST to %q", p.member)
		}
		if p.key == "" || p.key != p.notice.Key || !strings.HasPrefix(p.key, "tidemark-") {
			t.Errorf("POST with Idempotency-Key %q, notice key %q", p.key, p.notice.Key)
		}
		if by, ok := ackedBy[p.key]; ok {
			t.Errorf("%v: sent again after %s's POST of it was acknowledged", p, by)
		}
		if p.acked {
			ackedBy[p.key] = p.member
		}
	}
	return ackedBy
}

// TestNotifyOneSenderAcrossFailover: while both members run only the
// writer (a) sends; a notice the endpoint has not acknowledged when a
// hands over (it answers 500 to a for plan p2's decision) is sent by the
// new writer (b), and nothing a had delivered is delivered again by b;
// the decisions b makes are notified by b. Every decision's notice is
// acknowledged exactly once, in the stream's order.
func TestNotifyOneSenderAcrossFailover(t *testing.T) {
	h := newHook(t)
	defer func() {
		if t.Failed() {
			t.Logf("the endpoint's POSTs, in order: %v", h.all())
		}
	}()
	// p2's decision stays unacknowledged while a sends it: a hands over
	// in the middle of its attempts.
	h.refuse = func(member string, nt notify.Notice) bool {
		return member == "/a" && nt.Kind == notify.KindPromotion && nt.Plan == "p2"
	}
	c := newPair(t, h, true)
	c.do(&commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg"}, Model: "events", Version: "v1", Cron: "@hourly",
		Start: time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)})
	// decide builds plan id for its own env and promotes it once its
	// backfill is done: one decision.
	decide := func(id string) {
		t.Helper()
		c.do(&commands.BuildPlan{Meta: commands.Meta{ID: "build-" + id}, Plan: id, Env: "env-" + id, Versions: map[string]string{"events": "v1"}})
		waitFor(t, "plan "+id+" backfilled", 30*time.Second, func() bool {
			r, err := c.client.Do(t.Context(), &commands.Status{})
			if err != nil {
				return false
			}
			for _, p := range r.Plans {
				if p.Plan == id {
					return p.DoneMS == p.BackfillMS
				}
			}
			return false
		})
		if r := c.do(&commands.Promote{Meta: commands.Meta{ID: "promote-" + id}, Plan: id}); r.Decision == nil {
			t.Fatalf("promote %s recorded no decision: %+v", id, r)
		}
	}
	decisionPosts := func(plan, member string) func(hookPost) bool {
		return func(p hookPost) bool {
			return p.notice.Kind == notify.KindPromotion && p.notice.Plan == plan && (member == "" || p.member == member)
		}
	}
	acked := func(plan string) func(hookPost) bool {
		return func(p hookPost) bool { return p.acked && decisionPosts(plan, "")(p) }
	}

	decide("p1")
	waitFor(t, "p1's notice acknowledged", 30*time.Second, func() bool { return h.count(acked("p1")) > 0 })
	decide("p2")
	waitFor(t, "a retrying p2's notice", 30*time.Second, func() bool { return h.count(decisionPosts("p2", "/a")) >= 2 })
	c.handOver()
	decide("p3")
	decide("p4")
	plans := []string{"p1", "p2", "p3", "p4"}
	waitFor(t, "every decision's notice acknowledged", 30*time.Second, func() bool {
		for _, p := range plans {
			if h.count(acked(p)) == 0 {
				return false
			}
		}
		return true
	})

	posts := h.all()
	if !decisionPosts("p1", "/a")(posts[0]) {
		t.Errorf("the first POST is not p1's decision from a: %v", posts[0])
	}
	checkOneSender(t, posts)
	var order []string // the decisions acknowledged, in order
	for _, p := range posts {
		if p.acked && p.notice.Kind == notify.KindPromotion {
			order = append(order, p.notice.Plan)
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(plans) {
		t.Errorf("decisions acknowledged %v, want each once, in order: %v", order, plans)
	}
	for plan, want := range map[string]string{"p1": "/a", "p2": "/b", "p3": "/b", "p4": "/b"} {
		for _, p := range posts {
			if acked(plan)(p) && p.member != want {
				t.Errorf("%s's decision delivered by %s, want %s", plan, p.member, want)
			}
		}
	}
}

// TestNotifyLatenessAcrossFailover: an incumbent said late by the writer
// (a) is not said late again by the member that takes over (b), which
// judges lateness from the late set a saved, not the one b read when it
// opened; b says it is on time once it is. No worker runs: the test
// records the computed intervals itself.
func TestNotifyLatenessAcrossFailover(t *testing.T) {
	h := newHook(t)
	defer func() {
		if t.Failed() {
			t.Logf("the endpoint's POSTs, in order: %v", h.all())
		}
	}()
	c := newPair(t, h, false)
	start := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	c.do(&commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg"}, Model: "events", Version: "v1", Cron: "@hourly", Start: start})
	c.do(&commands.BuildPlan{Meta: commands.Meta{ID: "build"}, Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1"}})
	complete := func(id string, from time.Time) {
		t.Helper()
		to := time.Now().UTC().Truncate(time.Hour)
		c.do(&commands.CompleteIntervals{Meta: commands.Meta{ID: id}, Model: "events", Version: "v1", Ranges: []interval.Range{interval.R(from, to)}})
	}
	complete("computed", start)
	if r := c.do(&commands.Promote{Meta: commands.Meta{ID: "promote"}, Plan: "p1"}); r.Decision == nil || r.Decision.Outcome != events.Accepted {
		t.Fatalf("promote: %+v", r)
	}
	// Three hours taken back: the incumbent trails its ready intervals by
	// more than one, so it is late.
	c.do(&commands.InvalidateIntervals{Meta: commands.Meta{ID: "invalidate"}, Model: "events", Version: "v1",
		Ranges: []interval.Range{interval.R(start.Add(2*time.Hour), start.Add(5*time.Hour))}, Reason: "late raw rows"})
	kind := func(k, member string) func(hookPost) bool {
		return func(p hookPost) bool { return p.acked && p.notice.Kind == k && (member == "" || p.member == member) }
	}
	waitFor(t, "a says the incumbent late", 30*time.Second, func() bool { return h.count(kind(notify.KindLate, "/a")) > 0 })
	c.handOver()
	complete("recomputed", start.Add(2*time.Hour))
	waitFor(t, "b says the incumbent on time", 30*time.Second, func() bool { return h.count(kind(notify.KindOnTime, "/b")) > 0 })

	checkOneSender(t, h.all())
	if n := h.count(kind(notify.KindLate, "")); n != 1 {
		t.Errorf("%d late notices acknowledged, want 1", n)
	}
	if n := h.count(kind(notify.KindOnTime, "")); n != 1 {
		t.Errorf("%d on_time notices acknowledged, want 1", n)
	}
	if n := h.count(kind(notify.KindPromotion, "/a")); n != 1 {
		t.Errorf("%d decisions acknowledged from a, want 1", n)
	}
}
