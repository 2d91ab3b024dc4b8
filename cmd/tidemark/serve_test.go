package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
	"github.com/tidemark/tidemark/events/interval"
	"github.com/tidemark/tidemark/transport"
)

// TestServe starts `tidemark serve` on a random loopback port, sends
// commands over NATS, and stops it by cancelling its context (as SIGINT
// does).
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	dataDir := t.TempDir()
	root.SetArgs([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:-1", "--http", "", "--log-format", "json"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	url := strings.Fields(strings.TrimPrefix(line, "tidemark serving on "))[0]
	if !strings.HasPrefix(url, "nats://127.0.0.1:") {
		t.Fatalf("serve line: %q", line)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewClient(nc)
	c.JSON = true
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	r, err := c.Do(ctx, &commands.RegisterSnapshot{Model: "events", Version: "v1", Cron: "@hourly", Start: start})
	if err != nil || !r.Accepted {
		t.Fatalf("register: %+v %v", r, err)
	}
	r, err = c.Do(ctx, &commands.BuildPlan{Plan: "p1", Env: "prod", Versions: map[string]string{"events": "v1"}})
	if err != nil || !r.Accepted || len(r.Plan.Candidates) != 1 {
		t.Fatalf("plan: %+v %v", r, err)
	}
	r, err = c.Do(ctx, &commands.CompleteIntervals{Model: "events", Version: "v1", Ranges: r.Plan.Candidates[0].Backfill, RunKind: "backfill"})
	if err != nil || !r.Accepted {
		t.Fatalf("complete: %+v %v", r, err)
	}
	r, err = c.Do(ctx, &commands.Promote{Plan: "p1"})
	if err != nil || !r.Accepted || r.Decision.Outcome != "accepted" {
		t.Fatalf("promote: %+v %v", r, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of cancellation")
	}

	// The stopped server's data dir is auditable and replays cleanly.
	out, stderr, code := runCLI(t, "replay", "--data-dir", dataDir, "--verify")
	if code != 0 || !strings.Contains(out, "0 divergence(s)") || stderr != "" {
		t.Fatalf("replay --verify on the serve data dir: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = runCLI(t, "audit", "--data-dir", dataDir, "--plan", "p1")
	if code != 0 || !strings.Contains(out, "PromotionDecided") || !strings.Contains(out, "p1 accepted [no_gaps]") {
		t.Fatalf("audit on the serve data dir: exit %d\n%s", code, out)
	}
}

// TestServeBuiltinWorker: `serve --builtin-worker` computes a plan's
// backfill set by itself (nobody else runs work), so the plan promotes;
// `status --wait-advance` returns once the scheduler's advance has moved
// the incumbent's frontier (its work also computed in-process).
func TestServeBuiltinWorker(t *testing.T) {
	s := startServe(t, "--builtin-worker")
	// A daily model: the server's wall-clock scheduler ticks at midnight
	// only, so the test drives the advance itself.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	models := filepath.Join(t.TempDir(), "models.yaml")
	os.WriteFile(models, []byte("models:\n  - name: events\n    version: v1\n    cron: \"@daily\"\n    start: "+today.AddDate(0, 0, -3).Format(time.RFC3339)+"\n"), 0o644)
	if out, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s %s", code, out, stderr)
	}
	// plan --wait returns once the built-in worker has computed the
	// backfill set.
	if out, stderr, code := runCLI(t, "plan", "--env", "prod", "--set", "events=v1", "--id", "d1", "--nats-url", s.nats, "--wait", "30s"); code != 0 ||
		!strings.Contains(stderr, "plan d1: backfill complete") {
		t.Fatalf("plan --wait: exit %d %s %s", code, out, stderr)
	}
	if out, _, code := runCLI(t, "audit", "--nats-url", s.nats, "--model", "events"); code != 0 || !strings.Contains(out, "(backfill)") {
		t.Fatalf("plan --wait returned before the backfill was recorded:\n%s", out)
	}
	if out, stderr, code := runCLI(t, "promote", "d1", "--nats-url", s.nats); code != 0 || !strings.Contains(out, "d1: ACCEPTED [no_gaps]") {
		t.Fatalf("promote: exit %d %s %s", code, out, stderr)
	}

	// Take the last day away, then advance the scheduler: its work refills
	// the day and the frontier moves back to today.
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := transport.NewClient(nc)
	ctx := t.Context()
	yesterday := interval.R(today.AddDate(0, 0, -1), today)
	if r, err := c.Do(ctx, &commands.InvalidateIntervals{Model: "events", Version: "v1", Ranges: []interval.Range{yesterday}, Reason: "test"}); err != nil || !r.Accepted {
		t.Fatalf("invalidate: %+v %v", r, err)
	}
	// status --wait-advance, its stderr followed to know when it has read
	// the frontier it waits to see move.
	root := newRootCmd()
	var out strings.Builder
	pr, pw := io.Pipe()
	root.SetOut(&out)
	root.SetErr(pw)
	root.SetArgs([]string{"status", "--nats-url", s.nats, "--wait-advance", "30s"})
	waited := make(chan error, 1)
	go func() { waited <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if want := "waiting up to 30s for the scheduler to advance prod/events at " + yesterday.Start.Format(time.RFC3339); err != nil || !strings.Contains(line, want) {
		t.Fatalf("status --wait-advance said %q (%v), want %q", line, err, want)
	}
	go io.Copy(io.Discard, pr)
	r, err := c.Do(ctx, &commands.Status{Env: "prod"})
	if err != nil || !r.Accepted {
		t.Fatalf("status: %+v %v", r, err)
	}
	if r, err := c.Do(ctx, &commands.AdvanceScheduler{Env: "prod", Generation: r.Envs[0].Generation}); err != nil || !r.Accepted || len(r.Advances) != 1 {
		t.Fatalf("advance: %+v %v", r, err)
	}
	// The row: ENV GEN MODEL INCUMBENT STATE FRONTIER ...
	if err := <-waited; err != nil || !strings.Contains(out.String(), "prod  1    events  events@v1  ok     "+today.Format(time.RFC3339)) {
		t.Fatalf("status --wait-advance: %v\n%s", err, out.String())
	}
	if _, stderr, code := runCLI(t, "status", "--nats-url", s.nats, "--wait-advance", "1s"); code != 1 || !strings.Contains(stderr, "did not advance every incumbent within 1s") {
		t.Fatalf("status --wait-advance without a tick: exit %d %s", code, stderr)
	}
}

// TestServeTwiceOnOneDataDir: a second serve on the data dir of a running
// one fails at once (the OS lock), naming the directory and the holder's
// pid, and so does a reader's --data-dir; once the first has stopped, a
// serve starts there again.
func TestServeTwiceOnOneDataDir(t *testing.T) {
	first := startServe(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	want := []string{"the data dir " + first.dataDir + " is in use by pid " + strconv.Itoa(os.Getpid()), "serve.lock"}
	_, stderr, code := runCLIWithin(ctx, "serve", "--data-dir", first.dataDir, "--listen", "127.0.0.1:-1", "--http", "", "--no-sync")
	for _, w := range want {
		if code != exitUsage || !strings.Contains(stderr, w) {
			t.Fatalf("second serve: exit %d, stderr lacks %q:\n%s", code, w, stderr)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the second serve did not fail at once")
	}
	if _, stderr, code := runCLIWithin(ctx, "status", "--data-dir", first.dataDir); code == 0 || !strings.Contains(stderr, want[0]) {
		t.Fatalf("status --data-dir on a running serve's dir: exit %d %s", code, stderr)
	}
	first.stop()
	third := startServe(t, "--data-dir", first.dataDir)
	third.stop()
}

// A port in use (clients, cluster routes, HTTP) fails serve, naming the
// address, instead of waiting for a server that never becomes ready.
func TestServeBusyPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"listen", []string{"--listen", addr}},
		{"cluster", []string{"--listen", "127.0.0.1:-1", "--cluster", "c", "--cluster-listen", addr, "--routes", "nats://" + addr}},
		{"http", []string{"--listen", "127.0.0.1:-1", "--http", addr}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", t.TempDir(), "--http", "127.0.0.1:0", "--no-sync"}, c.args...)
			_, stderr, code := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, addr) || !strings.Contains(stderr, "address already in use") {
				t.Fatalf("serve %v: exit %d: %s", c.args, code, stderr)
			}
		})
	}
}
