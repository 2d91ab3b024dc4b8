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
	"github.com/tidemark/tidemark/internal/jstest"
	"github.com/tidemark/tidemark/notify"
	"github.com/tidemark/tidemark/transport"
)

// Phases of TestNotifyOneSenderAcrossFailover, as the endpoint records
// them with each POST.
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
// came in and answers 200, or 500 when refuse says so.
type hook struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	phase  int
	posts  []hookPost
	refuse func(member string, nt notify.Notice) bool
}

func newHook(t *testing.T) *hook {
	h := &hook{t: t}
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

// TestNotifyOneSenderAcrossFailover: two servers share one NATS server
// (two members of one cluster), each with --notify-url on its own path
// of one endpoint. While both run only the writer (a) sends; a notice the
// endpoint has not acknowledged when a hands over (it answers 500 to a
// for plan p2's decision) is sent by the new writer (b), and nothing a
// had delivered is delivered again by b; the decisions b makes are
// notified by b. Every decision's notice is acknowledged exactly once, in
// the stream's order.
func TestNotifyOneSenderAcrossFailover(t *testing.T) {
	node := jstest.Node(t)
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
	open := func(name string) *Server {
		cfg := testConfig(t.TempDir())
		cfg.Node.Listen, cfg.Node.NatsURL, cfg.HTTP = "", node.ClientURL(), ""
		cfg.Notify = notify.Notifier{URL: h.srv.URL + "/" + name, Attempts: 2, Backoff: 10 * time.Millisecond,
			MaxBackoff: 50 * time.Millisecond, Pause: 50 * time.Millisecond, LateEvery: 100 * time.Millisecond}
		s, err := Open(t.Context(), cfg)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		return s
	}
	writing := func(s *Server) bool { on, _ := s.member.Writing(); return on }

	a := open("a")
	defer a.Close(context.Background())
	stopA := running(t, a)
	waitFor(t, "a is the writer", 30*time.Second, func() bool { return writing(a) })
	b := open("b")
	defer b.Close(context.Background())
	stopB := running(t, b)
	defer stopB()
	if writing(b) {
		t.Fatal("b took the lease a holds")
	}

	nc, err := nats.Connect(node.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client := transport.NewClient(nc)
	// do sends c until it is accepted (asked again with its id while the
	// writer changes), within 30s.
	do := func(c commands.Command) commands.Reply {
		t.Helper()
		var r commands.Reply
		var err error
		waitFor(t, fmt.Sprintf("%T accepted (last: %+v %v)", c, r, err), 30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			r, err = client.Do(ctx, c)
			return err == nil && r.Accepted
		})
		return r
	}
	do(&commands.RegisterSnapshot{Meta: commands.Meta{ID: "reg"}, Model: "events", Version: "v1", Cron: "@hourly",
		Start: time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)})
	// decide builds plan id for its own env and promotes it once its
	// backfill is done: one decision.
	decide := func(id string) {
		t.Helper()
		do(&commands.BuildPlan{Meta: commands.Meta{ID: "build-" + id}, Plan: id, Env: "env-" + id, Versions: map[string]string{"events": "v1"}})
		waitFor(t, "plan "+id+" backfilled", 30*time.Second, func() bool {
			r, err := client.Do(t.Context(), &commands.Status{})
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
		if r := do(&commands.Promote{Meta: commands.Meta{ID: "promote-" + id}, Plan: id}); r.Decision == nil {
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

	// Hand over: a stops (its loops first), then closes, giving the lease
	// up; b takes it and makes the next decisions.
	h.setPhase(handover)
	stopA()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.setPhase(bAlone)
	waitFor(t, "b is the writer", 30*time.Second, func() bool { return writing(b) })
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
	if len(posts) == 0 || !decisionPosts("p1", "/a")(posts[0]) {
		t.Errorf("the first POST is not p1's decision from a: %v", posts[:min(len(posts), 1)])
	}
	ackedBy := map[string]string{} // key: the member whose POST of it was acknowledged
	var order []string             // the decisions acknowledged, in order
	for _, p := range posts {
		switch {
		case p.member == "/b" && p.phase == bothRun:
			t.Errorf("b (not the writer) sent %s (%s %s) while a was the writer", p.key, p.notice.Kind, p.notice.Plan)
		case p.member == "/a" && p.phase == bAlone && p.acked:
			t.Errorf("a sent %s (%s %s) after it closed", p.key, p.notice.Kind, p.notice.Plan)
		case p.member != "/a" && p.member != "/b":
			t.Errorf("a POST to %q", p.member)
		}
		if p.key == "" || p.key != p.notice.Key || !strings.HasPrefix(p.key, "tidemark-") {
			t.Errorf("POST with Idempotency-Key %q, notice key %q", p.key, p.notice.Key)
		}
		if by, ok := ackedBy[p.key]; ok {
			t.Errorf("%s (%s %s) sent again by %s after %s's POST of it was acknowledged", p.key, p.notice.Kind, p.notice.Plan, p.member, by)
		}
		if p.acked {
			ackedBy[p.key] = p.member
			if p.notice.Kind == notify.KindPromotion {
				order = append(order, p.notice.Plan)
			}
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
