package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/notify"
)

// posted is one POST the endpoint received and what it answered.
type posted struct {
	header string // Idempotency-Key
	notice notify.Notice
	status int
}

// endpoint is a notification receiver: it records every POST and answers
// what status says (200 when nil).
type endpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	posts  []posted
	status func(n int, nt notify.Notice) int // n counts the POSTs, from 1
	hang   func(r *http.Request) bool        // hold the request until it is cancelled
}

func newEndpoint(t *testing.T) *endpoint {
	t.Helper()
	e := &endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var nt notify.Notice
		if err := json.Unmarshal(b, &nt); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("endpoint: %s %s %q: %v", r.Method, r.Header.Get("Content-Type"), b, err)
		}
		e.mu.Lock()
		code := http.StatusOK
		if e.status != nil {
			code = e.status(len(e.posts)+1, nt)
		}
		hang := e.hang
		if hang != nil && hang(r) {
			code = 0 // never answered
		}
		e.posts = append(e.posts, posted{header: r.Header.Get("Idempotency-Key"), notice: nt, status: code})
		e.mu.Unlock()
		if code == 0 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// where is the POSTs keep keeps, in order.
func (e *endpoint) where(keep func(posted) bool) []posted {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []posted
	for _, p := range e.posts {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// acked is the notices acknowledged (2xx) of kind, in order.
func (e *endpoint) acked(kind string) []posted {
	return e.where(func(p posted) bool { return p.notice.Kind == kind && p.status >= 200 && p.status < 300 })
}

// tries is every POST of key.
func (e *endpoint) tries(key string) []posted {
	return e.where(func(p posted) bool { return p.header == key })
}

// twiceAcked is a key acknowledged more than once, or "".
func (e *endpoint) twiceAcked() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range e.posts {
		if p.status >= 200 && p.status < 300 {
			if seen[p.header] {
				return p.header
			}
			seen[p.header] = true
		}
	}
	return ""
}

// TestNotifyPromotion: `serve --notify-url` POSTs one document for a
// promotion decision, sent again with the same Idempotency-Key while the
// endpoint answers 500 (twice) until it is acknowledged; a restart of
// serve on the same store sends nothing acknowledged again, and goes on
// with what comes next.
func TestNotifyPromotion(t *testing.T) {
	ep := newEndpoint(t)
	ep.status = func(n int, nt notify.Notice) int {
		if nt.Kind == notify.KindPromotion && n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	flags := []string{"--builtin-worker", "--warehouse", "none", "--notify-url", ep.srv.URL, "--notify-backoff", "50ms"}
	s := startServe(t, flags...)
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	models := modelFile(t, start, "    version: v1\n")
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	version := "v1"
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events="+version, "--id", "d1", "--wait", "1m", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "d1: ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the decision is acknowledged", time.Minute, func() bool { return len(ep.acked(notify.KindPromotion)) > 0 })
	got := ep.acked(notify.KindPromotion)
	if len(got) != 1 {
		t.Fatalf("%d promotion notices acknowledged, want 1: %+v", len(got), got)
	}
	nt := got[0].notice
	key := "tidemark-" + strconv.FormatUint(nt.Seq, 10)
	if got[0].header != key || nt.Key != key || nt.Env != "prod" || nt.Plan != "d1" || nt.Outcome != "accepted" ||
		len(nt.Codes) == 0 || nt.Codes[0] != "no_gaps" || nt.Time.IsZero() || !strings.Contains(nt.Message, "plan d1 for prod: ACCEPTED") ||
		nt.Link != s.http+"/decisions/"+strconv.FormatUint(nt.Seq, 10) {
		t.Fatalf("the decision's notice: key %q %+v", got[0].header, nt)
	}
	tries := ep.tries(key)
	if len(tries) != 3 || tries[0].status != 500 || tries[1].status != 500 || tries[2].status != 200 {
		t.Fatalf("want the decision sent 3 times (500, 500, 200) with key %s, got %+v", key, tries)
	}

	// A restart sends nothing acknowledged again: the next decision's
	// notice is the next thing the endpoint sees of decisions.
	// After it, the links are on the dashboard's address as the
	// receivers reach it (--notify-dashboard-url), not the listener's.
	s.stop()
	s = startServe(t, append([]string{"--data-dir", s.dataDir, "--notify-dashboard-url", "https://tidemark.example.com/"}, flags...)...)
	if out, stderr, code := runCLI(t, "plan", "--env", "dev", "--set", "events="+version, "--id", "d2", "--wait", "1m", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan d2: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "promote", "d2", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "d2: ACCEPTED") {
		t.Fatalf("promote d2: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the second decision is acknowledged", time.Minute, func() bool { return len(ep.acked(notify.KindPromotion)) > 1 })
	got = ep.acked(notify.KindPromotion)
	if len(got) != 2 || got[1].notice.Plan != "d2" || got[1].notice.Seq <= nt.Seq {
		t.Fatalf("after the restart: %+v", got)
	}
	if want := "https://tidemark.example.com/decisions/" + strconv.FormatUint(got[1].notice.Seq, 10); got[1].notice.Link != want {
		t.Fatalf("after the restart, the link %q, want %q", got[1].notice.Link, want)
	}
	if len(ep.tries(key)) != 3 {
		t.Fatalf("the first decision was sent again after the restart: %+v", ep.tries(key))
	}
	if k := ep.twiceAcked(); k != "" {
		t.Fatalf("%s acknowledged twice", k)
	}
}

// TestNotifyFailedWork: a work item its worker gives up on is one POST
// (kind work_failed, with the model, the run and the error's text); its
// attempt that was tried again is none.
func TestNotifyFailedWork(t *testing.T) {
	ep := newEndpoint(t)
	s := startServe(t, "--notify-url", ep.srv.URL, "--notify-backoff", "50ms")
	startWorker(t, s.nats, "echo broken >&2; exit 3")
	start := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	models := modelFile(t, start, "    version: v1\n")
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events=v1", "--id", "d1", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the failed work is acknowledged", time.Minute, func() bool { return len(ep.acked(notify.KindWorkFailed)) > 0 })
	// The decision after it is notified after it: any other notice of the
	// failure would have come first.
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 1 || !strings.Contains(out, "d1: REJECTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	eventually(t, "the rejection is acknowledged", time.Minute, func() bool { return len(ep.acked(notify.KindPromotion)) > 0 })
	got := ep.acked(notify.KindWorkFailed)
	if len(got) != 1 {
		t.Fatalf("%d work_failed notices, want 1: %+v", len(got), got)
	}
	nt := got[0].notice
	if nt.Model != "events" || nt.Snapshot != "events@v1" || nt.RunKind != "backfill" || nt.RunID != "backfill:d1" || nt.Plan != "d1" ||
		nt.Attempt != 2 || !strings.Contains(nt.Error, "exit status 3") || !strings.Contains(nt.Message, "events@v1 backfill work given up after 2 attempt(s)") ||
		nt.Link != s.http+"/plans/d1" || got[0].header != nt.Key {
		t.Fatalf("the failure's notice: %+v", nt)
	}
	if rej := ep.acked(notify.KindPromotion)[0].notice; rej.Outcome != "rejected" || rej.Seq <= nt.Seq {
		t.Fatalf("the rejection's notice: %+v", rej)
	}
}

// TestNotifyHungEndpoint: an endpoint that never answers holds the
// notifier, not the engine: plan and promote answer meanwhile.
func TestNotifyHungEndpoint(t *testing.T) {
	ep := newEndpoint(t)
	entered := make(chan struct{}, 1)
	ep.hang = func(*http.Request) bool {
		select {
		case entered <- struct{}{}:
		default:
		}
		return true
	}
	s := startServe(t, "--builtin-worker", "--warehouse", "none", "--notify-url", ep.srv.URL)
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	models := modelFile(t, start, "    version: v1\n")
	run := func(args ...string) (string, string, int) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		return runCLIWithin(ctx, append(args, "--nats-url", s.nats)...)
	}
	if out, stderr, code := run("apply", "-f", models); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := run("plan", "--env", "prod", "--set", "events=v1", "--id", "d1", "--wait", "1m"); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := run("promote", "d1"); code != 0 || !strings.Contains(out, "d1: ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the decision was not POSTed within a minute")
	}
	// The endpoint holds the decision's POST: the command path answers.
	for _, env := range []string{"dev", "qa"} {
		id := "p-" + env
		if out, stderr, code := run("plan", "--env", env, "--set", "events=v1", "--id", id, "--wait", "1m"); code != 0 {
			t.Fatalf("plan %s while the endpoint hangs: exit %d %s %s", id, code, out, stderr)
		}
		if out, stderr, code := run("promote", id); code != 0 || !strings.Contains(out, id+": ACCEPTED") {
			t.Fatalf("promote %s while the endpoint hangs: exit %d %s %s", id, code, out, stderr)
		}
	}
	if len(ep.acked(notify.KindPromotion)) != 0 {
		t.Fatal("a notice was acknowledged by an endpoint that never answers")
	}
}

// TestNotifyLateness: a model whose last three hours are restated while
// no worker runs is late: one POST of kind restatement, then one of kind
// late with its frontier and readiness frontier; a restart of serve does
// not send it again; once a worker recomputes them, one POST of kind
// on_time.
func TestNotifyLateness(t *testing.T) {
	ep := newEndpoint(t)
	flags := []string{"--notify-url", ep.srv.URL, "--notify-backoff", "50ms", "--notify-late-every", "50ms"}
	s := startServe(t, flags...)
	start := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	stopWorker := startWorkerStop(t, s.nats, "true")
	models := modelFile(t, start, "    version: v1\n")
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events=v1", "--id", "d1", "--wait", "1m", "--nats-url", s.nats); code != 0 {
		t.Fatalf("plan: exit %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "d1: ACCEPTED") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}
	stopWorker()
	if len(ep.acked(notify.KindLate)) != 0 {
		t.Fatalf("late before the restatement: %+v", ep.acked(notify.KindLate))
	}
	restated := start.Add(2*time.Hour).Format(time.RFC3339) + "/" + start.Add(5*time.Hour).Format(time.RFC3339)
	if out, stderr, code := runCLI(t, "restate", "--env", "prod", "--model", "events", "--range", restated, "--reason", "late raw rows", "--nats-url", s.nats); code != 0 {
		t.Fatalf("restate: exit %d %s %s", code, out, stderr)
	}
	// Lateness is judged on the live state beside the stream's notices:
	// the late notice may come before the restatement's.
	eventually(t, "the restatement is notified and the model said late", time.Minute, func() bool {
		return len(ep.acked(notify.KindLate)) > 0 && len(ep.acked(notify.KindRestatement)) > 0
	})
	late := ep.acked(notify.KindLate)[0].notice
	if late.Env != "prod" || late.Model != "events" || late.Snapshot != "events@v1" || late.Frontier == nil || !late.Frontier.Equal(start.Add(2*time.Hour)) ||
		late.ReadyFrontier == nil || late.ReadyFrontier.Before(start.Add(5*time.Hour)) || !strings.Contains(late.Message, "events in prod (events@v1) is late") {
		t.Fatalf("the late notice: %+v", late)
	}
	if got := ep.acked(notify.KindRestatement); len(got) != 1 || got[0].notice.Env != "prod" || got[0].notice.Model != "events" || !strings.Contains(got[0].notice.Message, "late raw rows") {
		t.Fatalf("the restatement's notice: %+v", got)
	}

	// A restart keeps what it said: the model is late still, and not said
	// so again; a worker recomputes it, and it is on time.
	// After it, the links are on the dashboard's address as the
	// receivers reach it (--notify-dashboard-url), not the listener's.
	s.stop()
	s = startServe(t, append([]string{"--data-dir", s.dataDir, "--notify-dashboard-url", "https://tidemark.example.com/"}, flags...)...)
	startWorker(t, s.nats, "true")
	eventually(t, "the model is said on time", time.Minute, func() bool { return len(ep.acked(notify.KindOnTime)) > 0 })
	if got := ep.acked(notify.KindLate); len(got) != 1 {
		t.Fatalf("%d late notices, want 1: %+v", len(got), got)
	}
	on := ep.acked(notify.KindOnTime)
	if len(on) != 1 || on[0].notice.Model != "events" || on[0].notice.Frontier == nil || !on[0].notice.Frontier.After(start.Add(4*time.Hour)) {
		t.Fatalf("the on_time notice: %+v", on)
	}
	if k := ep.twiceAcked(); k != "" {
		t.Fatalf("%s acknowledged twice", k)
	}
}

// startWorkerStop is startWorker, stopped by the function it returns (or
// when the test ends).
func startWorkerStop(t *testing.T, natsURL, command string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"worker", "--nats-url", natsURL, "--exec", command, "--concurrency", "2", "--max-attempts", "2", "--log-format", "json"})
	done := make(chan struct{})
	go func() { defer close(done); _ = root.ExecuteContext(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestNotifyFlags: a --notify-url that is not an http(s) URL, or a
// --notify-attempts below 1, is a usage error naming the flag (exit 2),
// before anything starts.
func TestNotifyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--notify-url", "hooks.example.com/x"}, `--notify-url "hooks.example.com/x": want an http:// or https:// URL`},
		{[]string{"--notify-url", "ftp://example.com/x"}, `--notify-url "ftp://example.com/x"`},
		{[]string{"--notify-url", "http://127.0.0.1:1/x", "--notify-attempts", "0"}, "--notify-attempts 0: at least 1"},
		{[]string{"--notify-url", "http://127.0.0.1:1/x", "--notify-late-every", "0s"}, "--notify-late-every 0s: more than 0"},
		{[]string{"--notify-url", "http://127.0.0.1:1/x", "--notify-dashboard-url", "tidemark.example.com"}, `--notify-dashboard-url "tidemark.example.com": want an http:// or https:// URL`},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:-1", "--http", ""}, c.args...)
		// A serve that starts runs until the bound, then stops (exit 0).
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, stderr, code := runCLIWithin(ctx, args...)
		cancel()
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d %s, want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
