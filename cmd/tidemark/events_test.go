package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/events"
)

func decodeLines(t *testing.T, out string) []eventLine {
	t.Helper()
	var ls []eventLine
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l eventLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		ls = append(ls, l)
	}
	return ls
}

// events tail and get on a stopped store (--data-dir): every event in
// order, filters, --limit, and a sequence the stream does not hold.
func TestEventsDataDir(t *testing.T) {
	dir := scenarioDir(t, "strict-race.yaml")
	out, stderr, code := runCLI(t, "events", "tail", "--data-dir", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("tail: exit %d %s", code, stderr)
	}
	all := decodeLines(t, out)
	if len(all) < 5 {
		t.Fatalf("only %d events", len(all))
	}
	for i, l := range all {
		if l.Seq != uint64(i+1) || l.Type == "" || l.At.IsZero() || !strings.HasPrefix(l.Subject, events.SubjectPrefix) || l.Payload == nil {
			t.Fatalf("event %d: %+v", i, l)
		}
	}
	out, _, code = runCLI(t, "events", "tail", "--data-dir", dir)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != len(all) ||
		!strings.HasPrefix(lines[0], "1\t"+all[0].At.Format(time.RFC3339)+"\t"+all[0].Subject+"\t"+all[0].Type+"\t{") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "events", "tail", "--data-dir", dir, "--subject", "plan.p1", "--from", "2", "--limit", "1", "-o", "json")
	if got := decodeLines(t, out); code != 0 || len(got) != 1 || got[0].Subject != events.PlanSubject("p1") || got[0].Seq < 2 {
		t.Fatalf("filtered: exit %d %s", code, out)
	}
	out, _, code = runCLI(t, "events", "tail", "--data-dir", dir, "--subject", "tidemark.evt.plan.*", "-o", "json")
	if code != 0 {
		t.Fatalf("wildcard: exit %d %s", code, out)
	}
	for _, l := range decodeLines(t, out) {
		if !strings.HasPrefix(l.Subject, events.SubjectPrefix+"plan.") {
			t.Fatalf("wildcard: %s", out)
		}
	}
	out, _, code = runCLI(t, "events", "get", "2", "--data-dir", dir, "-o", "json")
	if got := decodeLines(t, out); code != 0 || len(got) != 1 || got[0].Seq != 2 || got[0].Type != all[1].Type {
		t.Fatalf("get: exit %d %s", code, out)
	}
	if _, stderr, code := runCLI(t, "events", "get", "100000", "--data-dir", dir); code != exitNotFound || !strings.Contains(stderr, "no event at seq 100000") {
		t.Fatalf("get of a missing seq: exit %d %s", code, stderr)
	}
	if _, _, code := runCLI(t, "events", "get", "x", "--data-dir", dir); code != exitUsage {
		t.Fatalf("get x: exit %d", code)
	}
	if _, _, code := runCLI(t, "events", "tail", "--data-dir", dir, "--from", "2", "--since", "1h"); code != exitUsage {
		t.Fatalf("--from with --since: exit %d", code)
	}
	// The scenario's events occurred on its simulated clock, long ago.
	if out, _, code := runCLI(t, "events", "tail", "--data-dir", dir, "--since", "1h"); code != 0 || out != "" {
		t.Fatalf("--since 1h: exit %d %q", code, out)
	}
}

// events tail on a running server follows the stream: it prints events
// appended after it started, and stops after --limit.
func TestEventsTailFollows(t *testing.T) {
	s := startServe(t)
	models := modelFile(t, time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour), "")
	type result struct {
		out, stderr string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, stderr, code := runCLI(t, "events", "tail", "--nats-url", s.nats, "--subject", "snap.>", "--limit", "1", "-o", "json")
		done <- result{out, stderr, code}
	}()
	time.Sleep(200 * time.Millisecond)
	if _, stderr, code := runCLI(t, "apply", "-f", models, "--nats-url", s.nats); code != 0 {
		t.Fatalf("apply: exit %d %s", code, stderr)
	}
	select {
	case r := <-done:
		got := decodeLines(t, r.out)
		if r.code != 0 || len(got) != 1 || got[0].Type != string(events.TypeSnapshotRegistered) || got[0].Actor != "cli:apply" {
			t.Fatalf("tail: exit %d %s %s", r.code, r.out, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not print the registration within 30s")
	}
	out, _, code := runCLI(t, "events", "get", "1", "--nats-url", s.nats)
	if code != 0 || !strings.HasPrefix(out, "1\t") {
		t.Fatalf("get 1: exit %d %q", code, out)
	}
	// Interrupted (Ctrl-C cancels the command's context), tail has
	// printed what the stream holds and exits 0.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(time.Second, cancel)
	out, stderr, code := runCLIWithin(ctx, "events", "tail", "--nats-url", s.nats)
	if code != 0 || !strings.HasPrefix(out, "1\t") {
		t.Fatalf("interrupted tail: exit %d %q %s", code, out, stderr)
	}
}
