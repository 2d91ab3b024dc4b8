package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tidemark/tidemark/commands"
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
